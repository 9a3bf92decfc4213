"""What the journals say per ledger (master key, fence, explicit LAC) and the records a restart would
replay, gathered from the journal scans and the lastMark that applies to each journal."""
from __future__ import annotations

import bisect
import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.distinct import span_indices
from bkdisk.diskio.kernels import be_i32_at
from bkdisk.formats.entry import V2_MARKER
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import (
    KEY_AT,
    KEY_LENGTH_AT,
    RECORD_LENGTH_SIZE,
    SCOPED_PREFIX_SIZE,
    RecordKind,
    classify_body,
)
from bkdisk.formats.lastmark import LastMark
from bkdisk.journal.arrays import JournalArrays
from bkdisk.journal.ledger_keys import LedgerKeys, distinct_keys
from bkdisk.journal.pending import PendingRecords
from bkdisk.journal.scan_parts import record_parts

# Ledger-key and explicit-LAC records are read a run at a time (keyed_runs): a run spans at most
# RUN_BYTES, and its records lie at most RUN_GAP apart (what lies between is read too).
RUN_BYTES = 1 << 20
RUN_GAP = 4096
READ_BYTES = 4 << 20   # runs read before their records are taken out
# The kinds as the records' column holds them (an IntEnum would make numpy compare as int64).
_DATA, _KEY, _FENCE, _LAC = (np.uint8(k) for k in (RecordKind.DATA, RecordKind.LEDGER_KEY, RecordKind.FENCE,
                                                   RecordKind.EXPLICIT_LAC))

# One journal as the facts take it: its id, its path, its scan (or why it has none), and the lastMark
# of its journal dir.
JournalSource = tuple[int, str, JournalArrays | Exception | None, LastMark | None]
Where = tuple[str, int]   # a record's journal path and offset


@dataclass
class JournalFacts:
    """Per ledger, what the journals say: master key, fenced (before lastMark or not), explicit LAC."""

    master_keys: LedgerKeys = field(default_factory=LedgerKeys.empty)
    fenced: dict[LedgerId, bool] = field(default_factory=dict)       # value: fence record before lastMark
    # The newest explicit LAC of a ledger; None when a restart replays it (after lastMark) or it is unreadable.
    explicit_lac: dict[LedgerId, bytes | None] = field(default_factory=dict)
    pending: PendingRecords = field(default_factory=PendingRecords)   # data records after lastMark
    replayed_lacs: dict[LedgerId, bytes] = field(default_factory=dict)   # the newest explicit LAC after lastMark
    # Per ledger with ledger-key records after lastMark (a restart replays them), their distinct keys in order,
    # and where each was first met (journal path, record offset); where the newest replayed LAC's record is.
    replayed_keys: dict[LedgerId, list[bytes]] = field(default_factory=dict)
    replayed_key_at: dict[LedgerId, list[Where]] = field(default_factory=dict)
    replayed_lac_at: dict[LedgerId, Where] = field(default_factory=dict)
    # By path, for the journal its lastMark names: whether a record starts at the mark's offset.
    mark_on_record: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def collect(cls, journals: Iterable[JournalSource], taken: dict[str, RecordFacts] | None = None) -> JournalFacts:
        """The facts of ``journals``, in journal order; a journal whose scan failed tells nothing.
        ``taken``: by path, the facts of journals taken as their scans went (``RecordFacts`` as a tap
        of the records' column): their records are not read again, and their rows are moved out of
        ``taken``, not copied. What stopped one from taking its facts (its file
        changed since) is raised, as a read of its records would raise it."""
        f = cls()
        keys = _KeyRecords()
        for journal_id, path, scan, mark in journals:
            if not isinstance(scan, JournalArrays):
                continue
            one = None if taken is None else taken.pop(path, None)
            if one is None:
                one = RecordFacts(journal_id, path, mark)
                for lo, recs, _facts in record_parts(scan):   # (a part at a time, in record order)
                    one.add(lo, recs)
            if one.error is not None:
                raise one.error
            f._merge(one, keys)
        f.master_keys = keys.table()
        return f

    def _merge(self, one: RecordFacts, keys: _KeyRecords) -> None:
        """The facts of one journal, after those of the journals before it."""
        for lid, before_mark in one.fenced.items():
            self.fenced[lid] = self.fenced.get(lid, False) or before_mark
        self.explicit_lac.update(one.explicit_lac)   # (a later journal's record is the later one)
        if one.mark is not None and one.mark.log_id == one.journal_id:
            self.mark_on_record[one.path] = one.mark_on_record
        keys.extend(one.keys)
        self.replayed_lacs.update(one.replayed_lacs)
        self.replayed_lac_at.update(one.replayed_lac_at)
        for lid, ks in one.replayed_keys.items():
            for key, where in zip(ks, one.replayed_key_at[lid]):
                _add_key(self.replayed_keys, self.replayed_key_at, lid, key, where)
        self.pending.extend(one.pending)


class RecordFacts:
    """One journal's facts, taken from its records a part at a time in record order (``add``): as its
    scan hands them to its sink (a tap of the records' column), or read back from a scan."""

    def __init__(self, journal_id: int, path: str, mark: LastMark | None):
        self.journal_id, self.path, self.mark = journal_id, path, mark
        self.fenced: dict[LedgerId, bool] = {}
        self.explicit_lac: dict[LedgerId, bytes | None] = {}
        self.keys = _KeyRecords()
        self.replayed_keys: dict[LedgerId, list[bytes]] = {}
        self.replayed_key_at: dict[LedgerId, list[Where]] = {}
        self.replayed_lacs: dict[LedgerId, bytes] = {}
        self.replayed_lac_at: dict[LedgerId, Where] = {}
        self.pending = PendingRecords()
        self.mark_on_record = False   # a record starts at the mark's offset (a mark naming this journal)
        self._rows = 0
        # Why the facts stopped (the journal changed since its scan read it): raised by
        # JournalFacts.collect, not by the scan, whose records stand as read.
        self.error: FormatError | None = None

    def add(self, first: int, recs: np.ndarray) -> None:
        """The facts of ``recs``, rows ``first:`` of the journal's records (those before already added)."""
        if first != self._rows:
            raise ValueError(f"{self.path}: records from row {first} given after {self._rows} rows")
        self._rows += len(recs)
        if self.error is None:
            try:
                self._add(recs)
            except FormatError as e:
                self.error = e

    def _add(self, recs: np.ndarray) -> None:
        path = self.path
        if self.mark is not None and self.mark.log_id == self.journal_id and not self.mark_on_record:
            offsets = recs["offset"]
            i = int(np.searchsorted(offsets, self.mark.offset))   # (records in file order)
            self.mark_on_record = i < len(offsets) and int(offsets[i]) == self.mark.offset
        kinds = recs["kind"]
        first_after = _first_after(self.journal_id, recs["offset"], self.mark)   # records [first_after:] follow it
        meta = np.flatnonzero(kinds != _DATA)   # (one pass over the records: the others are few)
        meta_kinds = kinds[meta]
        scope, ledger = recs["scope"], recs["ledger"]
        # Each kind fills its own table, in record order: the same tables as one pass over every record.
        fences = meta[meta_kinds == _FENCE]
        for s, l, a in zip(scope[fences].tolist(), ledger[fences].tolist(), (fences >= first_after).tolist()):
            lid = LedgerId(s, l)
            self.fenced[lid] = self.fenced.get(lid, False) or not a
        keyed = meta[(meta_kinds == _KEY) | (meta_kinds == _LAC)]
        if len(keyed):
            self._read_keys(path, recs[keyed])
        if first_after < len(recs):
            data = first_after + np.flatnonzero(kinds[first_after:] == _DATA)
            self.pending.add(path, recs["offset"][data], scope[data], ledger[data], recs["entry"][data])

    def _read_keys(self, path: str, recs: np.ndarray) -> None:
        """Master keys and explicit LACs of the ledger-key and explicit-LAC records ``recs`` (in file
        order) of one journal, read a run of nearby records at once (``keyed_runs``) and taken out of
        up to READ_BYTES of runs at a time."""
        starts = recs["offset"].astype(np.int64) + RECORD_LENGTH_SIZE
        ends = starts + recs["size"]
        first, last = keyed_runs(starts, ends)
        run_bytes = ends[last - 1] - starts[first]
        batch = np.cumsum(run_bytes) // READ_BYTES   # (a batch reads at most READ_BYTES and one run)
        cuts = np.flatnonzero(np.diff(batch)) + 1
        with open(path, "rb", buffering=0) as fh:
            fd = fh.fileno()
            for r0, r1 in zip([0, *cuts.tolist()], [*cuts.tolist(), len(first)]):
                raw = _read_runs(fd, path, starts[first[r0:r1]].tolist(), run_bytes[r0:r1].tolist())
                lo, hi = int(first[r0]), int(last[r1 - 1])
                # where each record's body starts in ``raw``: its run's place there, then its place in the run
                base = np.cumsum(run_bytes[r0:r1]) - run_bytes[r0:r1] - starts[first[r0:r1]]
                at = starts[lo:hi] + np.repeat(base, last[r0:r1] - first[r0:r1])
                self._add_bodies(path, recs[lo:hi], raw, at)

    def _add_bodies(self, path: str, recs: np.ndarray, raw: np.ndarray, at: np.ndarray) -> None:
        """The keyed records ``recs`` whose bodies start at ``at`` in ``raw``."""
        # The scanner classified and bounds-checked each record: a ledger-key record holds its key
        # length and its key, an explicit-LAC record its body (unless the journal changed since).
        is_key = recs["kind"] == _KEY
        k, end = at[is_key], at[is_key] + recs["size"][is_key]
        k = k + np.where(raw[k] >= V2_MARKER, SCOPED_PREFIX_SIZE, 0)   # (past a scoped record's prefix)
        lengths = be_i32_at(raw, np.minimum(k + KEY_LENGTH_AT, len(raw) - 4))
        changed = (k + KEY_AT > end) | (lengths < 0) | (k + KEY_AT + lengths > end)
        if changed.any():
            raise FormatError("a ledger-key record holding its key, as when the journal was scanned",
                              "one that does not (the journal changed since it was scanned)", path=path,
                              offset=int(recs["offset"][is_key][np.argmax(changed)]))
        self.keys.add(recs["scope"][is_key], recs["ledger"][is_key], raw[span_indices(k + KEY_AT, lengths)],
                      np.cumsum(lengths))
        first = _first_after(self.journal_id, recs["offset"][is_key], self.mark)   # (few: since the checkpoint)
        for s, l, a, n, off in zip(recs["scope"][is_key][first:].tolist(), recs["ledger"][is_key][first:].tolist(),
                                   (k + KEY_AT)[first:].tolist(), lengths[first:].tolist(),
                                   recs["offset"][is_key][first:].tolist()):
            _add_key(self.replayed_keys, self.replayed_key_at, LedgerId(s, l), raw[a:a + n].tobytes(), (path, off))
        lacs = np.flatnonzero(~is_key)
        # A restart replays an explicit LAC after lastMark into ledger storage: until then storage may hold
        # an older one, so such a ledger's LAC is not compared (None).
        replayed = _first_after(self.journal_id, recs["offset"][lacs], self.mark)
        for j, (i, s, l, off, n) in enumerate(zip(lacs.tolist(), recs["scope"][lacs].tolist(),
                                                  recs["ledger"][lacs].tolist(), recs["offset"][lacs].tolist(),
                                                  recs["size"][lacs].tolist())):
            body = raw[int(at[i]):int(at[i]) + n].tobytes()
            lac = classify_body(body, offset=off, path=path).lac_body
            lid = LedgerId(s, l)
            self.explicit_lac[lid] = None if j >= replayed else lac
            if j >= replayed and lac is not None:
                self.replayed_lacs[lid], self.replayed_lac_at[lid] = lac, (path, off)


def _add_key(keys: dict[LedgerId, list[bytes]], at: dict[LedgerId, list[Where]], lid: LedgerId, key: bytes,
             where: Where) -> None:
    """``key`` among the ledger's distinct keys, with where it was first met, unless it is one already."""
    known = keys.setdefault(lid, [])
    if key not in known:
        known.append(key)
        at.setdefault(lid, []).append(where)


def keyed_runs(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, end) records of each run of the records whose bodies are [starts, ends) (in file
    order) read at once: a record joins its predecessor's run when it begins within RUN_GAP bytes of
    that one's end and in the same RUN_BYTES of the file. A run's read spans at most RUN_BYTES and one
    record, and reads at most RUN_GAP bytes between two records, whatever the journal: the ledger-key
    records of ledgers opened together lie side by side, a lone one is read alone."""
    n = len(starts)
    new = np.ones(n, bool)
    new[1:] = (starts[1:] - ends[:-1] > RUN_GAP) | (starts[1:] // RUN_BYTES != starts[:-1] // RUN_BYTES)
    first = np.flatnonzero(new)
    return first, np.append(first[1:], n)


def _read_runs(fd: int, path: str, offsets: list[int], sizes: list[int]) -> np.ndarray:
    """The bytes of the runs at ``offsets`` (``sizes`` long) one after the other."""
    got = [os.pread(fd, n, off) for off, n in zip(offsets, sizes)]
    for b, off, n in zip(got, offsets, sizes):
        if len(b) < n:
            raise FormatError(f"{n} bytes of ledger-key and explicit-LAC records",
                              f"{len(b)} (the journal is shorter than when it was scanned)", path=path, offset=off)
    return np.frombuffer(b"".join(got), np.uint8)


class _KeyRecords:
    """The ledger-key records' (scope, ledger) in record order and each one's key as the id of its
    distinct bytes (the ledgers of one password share one key), until the table is made."""

    def __init__(self) -> None:
        self.scope, self.ledger, self.ids = array("Q"), array("Q"), array("i")
        self.known: dict[bytes, int] = {}

    def add(self, scope: np.ndarray, ledger: np.ndarray, data: np.ndarray, ends: np.ndarray) -> None:
        """Records that follow those added before; record i's key is ``data[ends[i-1]:ends[i]]``."""
        distinct, ids = distinct_keys(data, ends)
        ours = np.array([self.known.setdefault(k, len(self.known)) for k in distinct], np.int32)
        self.scope.frombytes(np.ascontiguousarray(scope, np.uint64).tobytes())
        self.ledger.frombytes(np.ascontiguousarray(ledger, np.uint64).tobytes())
        self.ids.frombytes(ours[ids].astype(np.int32).tobytes())

    def extend(self, other: _KeyRecords) -> None:
        """``other``'s records after these (its keys' ids made ours)."""
        ours = np.array([self.known.setdefault(k, len(self.known)) for k in other.known], np.int32)
        self.scope.extend(other.scope)
        self.ledger.extend(other.ledger)
        self.ids.frombytes(ours[np.frombuffer(other.ids, np.int32)].tobytes())

    def table(self) -> LedgerKeys:
        return LedgerKeys.of_ids(np.frombuffer(self.scope, np.uint64), np.frombuffer(self.ledger, np.uint64),
                                 list(self.known), np.frombuffer(self.ids, np.int32))


def _first_after(journal_id: int, offsets: np.ndarray, mark: LastMark | None) -> int:
    """The first of a journal's records (in file order, at ``offsets``) that a restart would replay:
    every record at or after (mark journal, mark offset) is."""
    n = len(offsets)
    if mark is None or journal_id > mark.log_id:
        return 0
    if journal_id < mark.log_id or n == 0 or offsets[n - 1] < mark.offset:
        return n
    return bisect.bisect_left(offsets, mark.offset)
