"""An entry log's scan whose per-entry arrays are kept in a sink's columns (diskio.scan_sink), and the
one way every reader takes a scan's entries: a bounded range of rows at a time, whichever way it is kept.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np

from bkdisk.digests.kernels import DIGEST_OK, DIGEST_UNKNOWN
from bkdisk.digests.payload_hashes import HASH_BYTES, PayloadHashes
from bkdisk.digests.plan import DigestPlan
from bkdisk.digests.verify import DIGEST_DTYPE, recheck_digests
from bkdisk.diskio.scan_sink import ScanSink, SinkKept, parts
from bkdisk.entrylogs.arrays import ENTRY_DTYPE, EntryLogArrays, EntryLogScanArrays, ledger_sums
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

if TYPE_CHECKING:   # (map_sums reads scans through this module)
    from bkdisk.entrylogs.map_sums import MapCounter

HASH_ROW = np.dtype(f"V{HASH_BYTES}")   # one payload hash as a column's row


class LogOutput:
    """Where a scan of one log puts its per-entry output: the sink's columns, or parts joined at the end."""

    def __init__(self, sink: ScanSink | None, check: bool, hashing: bool, entry_dtype: np.dtype = ENTRY_DTYPE):
        self.digest_parts: list[np.ndarray] = []
        self.hash_parts: list[PayloadHashes] = []
        self.entries = self.digests = self.hashes = self.hashed = None
        # Given the entry rows as they are handed over (entrylogs.map_sums.MapCounter), when asked for.
        self.counter: MapCounter | None = None
        if sink is not None:
            self.entries = sink.column("entries", entry_dtype)
            if check:
                self.digests = sink.column("digests", DIGEST_DTYPE, look=not_verified)
            if hashing:
                self.hashes, self.hashed = sink.column("hashes", HASH_ROW), sink.column("hashed", np.bool_)

    def rows_to_hold(self, used: int) -> int | None:
        """ScanColumn.rows_to_hold of the entries (no bound without a sink)."""
        return used + (1 << 62) if self.entries is None else self.entries.rows_to_hold(used)

    def holds(self, table: np.ndarray) -> bool:
        """Whether the entries column leaves the scan's table of entries where it is (ScanColumn.holds)."""
        assert self.entries is not None, "entries are handed over only to a sink"
        return self.entries.holds(table)

    def add_entries(self, rows: np.ndarray) -> None:
        """Entry rows after those so far, out of a table the scan fills again (for a scan with a sink)."""
        assert self.entries is not None, "entries are handed over only to a sink"
        self._count(rows)
        self.entries.append(rows)

    def keep_entries(self, rows: np.ndarray) -> None:
        """Entry rows after those so far, in a table the scan leaves as it is (held, or written)."""
        assert self.entries is not None, "entries are handed over only to a sink"
        self._count(rows)
        self.entries.append(rows, copy=False)

    def last_entries(self, rows: np.ndarray) -> None:
        """The scan's last entry rows (its table, not filled again); the digest parts held made one."""
        assert self.entries is not None, "entries are handed over only to a sink"
        self._count(rows)
        self.entries.append(rows, copy=False)
        for c in (self.digests, self.hashes, self.hashed):
            if c is not None:
                c.join_held()

    def _count(self, rows: np.ndarray) -> None:
        if self.counter is not None:
            self.counter.add(rows)

    def add_digests(self, rows: np.ndarray, hashes: PayloadHashes | None) -> None:
        """One window's digest rows (and payload hashes), in window order."""
        if self.digests is None:
            self.digest_parts.append(rows)
            if hashes is not None:
                self.hash_parts.append(hashes)
            return
        self.digests.append(rows, copy=False)
        if hashes is not None and self.hashes is not None and self.hashed is not None:
            self.hashes.append(hashes.raw.view(HASH_ROW).reshape(-1), copy=False)
            self.hashed.append(hashes.present, copy=False)


class ChunkedLogScan(SinkKept, EntryLogScanArrays):
    """An entry log's scan whose per-entry arrays are a sink's columns (held or spilled, part by part).
    ``parts`` reads them a range at a time; ``entries``, ``digests``, ``payload_hashes`` read them
    whole (for the steps that look at all of them at once, on damage only)."""

    @classmethod
    def of(cls, scan: EntryLogScanArrays, sink: ScanSink) -> ChunkedLogScan:
        return cls.kept(scan, sink, ("entries", "digests", "payload_hashes"))

    def count(self) -> int:
        return len(self.columns["entries"])

    @property
    def entries(self) -> np.ndarray:   # type: ignore[override]
        return self.columns["entries"].array()

    @property
    def digests(self) -> np.ndarray | None:   # type: ignore[override]
        c = self.columns.get("digests")
        return None if c is None else c.array()

    @property
    def payload_hashes(self) -> PayloadHashes | None:   # type: ignore[override]
        c = self.columns.get("hashes")
        return None if c is None else _hashes(c.array(), self.columns["hashed"].array())

    def computed_ledgers_map(self) -> dict[tuple[int, int], int]:
        """EntryLogArrays.computed_ledgers_map, summed a part at a time."""
        s, l, sums = entry_ledger_sums(self)
        return dict(zip(zip(s.tolist(), l.tolist()), sums.tolist()))

    def part(self, lo: int, hi: int) -> EntryLogScanArrays:
        """The scan with its per-entry arrays cut to rows ``lo:hi``."""
        c = self.columns
        fields = {k: v for k, v in vars(self).items() if k not in ("columns", "sink")}
        hashes = _hashes(c["hashes"].part(lo, hi), c["hashed"].part(lo, hi)) if "hashes" in c else None
        fields.update(entries=c["entries"].part(lo, hi), digests=c["digests"].part(lo, hi) if "digests" in c else None,
                      payload_hashes=hashes)
        return EntryLogScanArrays(**fields)

    def recheck(self, plan: DigestPlan, data: Callable[[], np.ndarray] | None = None) -> int:
        """``recheck_digests`` a part at a time, the rows it changed written back."""
        if "digests" not in self.columns or plan.force is not None:
            return 0
        changed, digests = 0, self.columns["digests"]
        for lo, hi in self.columns["entries"].bounds():
            if not digests.any_to_look(lo, hi):   # every digest verified: nothing to recheck
                continue
            d = digests.part(lo, hi)   # (a part's other columns are read only when it has rows to recheck)
            if not bool(np.any((d["type"] == 0) & (d["status"] == DIGEST_UNKNOWN))):
                continue
            part = self.part(lo, hi)
            n = recheck_digests(part, plan, data)
            if n:
                self.put_digests(lo, part)
            changed += n
        return changed

    def put_digests(self, lo: int, part: EntryLogScanArrays) -> None:
        """The digests (and payload hashes) of ``part``, the scan's rows from ``lo`` on, written back."""
        if part.digests is not None:
            self.columns["digests"].put(lo, part.digests)
        if part.payload_hashes is not None:
            self.columns["hashes"].put(lo, part.payload_hashes.raw.view(HASH_ROW).reshape(-1))
            self.columns["hashed"].put(lo, part.payload_hashes.present)


Scan = TypeVar("Scan", bound=EntryLogArrays)


def _hashes(raw: np.ndarray, present: np.ndarray) -> PayloadHashes:
    return PayloadHashes(np.ascontiguousarray(raw).view(np.uint8).reshape(-1, HASH_BYTES), present)


def entry_count(scan: EntryLogArrays) -> int:
    """Entries of a scan, without reading a chunked one's arrays."""
    return scan.count() if isinstance(scan, ChunkedLogScan) else len(scan.entries)


def log_scan_parts(scan: Scan, rows: int | None = None) -> Iterator[Scan]:
    """The scan in parts of at most ``rows`` entries, in order: the same scan with its per-entry arrays
    (entries, digests, payload hashes) cut to the part's rows. A chunked scan's parts are read one at a
    time, so a caller holds one part beyond what the scan keeps."""
    for lo, hi in entry_bounds(scan, rows):
        if hi > lo:
            yield scan_part(scan, lo, hi)


def entry_bounds(scan: EntryLogArrays, rows: int | None = None) -> Iterator[tuple[int, int]]:
    """(lo, hi) of the scan's entries in parts of at most ``rows``, in order (a chunked scan's follow
    how its entries are kept, so that each is read without a copy where it is held). A scan without
    entries is one empty part, as its arrays are one empty array each."""
    got = scan.columns["entries"].bounds(rows) if isinstance(scan, ChunkedLogScan) else parts(len(scan.entries), rows)
    first = next(got, None)
    yield (0, 0) if first is None else first
    yield from got


def scan_part(scan: Scan, lo: int, hi: int) -> Scan:
    """The scan with its per-entry arrays cut to rows ``lo:hi``."""
    if isinstance(scan, ChunkedLogScan):
        return cast(Scan, scan.part(lo, hi))
    if not isinstance(scan, EntryLogScanArrays):
        return dataclasses.replace(scan, entries=scan.entries[lo:hi])
    h = scan.payload_hashes
    return dataclasses.replace(
        scan, entries=scan.entries[lo:hi], digests=None if scan.digests is None else scan.digests[lo:hi],
        payload_hashes=None if h is None else PayloadHashes(h.raw[lo:hi], h.present[lo:hi]))


def entry_parts(scan: EntryLogArrays, rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, entries) of the scan a part at a time (the entries alone: no other column is read)."""
    for lo, hi in entry_bounds(scan, rows):
        yield lo, entries_between(scan, lo, hi)


def entry_ledger_sums(scan: EntryLogArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (scope, ledger) of the scan's entries, in that order: the sum of their sizes, size prefixes
    included, as the ledgers map counts them; summed a part at a time."""
    got = [ledger_sums(e["scope"], e["ledger"], e["size"].astype(np.int64) + SIZE_PREFIX_SIZE)
           for _lo, e in entry_parts(scan)]
    return got[0] if len(got) == 1 else ledger_sums(*(np.concatenate(c) for c in zip(*got)))


def entries_between(scan: EntryLogArrays, lo: int, hi: int) -> np.ndarray:
    """The scan's entries ``lo:hi`` (of a chunked scan, only those are read)."""
    return scan.columns["entries"].part(lo, hi) if isinstance(scan, ChunkedLogScan) else scan.entries[lo:hi]


def not_verified(digests: np.ndarray) -> np.ndarray:
    """The digest rows a reader of a kept scan looks at: those not verified good."""
    return digests["status"] != DIGEST_OK


def digest_parts(scan: EntryLogScanArrays, rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, digest rows) of a scan that checked digests, a part at a time; of a kept scan only
    the parts that hold a digest not verified good (the others are not read)."""
    if isinstance(scan, ChunkedLogScan):
        c = scan.columns.get("digests")
        if c is not None:
            yield from ((lo, c.part(lo, hi)) for lo, hi in entry_bounds(scan, rows) if c.any_to_look(lo, hi))
        return
    d = scan.digests
    if d is not None:
        yield from ((lo, d[lo:hi]) for lo, hi in parts(len(d), rows))


def recheck(plan: DigestPlan, scan: EntryLogScanArrays) -> int:
    """``recheck_digests(scan, plan)`` for a scan kept either way."""
    return scan.recheck(plan) if isinstance(scan, ChunkedLogScan) else recheck_digests(scan, plan)
