"""Record arrays a journal scan produces, and the reference (pure-Python) way to produce them.

The jitted scanner (journal/scan.py) returns the same JournalArrays; tests compare the two.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from bkdisk.formats.journal import PADDING_HEAD_SIZE, RECORD_LENGTH_SIZE, RecordKind
from bkdisk.journal.reader import EndKind, read_journal

JOURNAL_DTYPE = np.dtype([
    ("offset", "<i8"),      # of the 4-byte length prefix
    ("kind", "u1"),         # formats.journal.RecordKind
    ("scope", "<u8"),
    ("ledger", "<u8"),
    ("entry", "<i8"),
    ("size", "<i4"),        # body length (padding: payload length)
])


@dataclass
class JournalArrays:
    path: str
    journal_id: int | None
    version: int
    header_size: int
    size: int
    records: np.ndarray     # JOURNAL_DTYPE, padding records included
    end_kind: EndKind
    end_offset: int
    end_detail: str
    # One byte per record when asked for (scan_journal's digest_facts): a data record's digest facts, 0 for others.
    digest_facts: np.ndarray | None = None

    def count(self) -> int:
        return len(self.records)

    def row(self, i: int) -> np.void:
        return self.records[i]

    def records_end(self) -> int:
        """The offset just past the last record (the header's end when there is none)."""
        if self.count() == 0:
            return self.header_size
        r = self.row(-1)
        head = PADDING_HEAD_SIZE if int(r["kind"]) == RecordKind.PADDING else RECORD_LENGTH_SIZE
        return int(r["offset"]) + head + int(r["size"])

    def body(self, data, i: int):
        """The body bytes of record ``i`` out of the file's bytes ``data``."""
        r = self.row(i)
        body = int(r["offset"]) + RECORD_LENGTH_SIZE
        return data[body:body + int(r["size"])]


def scan_journal_reference(path: str | os.PathLike, data: bytes | None = None,
                           start: int | None = None) -> JournalArrays:
    s = read_journal(path, data, start)
    recs = np.array([(r.offset, int(r.kind), r.scope_id, r.ledger_id, r.entry_id, r.length) for r in s.records],
                    dtype=JOURNAL_DTYPE)
    end = s.end
    assert end is not None, "read_journal says how every journal ends"
    return JournalArrays(s.path, s.journal_id, s.version, s.header_size, s.size, recs, end.kind, end.offset,
                         end.detail)
