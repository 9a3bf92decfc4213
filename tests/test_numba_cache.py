"""The jitted kernels are compiled once and then loaded from numba's cache by later processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import diskio.config
import diskio.kernels
import entrylogs.scan
import indexfiles.scan
import journal.scan

REPO = Path(__file__).resolve().parents[1]
from conftest import GOLDEN

# Uses every kernel once (entry-log walk, digests, sniffing, journal walk, index listing and reads),
# then prints each dispatcher's cache statistics.
SCRIPT = r"""
import json, sys
from pathlib import Path
import numba
import diskio.kernels as K, diskio.digest_kernels as DK
import entrylogs.scan as E, entrylogs.walk as EW, journal.scan as J, journal.walk as JW
import indexfiles.scan as I, indexfiles.decode as ID
g = Path(sys.argv[1]) / "interleaved-v6-hostport"
for log in sorted(g.glob("ledgers*/current/*.log")):
    E.scan_entry_log(log, window=4096, digests=E.DigestPlan(), payload_hash="sha256")
data = bytearray(sorted(g.glob("ledgers*/current/*.log"))[0].read_bytes())
data[2000:9000] = bytes(7000)  # damage: resync, zero-tail test, probes
E.scan_entry_log("0.log", data=bytes(data), window=4096)
for txn in sorted(g.glob("journal/current/*.txn")):
    J.scan_journal(txn, window=4096)
I.walk_index_dirs([str(g / "ledgers0"), str(g / "ledgers1")])
I.read_index_locations(next(g.glob("ledgers*/current/*/*/*.idx")))
stats = {}
for mod in (K, DK, EW, JW, ID):
    for name, obj in sorted(vars(mod).items()):
        if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.__module__ == mod.__name__:
            s = obj.stats
            stats[f"{mod.__name__}.{name}"] = [sum(s.cache_hits.values()), sum(s.cache_misses.values()), s.cache_path]
print(json.dumps(stats))
"""


def _run(env_extra: dict[str, str]) -> dict[str, list]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(GOLDEN)], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _used(stats: dict[str, list]) -> dict[str, list]:
    return {k: v for k, v in stats.items() if v[0] + v[1] > 0}


def test_a_second_process_loads_every_kernel_from_the_cache_without_compiling():
    assert (GOLDEN / "interleaved-v6-hostport").is_dir(), f"golden corpus missing under {GOLDEN}"
    with tempfile.TemporaryDirectory() as cache:
        first = _used(_run({"NUMBA_CACHE_DIR": cache}))
        second = _used(_run({"NUMBA_CACHE_DIR": cache}))
        entry_points = {"entrylogs.walk.walk_entry_records", "diskio.digest_kernels.check_digests",
                        "diskio.digest_kernels.sniff_crc", "journal.walk.walk_journal_records",
                        "indexfiles.decode.decode_files", "diskio.kernels.last_nonzero"}
        assert entry_points <= set(first), sorted(entry_points - set(first))
        assert all(misses > 0 for _, misses, _ in (first[k] for k in entry_points))  # compiled on first use
        assert set(second) >= entry_points
        for name, (hits, misses, path) in second.items():
            assert misses == 0, f"{name} was compiled again in the second process"
            assert hits > 0
            assert path.startswith(cache), path
        assert any(Path(cache).rglob("*.nbi")) and any(Path(cache).rglob("*.nbc"))


def test_bkdisk_numba_cache_dir_sets_the_cache_folder_for_read_only_installs():
    with tempfile.TemporaryDirectory() as cache:
        stats = _used(_run({"BKDISK_NUMBA_CACHE_DIR": cache, "NUMBA_CACHE_DIR": "/nonexistent/ignored"}))
        assert stats and all(path.startswith(cache) for _, _, path in stats.values())
        assert any(Path(cache).rglob("*.nbi"))


def test_cache_configuration_is_documented_in_the_scanner_modules():
    for mod in (diskio.kernels, entrylogs.scan, journal.scan, indexfiles.scan):
        assert "NUMBA_CACHE_DIR" in mod.__doc__
    assert "BKDISK_NUMBA_CACHE_DIR" in diskio.config.__doc__
