"""A disk given by another path than the last run's (relative then absolute, another mount point, a disks
file) is the same disk to the scrub: its schedule, its carried findings and its payload hashes are kept, and
the state keeps it under one key. A carried error keeps the disk's status `errors` (scan-disk exits 4)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
from conftest import GOLDEN

from bkdisk.audit.scrub_state import read_state

BKDISK = os.path.join(os.path.dirname(sys.executable), "bkdisk")
FLIPPED = 6854          # a payload byte in bk-2.rack-a's 0.log


def _scan(cwd, root: str, out: str, day: int, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([BKDISK, "scan-disk", root, "--out", out, "--state", "S", "--as-of",
                           f"2026-01-0{day}T00:00:00Z", *extra], cwd=cwd, capture_output=True, text=True, timeout=300)


def _codes(path) -> set[str]:
    t = pq.read_table(path, columns=["table", "code"]).to_pylist()
    return {r["code"] for r in t if r["table"] == "findings"}


def test_a_disk_given_by_another_path_keeps_its_schedule_and_carried_findings(tmp_path):
    disk = tmp_path / "mnt" / "bk2"
    shutil.copytree(GOLDEN / "cluster-3" / "bookies" / "bk-2.rack-a", disk)
    log = disk / "ledgers" / "current" / "0.log"
    data = bytearray(log.read_bytes())
    data[FLIPPED] ^= 0xFF
    log.write_bytes(bytes(data))
    first = _scan(tmp_path, "mnt/bk2", "o1.parquet", 1, "--deep-all")
    assert first.returncode == 4 and "DIGEST_MISMATCH" in _codes(tmp_path / "o1.parquet"), first.stderr
    os.symlink(tmp_path / "mnt", tmp_path / "other-mount")     # the same disk at another mount point
    moved = str(tmp_path / "other-mount" / "bk2")
    second = _scan(tmp_path, moved, "o2.parquet", 2)
    assert second.returncode == 4, second.stderr                # the corruption is still there
    assert "scrub: 0 of 3 entry logs deep-checked" in second.stderr and "errors" in second.stderr, second.stderr
    assert "DIGEST_MISMATCH" in _codes(tmp_path / "o2.parquet")
    state = read_state(str(tmp_path / "S"))
    assert list(state) == [moved]
    assert all(s.last_deep is not None for s in state[moved].logs.values())
    hashes = pq.read_table(tmp_path / "o2.parquet", columns=["table", "payload_sha256"]).to_pylist()
    assert {len(r["payload_sha256"]) for r in hashes if r["table"] == "replicas" and r["payload_sha256"]} == {16}
