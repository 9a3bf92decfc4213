"""The scrub state's short payload hashes (audit/scrub_hashes.py): written per log as a deep read's
parts come, read back for a light log's part by offset, ledger and entry, and carried into the new
state only when this run read the log or its row did not change."""
from __future__ import annotations

import datetime
import hashlib
import os
from dataclasses import dataclass, replace

import numpy as np

from bkdisk.audit.scrub_hashes import HashWriter, carry, light_column, log_file
from bkdisk.audit.scrub_schedule import DiskIdentity, LogState
from bkdisk.audit.scrub_state import DiskState
from bkdisk.entrylogs.arrays import ENTRY_DTYPE
from bkdisk.entrylogs.identity import LogIdentity

T0 = datetime.datetime(2026, 11, 1, 2, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)


@dataclass
class Rows:
    """What the hashes take of bookie.inventory.LogRows."""
    entries: np.ndarray
    payload_sha256: np.ndarray | None = None
    hash_row: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.entries)


def rows(n: int, first: int = 0, payloads: list[bytes] | None = None) -> Rows:
    e = np.zeros(n, ENTRY_DTYPE)
    e["offset"] = 1024 + 100 * np.arange(first, first + n)
    e["ledger"] = np.uint64(2**64 - 5)   # a ledger id past 2^63: stored as Java's long
    e["entry"] = np.arange(first, first + n)
    if payloads is None:
        return Rows(e)
    sha = np.array([np.frombuffer(hashlib.sha256(p).digest(), np.uint8) for p in payloads])
    hash_row = np.arange(n, dtype=np.int64)
    hash_row[1] = -1   # a row without a payload hash
    return Rows(e, sha, hash_row)


def test_a_light_part_reads_the_short_hashes_of_its_offsets_from_the_last_deep_read(tmp_path):
    payloads = [bytes([i]) * 50 for i in range(10)]
    w = HashWriter(str(tmp_path), "/mnt/bk1")
    w.add(7, rows(6, 0, payloads[:6]))
    w.add(7, rows(4, 6, payloads[6:]))   # the log's second part (its entry 7 has no hash)
    w.close()
    assert os.path.exists(log_file(str(tmp_path), "/mnt/bk1", 7))
    part = rows(5, 4)
    got = light_column(str(tmp_path), "/mnt/bk1", 7, part).to_pylist()
    assert got == [None if i == 7 else hashlib.sha256(payloads[i]).hexdigest()[:16] for i in range(4, 9)]
    assert light_column(str(tmp_path), "/mnt/bk1", 7, rows(3, 0)).to_pylist()[1] is None   # no hash kept
    other = rows(2, 4)
    other.entries["entry"] += 100   # another entry at that offset: not its hash
    assert light_column(str(tmp_path), "/mnt/bk1", 7, other).to_pylist() == [None, None]
    assert light_column(str(tmp_path), "/mnt/bk1", 8, part).null_count == 5   # a log without a file
    assert light_column(None, "/mnt/bk1", 7, part).null_count == 5


def test_a_light_part_reads_only_the_row_groups_of_its_offsets(tmp_path, monkeypatch):
    # A log of small entries has millions of rows and a part for each ~63,000: reading the whole file
    # for each part would cost the square of the log's size.
    payloads = [bytes([i]) * 50 for i in range(40)]
    w = HashWriter(str(tmp_path), "/mnt/bk1")
    for first in range(0, 40, 5):   # eight parts: a row group each
        w.add(7, rows(5, first, payloads[first:first + 5]))
    w.close()
    import pyarrow.parquet as pq
    asked: list[list[int]] = []
    real = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", lambda self, groups, *a, **k: (
        asked.append(list(groups)), real(self, groups, *a, **k))[1])
    got = light_column(str(tmp_path), "/mnt/bk1", 7, rows(4, 12)).to_pylist()   # entries 12-15: groups 2 and 3
    assert got == [hashlib.sha256(payloads[i]).hexdigest()[:16] if i % 5 != 1 else None for i in range(12, 16)]
    assert asked == [[2, 3]]


def _hash_file(root, disk: str, key: int, text: bytes) -> None:
    p = log_file(str(root), disk, key)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(text)


def test_the_new_state_takes_this_runs_files_and_the_unchanged_logs_files_of_the_last(tmp_path):
    ident = DiskIdentity("bk1", "inst", b"c")
    log = lambda n: LogIdentity(n, n, n, b"h")  # noqa: E731
    old = {"/d": DiskState(ident, {1: LogState(log(1), T0, T0 + 7 * DAY), 2: LogState(log(2), T0, T0 + 7 * DAY),
                                   3: LogState(log(3), T0, T0 + 7 * DAY), 4: LogState(log(4), T0, T0 + 7 * DAY)}),
           "/other": DiskState(ident, {1: LogState(log(1), T0, T0 + 7 * DAY)})}
    now = T0 + DAY
    new = {"/d": DiskState(ident, {1: old["/d"].logs[1],                                  # walked light
                                   2: LogState(log(2), now, now + 7 * DAY),              # deep-read now
                                   3: LogState(replace(log(3), size=99), None, now),      # changed, not read
                                   4: LogState(log(4), now, now + 7 * DAY)}),            # read now, scan failed
           "/other": DiskState(DiskIdentity("bk1", "another", b"c"), {1: old["/other"].logs[1]})}
    for key in (1, 2, 3, 4):
        _hash_file(tmp_path / "old", "/d", key, b"old %d" % key)
    _hash_file(tmp_path / "old", "/other", 1, b"old other")
    _hash_file(tmp_path / "staged", "/d", 2, b"new 2")
    _hash_file(tmp_path / "staged", "/d", 1, b"stray")   # (not read now: not taken)
    carry(str(tmp_path / "new"), str(tmp_path / "old"), str(tmp_path / "staged"), new, old, now)

    def held(disk, key):
        p = log_file(str(tmp_path / "new"), disk, key)
        return open(p, "rb").read() if os.path.exists(p) else None
    assert [held("/d", k) for k in (1, 2, 3, 4)] == [b"old 1", b"new 2", None, None]
    assert held("/other", 1) is None   # the disk's identity changed: its hashes are not its own
