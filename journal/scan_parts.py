"""A journal's scan whose records are kept in a sink's columns (diskio.scan_sink), and the one way every
reader takes a scan's records: a bounded range of rows at a time, whichever way it is kept.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bkdisk.diskio.scan_sink import ScanSink, SinkKept, parts
from bkdisk.formats.journal import RecordKind
from bkdisk.journal.arrays import JOURNAL_DTYPE, JournalArrays


class ChunkedJournalScan(SinkKept, JournalArrays):
    """A journal's scan whose records (and digest facts) are a sink's columns, held or spilled part by
    part. ``record_parts`` reads them a range at a time; ``records`` and ``digest_facts`` read them
    whole (for the steps that look at all of them at once: tests, small journals)."""

    @classmethod
    def of(cls, scan: JournalArrays, sink: ScanSink) -> ChunkedJournalScan:
        return cls.kept(scan, sink, ("records", "digest_facts"))

    def count(self) -> int:
        return len(self.columns["records"])

    @property
    def records(self) -> np.ndarray:   # type: ignore[override]
        return self.columns["records"].array()

    @property
    def digest_facts(self) -> np.ndarray | None:   # type: ignore[override]
        c = self.columns.get("facts")
        return None if c is None else c.array()

    def row(self, i: int) -> np.void:
        return self.columns["records"].row(i)



def record_parts(scan: JournalArrays, rows: int | None = None) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
    """(first row, records, their digest facts or None) of the scan, at most ``rows`` records at a time."""
    if isinstance(scan, ChunkedJournalScan):
        recs, facts = scan.columns["records"], scan.columns.get("facts")
        for lo, hi in recs.bounds(rows):   # (the facts are kept in the same parts)
            yield lo, recs.part(lo, hi), None if facts is None else facts.part(lo, hi)
        return
    r, f = scan.records, scan.digest_facts
    for lo, hi in parts(len(r), rows):
        yield lo, r[lo:hi], None if f is None else f[lo:hi]


def data_rows(scan: JournalArrays, which: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The data records numbered ``which`` (among the scan's data records, in order): their indices among
    all records and their rows, in the order of ``which``; and how many data records the scan has.
    The records are read a part at a time."""
    which = np.asarray(which, np.int64)
    at, rows, seen = np.zeros(len(which), np.int64), np.zeros(len(which), JOURNAL_DTYPE), 0
    for lo, recs, _facts in record_parts(scan):
        data = np.flatnonzero(recs["kind"] == RecordKind.DATA)
        here = np.flatnonzero((which >= seen) & (which < seen + len(data)))
        if len(here):
            pick = data[which[here] - seen]
            at[here], rows[here] = lo + pick, recs[pick]
        seen += len(data)
    return at, rows, seen
