"""The scanners with the fallback CRC forced (the table variant, as on a CPU without PCLMUL) give the
same results, record for record, as the default path; the configuration is read once, lazily, and
does not depend on what was imported first."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN

from bkdisk.digests.plan import DigestPlan
from bkdisk.digests.verify import recheck_digests
from bkdisk.diskio import config
from bkdisk.entrylogs.scan import scan_entry_log

REPO = Path(__file__).resolve().parents[1]
LOGS = (sorted(GOLDEN.glob("*/ledgers*/current/*.log"))
        + sorted(GOLDEN.glob("cluster-3/bookies/*/ledgers*/current/*.log")))


def _scan_all(variant: int | None, window: int = 1 << 16) -> list:
    plan = DigestPlan() if variant is None else DigestPlan(crc_variant=variant)
    scans = [scan_entry_log(p, window=window, digests=plan, payload_hash="sha256") for p in LOGS]
    for s in scans:
        recheck_digests(s, plan)
    return scans


def test_golden_entry_logs_exist():
    assert len(LOGS) >= 4, f"golden entry logs missing under {GOLDEN}"


def test_table_crc_gives_the_same_scan_as_the_default_record_for_record():
    default = _scan_all(None)
    table = _scan_all(config.CRC_TABLE)
    assert any(len(s.digests) for s in default)
    for d, t in zip(default, table):
        assert d.entries.tolist() == t.entries.tolist()
        assert d.problems.tolist() == t.problems.tolist()
        assert d.digests.tolist() == t.digests.tolist()
        assert d.payload_hashes == t.payload_hashes
    statuses = np.concatenate([s.digests["status"] for s in default])
    assert (statuses == 1).sum() > 0  # digests were really checked


@pytest.mark.parametrize("variant", config.supported_crc_variants())
def test_every_supported_variant_finds_the_same_corrupt_entry(variant: int, tmp_path: Path):
    log = LOGS[0]
    data = bytearray(log.read_bytes())
    base = scan_entry_log(log, digests=DigestPlan())
    victim = base.entries[len(base.entries) // 2]
    data[int(victim["offset"]) + int(victim["size"])] ^= 0x5A   # the payload's last byte
    got = scan_entry_log(log, data=bytes(data), window=8192, digests=DigestPlan(crc_variant=variant))
    bad = np.flatnonzero(got.digests["status"] == 2)
    assert bad.tolist() == [len(base.entries) // 2]


SCRIPT = r"""
import json, sys
import numba                      # imported before any bkdisk module on purpose
from bkdisk.diskio import config
from bkdisk.digests.plan import DigestPlan
from bkdisk.entrylogs.scan import scan_entry_log
import bkdisk.entrylogs.walk as W
plan = DigestPlan()
s = scan_entry_log(sys.argv[1], digests=plan)
print(json.dumps({"variant": config.crc_variant(), "plan_variant": plan.crc_variant,
                  "cache": W.walk_entry_records.stats.cache_path, "digests": s.digests.tolist()}))
"""


def _child(env_extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("BKDISK_CRC", "NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(LOGS[0])], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_bkdisk_crc_env_forces_the_table_variant_whatever_was_imported_first(warmed_cache):
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        shutil.copytree(warmed_cache, cache)   # (the variant is an argument of the kernels: none compiled here)
        forced = _child({"BKDISK_CRC": "table", "BKDISK_NUMBA_CACHE_DIR": cache})
        assert forced["variant"] == forced["plan_variant"] == config.CRC_TABLE
        assert forced["cache"].startswith(cache)   # numba imported first, and the cache dir still holds
    default = scan_entry_log(LOGS[0], digests=DigestPlan())
    assert forced["digests"] == [list(r) for r in default.digests.tolist()]
