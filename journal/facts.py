"""What the journals say per ledger (master key, fence, explicit LAC) and the records a restart would
replay, gathered from the journal scans and the lastMark that applies to each journal."""
from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.kernels import be_i32_at
from bkdisk.formats.entry import V2_MARKER
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import KEY_AT, KEY_LENGTH_AT, SCOPED_PREFIX_SIZE, RecordKind, classify_body
from bkdisk.formats.lastmark import LastMark
from bkdisk.journal.arrays import JournalArrays, read_bodies
from bkdisk.journal.ledger_keys import LedgerKeys
from bkdisk.journal.scan_parts import record_parts

BLOCK = 65536   # keyed records read at once

# One journal as the facts take it: its id, its path, its scan (or why it has none), and the lastMark
# of its journal dir.
JournalSource = tuple[int, str, JournalArrays | Exception | None, LastMark | None]


@dataclass
class JournalFacts:
    """Per ledger, what the journals say: master key, fenced (before lastMark or not), explicit LAC."""

    master_keys: LedgerKeys = field(default_factory=LedgerKeys.empty)
    fenced: dict[LedgerId, bool] = field(default_factory=dict)       # value: fence record before lastMark
    explicit_lac: dict[LedgerId, bytes | None] = field(default_factory=dict)
    pending: list[tuple[str, int, LedgerId, int]] = field(default_factory=list)  # after lastMark: (path, off, lid, eid)

    @classmethod
    def collect(cls, journals: Iterable[JournalSource]) -> JournalFacts:
        """The facts of ``journals``, in journal order; a journal whose scan failed tells nothing."""
        f = cls()
        keys = _KeyRecords()
        for journal_id, path, scan, mark in journals:
            if not isinstance(scan, JournalArrays):
                continue
            for _lo, recs, _facts in record_parts(scan):   # (a part at a time, in record order)
                f._add(journal_id, path, recs, mark, keys)
        f.master_keys = keys.table()
        return f

    def _add(self, journal_id: int, path: str, recs: np.ndarray, mark: LastMark | None, keys: _KeyRecords) -> None:
        """The facts of ``recs``, records of one journal that follow those added before."""
        kinds = recs["kind"]
        after = _after_mark(journal_id, recs["offset"], mark)
        scope, ledger = recs["scope"], recs["ledger"]
        # Each kind fills its own table, in record order: the same tables as one pass over every record.
        fences = np.flatnonzero(kinds == RecordKind.FENCE)
        for s, l, a in zip(scope[fences].tolist(), ledger[fences].tolist(), after[fences].tolist()):
            lid = LedgerId(s, l)
            self.fenced[lid] = self.fenced.get(lid, False) or not a
        keyed = np.flatnonzero((kinds == RecordKind.LEDGER_KEY) | (kinds == RecordKind.EXPLICIT_LAC))
        for lo in range(0, len(keyed), BLOCK):
            self._read_keys(path, recs[keyed[lo:lo + BLOCK]], keys)
        data = np.flatnonzero((kinds == RecordKind.DATA) & after)
        rows = zip(recs["offset"][data].tolist(), scope[data].tolist(), ledger[data].tolist(),
                   recs["entry"][data].tolist())
        self.pending.extend((path, o, LedgerId(s, l), e) for o, s, l, e in rows)

    def _read_keys(self, path: str, recs: np.ndarray, keys: _KeyRecords) -> None:
        """Master keys and explicit LACs of the ledger-key and explicit-LAC records ``recs`` of one journal."""
        # The scanner already classified and bounds-checked each record.
        offsets, sizes = recs["offset"].tolist(), recs["size"].tolist()
        bodies = read_bodies(path, recs)
        starts = np.cumsum([0] + sizes[:-1], dtype=np.int64)
        joined = b"".join(bodies)
        raw = np.frombuffer(joined, np.uint8)
        at = np.where(raw[np.minimum(starts, max(len(raw) - 1, 0))] >= V2_MARKER, SCOPED_PREFIX_SIZE, 0) \
            if len(raw) else np.zeros(len(starts), np.int64)
        # (clipped into the bytes: only the ledger-key records' values are used, and those hold them)
        key_lengths = be_i32_at(raw, np.minimum(starts + at + KEY_LENGTH_AT, len(raw) - 4)).tolist() \
            if len(raw) >= 4 else [0] * len(starts)
        for body, kind, s, l, off, a, n in zip(bodies, recs["kind"].tolist(), recs["scope"].tolist(),
                                               recs["ledger"].tolist(), offsets, at.tolist(), key_lengths):
            if kind == RecordKind.LEDGER_KEY:
                keys.add(s, l, body[a + KEY_AT:a + KEY_AT + n])
            else:
                self.explicit_lac[LedgerId(s, l)] = classify_body(body, offset=off, path=path).lac_body


class _KeyRecords:
    """The ledger-key records' (scope, ledger) in record order and each one's key as the id of its
    distinct bytes (the ledgers of one password share one key), until the table is made."""

    def __init__(self) -> None:
        self.scope, self.ledger, self.ids = array("Q"), array("Q"), array("i")
        self.known: dict[bytes, int] = {}

    def add(self, scope: int, ledger: int, key: bytes) -> None:
        self.scope.append(scope)
        self.ledger.append(ledger)
        self.ids.append(self.known.setdefault(key, len(self.known)))

    def table(self) -> LedgerKeys:
        return LedgerKeys.of_ids(np.frombuffer(self.scope, np.uint64), np.frombuffer(self.ledger, np.uint64),
                                 list(self.known), np.frombuffer(self.ids, np.int32))


def _after_mark(journal_id: int, offsets: np.ndarray, mark: LastMark | None) -> np.ndarray:
    """Which records a restart would replay: every record at or after (mark journal, mark offset)."""
    if mark is None:
        return np.ones(len(offsets), dtype=bool)
    if journal_id < mark.log_id:
        return np.zeros(len(offsets), dtype=bool)
    if journal_id > mark.log_id:
        return np.ones(len(offsets), dtype=bool)
    return offsets >= mark.offset
