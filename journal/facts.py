"""What the journals say per ledger (master key, fence, explicit LAC) and the records a restart would
replay, gathered from the journal scans and the lastMark that applies to each journal."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.kernels import be_i32_at
from bkdisk.formats.entry import V2_MARKER
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import KEY_AT, KEY_LENGTH_AT, SCOPED_PREFIX_SIZE, RecordKind, classify_body
from bkdisk.formats.lastmark import LastMark
from bkdisk.journal.arrays import JournalArrays, read_bodies

# One journal as the facts take it: its id, its path, its scan (or why it has none), and the lastMark
# of its journal dir.
JournalSource = tuple[int, str, JournalArrays | Exception | None, LastMark | None]


@dataclass
class JournalFacts:
    """Per ledger, what the journals say: master key, fenced (before lastMark or not), explicit LAC."""

    master_keys: dict[LedgerId, bytes] = field(default_factory=dict)
    fenced: dict[LedgerId, bool] = field(default_factory=dict)       # value: fence record before lastMark
    explicit_lac: dict[LedgerId, bytes | None] = field(default_factory=dict)
    pending: list[tuple[str, int, LedgerId, int]] = field(default_factory=list)  # after lastMark: (path, off, lid, eid)

    @classmethod
    def collect(cls, journals: Iterable[JournalSource]) -> JournalFacts:
        """The facts of ``journals``, in journal order; a journal whose scan failed tells nothing."""
        f = cls()
        for journal_id, path, scan, mark in journals:
            if not isinstance(scan, JournalArrays):
                continue
            recs = scan.records
            kinds = recs["kind"]
            after = _after_mark(journal_id, recs["offset"], mark)
            scope, ledger = recs["scope"], recs["ledger"]
            # Each kind fills its own table, in record order: the same tables as one pass over every record.
            fences = np.flatnonzero(kinds == RecordKind.FENCE)
            for s, l, a in zip(scope[fences].tolist(), ledger[fences].tolist(), after[fences].tolist()):
                lid = LedgerId(s, l)
                f.fenced[lid] = f.fenced.get(lid, False) or not a
            keyed = np.flatnonzero((kinds == RecordKind.LEDGER_KEY) | (kinds == RecordKind.EXPLICIT_LAC))
            if len(keyed):
                f._read_keys(path, recs[keyed])
            data = np.flatnonzero((kinds == RecordKind.DATA) & after)
            rows = zip(recs["offset"][data].tolist(), scope[data].tolist(), ledger[data].tolist(),
                       recs["entry"][data].tolist())
            f.pending.extend((path, o, LedgerId(s, l), e) for o, s, l, e in rows)
        return f

    def _read_keys(self, path: str, recs: np.ndarray) -> None:
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
            lid = LedgerId(s, l)
            if kind == RecordKind.LEDGER_KEY:
                self.master_keys[lid] = body[a + KEY_AT:a + KEY_AT + n]
            else:
                self.explicit_lac[lid] = classify_body(body, offset=off, path=path).lac_body


def _after_mark(journal_id: int, offsets: np.ndarray, mark: LastMark | None) -> np.ndarray:
    """Which records a restart would replay: every record at or after (mark journal, mark offset)."""
    if mark is None:
        return np.ones(len(offsets), dtype=bool)
    if journal_id < mark.log_id:
        return np.zeros(len(offsets), dtype=bool)
    if journal_id > mark.log_id:
        return np.ones(len(offsets), dtype=bool)
    return offsets >= mark.offset
