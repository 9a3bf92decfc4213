"""A scan's output table hands its kernel columns of one layout whatever its size: a column of one row is
contiguous, which numba types apart from a longer one's, and the walk met with it first compiled again
(over a minute) for a log of one entry, or a header alone, as a bookie's newest log often is."""
from __future__ import annotations

from conftest import GOLDEN
from numba import typeof

from bkdisk.diskio.windowed import Columns
from bkdisk.entrylogs.arrays import ENTRY_DTYPE
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.walk import walk_entry_records
from bkdisk.journal.arrays import JOURNAL_DTYPE

LOG = GOLDEN / "interleaved-v6-hostport" / "ledgers1" / "current" / "0.log"


def test_a_table_of_any_room_gives_strided_columns():
    for dtype in (ENTRY_DTYPE, JOURNAL_DTYPE):
        for room in (0, 1, 2, 1000):
            cols = Columns(dtype, room)
            assert {typeof(a).layout for a in cols.arrays} == {"A"}, (dtype, room)
            cols.restart(room)
            assert {typeof(a).layout for a in cols.arrays} == {"A"}, (dtype, room)


def test_a_log_of_one_entry_or_none_is_walked_by_the_kernel_a_longer_one_was(tmp_path):
    scan_entry_log(LOG)
    seen = set(walk_entry_records.signatures)
    data = LOG.read_bytes()
    first = scan_entry_log(LOG).entries[0]
    for n in (1024, int(first["offset"]) + 4 + int(first["size"]), 700):
        short = tmp_path / f"{n}.log"
        short.write_bytes(data[:n])
        res = scan_entry_log(short)
        assert len(res.entries) == (n > 1024)
    assert set(walk_entry_records.signatures) == seen
