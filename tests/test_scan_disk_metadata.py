"""``bkdisk scan-disk`` on a golden bookie, as a process, with and without ledger metadata: a ledger is
an orphan only when metadata was read and does not hold it; without metadata the file says pass 7
was skipped (fsck's METADATA_SKIPPED), no ledger is an orphan and none is counted garbage."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pyarrow.compute as pc
import pyarrow.parquet as pq
from conftest import GOLDEN

BKDISK = os.path.join(os.path.dirname(sys.executable), "bkdisk")
ROOT = GOLDEN / "interleaved-v6-hostport"
LEDGERS = {0, 1, 255, 256, 0x1234}


def _scan(out, *extra: str) -> dict[str, list[dict]]:
    p = subprocess.run([BKDISK, "scan-disk", str(ROOT), "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    t = pq.read_table(out)
    return {name: t.filter(pc.equal(t["table"], name)).to_pylist() for name in ("findings", "space")}


def test_without_metadata_no_ledger_is_an_orphan_and_the_file_says_none_was_given(tmp_path):
    got = _scan(tmp_path / "disk.parquet")
    codes = [f["code"] for f in got["findings"]]
    assert "ORPHAN_LEDGER" not in codes, codes
    skipped = [f for f in got["findings"] if f["code"] == "METADATA_SKIPPED"]
    assert len(skipped) == 1 and skipped[0]["severity"] == "info"
    assert "no ledger metadata given" in skipped[0]["message"], skipped[0]["message"]
    ledgers = [r for r in got["space"] if r["kind"] == "ledger"]
    assert {int(r["ledger"]) for r in ledgers} == LEDGERS
    assert {r["state"] for r in ledgers} == {"live"}   # (liveness from the bookie's own index)
    assert not any(f["message"].endswith("the ledger metadata given does not hold this ledger")
                   for f in got["findings"])


def test_with_metadata_a_ledger_it_lacks_is_the_one_orphan(tmp_path):
    md = tmp_path / "md"
    shutil.copytree(ROOT / "metadata", md)
    full = _scan(tmp_path / "full.parquet", "--metadata-dir", str(md))
    assert not [f for f in full["findings"] if f["code"] in ("ORPHAN_LEDGER", "METADATA_SKIPPED")]
    for f in md.glob("100.*"):   # ledger 256's files: deleted from metadata
        f.unlink()
    got = _scan(tmp_path / "lacking.parquet", "--metadata-dir", str(md))
    orphans = [f["ledger_id"] for f in got["findings"] if f["code"] == "ORPHAN_LEDGER"]
    assert orphans == [256]
    states = {int(r["ledger"]): r["state"] for r in got["space"] if r["kind"] == "ledger"}
    assert states[256] != "live" and {states[k] for k in LEDGERS - {256}} == {"live"}, states
