"""A journal's data records cut into the runs its digest check takes a window at a time: the runs are
the same whatever parts the records are read in (the cut of all the data records at once)."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.diskio import scan_sink
from bkdisk.formats.journal import RECORD_LENGTH_SIZE, RecordKind
from bkdisk.journal import digests as journal_digests
from bkdisk.journal.arrays import JOURNAL_DTYPE, JournalArrays
from bkdisk.journal.reader import EndKind

KINDS = [RecordKind.DATA] * 4 + [RecordKind.LEDGER_KEY, RecordKind.FENCE]


def _journal(kinds_sizes: list[tuple[RecordKind, int]]) -> JournalArrays:
    recs = np.zeros(len(kinds_sizes), JOURNAL_DTYPE)
    at = 512
    for i, (kind, size) in enumerate(kinds_sizes):
        recs[i]["offset"], recs[i]["kind"], recs[i]["size"], recs[i]["entry"] = at, kind, size, i
        at += RECORD_LENGTH_SIZE + size
    facts = (np.arange(len(recs)) % 251).astype(np.uint8)
    return JournalArrays("j.txn", 1, 6, 512, at, recs, EndKind.CLEAN, at, "", facts)


def _whole_runs(scan: JournalArrays, window: int) -> list[tuple[int, bytes, bytes]]:
    """The runs by their definition: every data record at once, cut greedily (records of 16 to 128
    bytes in all, in windows of 64 to 256: runs that fill their window exactly, and records larger)."""
    idx = journal_digests.data_records(scan.records)
    data, facts = scan.records[idx], scan.digest_facts[idx]
    if not len(data):
        return []
    cuts = np.zeros(len(data) + 1, np.int64)
    n = journal_digests._window_cuts(data["offset"], data["size"], np.arange(len(data)), window, cuts)
    return [(i, data[i:j].tobytes(), facts[i:j].tobytes()) for i, j in zip(cuts[:n - 1].tolist(), cuts[1:n].tolist())]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recs=st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from([0, 12, 28, 60, 124, 300])), max_size=40),
       rows=st.integers(1, 9), window=st.sampled_from([64, 128, 256]))
def test_runs_read_part_by_part_are_the_runs_of_all_the_records(recs, rows, window, monkeypatch):
    monkeypatch.setattr(scan_sink, "PART_ROWS", rows)
    scan = _journal(recs)
    got = [(i, r.tobytes(), f.tobytes()) for i, r, f in journal_digests.data_record_windows(scan, window)]
    assert got == _whole_runs(scan, window)
