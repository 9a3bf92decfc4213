"""One range's join in pass 5 (fsck/passes/p5_crosscheck/): the index locations routed to a range of
entry-log ids (location_ranges.py) against the entries the scans of those logs found.

Each log is joined on its scan's own arrays a part at a time (a spilled scan's parts read one at a
time), its locations grouped by log and by the part that holds their position: nothing per entry is
copied but the entries no location points at, and no log's entries are held whole. Within a part,
each entry first looks up its own location by its ids (ByIds: locations in index order); only the
locations that does not find pointing at their entry are looked up by position. A range whose logs
cannot be joined one at a time (one id in two ledger dirs, entries out of position order) is joined as
one table of rows sorted by location. Both give the same wrong locations, the entries found where they
point, and free entries; every entry of a log whose id no location can name is free."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bkdisk.diskio.kernels import stable_partition
from bkdisk.diskio.ledger_table import empty_table, place_rows
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entries_between, entry_bounds
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.index import POSITION_BITS, location_logs
from bkdisk.fsck.passes.p5_crosscheck.kernels import (
    BY_IDS_BLOCK,
    NO_ENTRY,
    OTHER_ENTRY,
    SAME,
    UNMATCHED,
    entry_rows,
    file_runs,
    match_by_ids,
    match_locations,
    match_log,
    parts_holding,
    position_buckets,
)

LOCATABLE_LOGS = 1 << (64 - POSITION_BITS)   # log ids a location's high bits can name
# A log's locations are looked up grouped by the 64 KiB of the log they point into: the entries each
# search goes over are then few and in cache.
NEAR_BITS = 16
ENTRY_ROW = np.dtype([("key", "<u8"), ("scope", "<u8"), ("ledger", "<u8"), ("entry", "<i8"), ("log", "<i8")])
# (location number, the entry of other ids found where it points, or None: no entry starts there)
Wrong = list[tuple[int, np.void | None]]


def log_rows(e: np.ndarray, log_id: int) -> np.ndarray:
    """A log's entries (ENTRY_DTYPE) as ENTRY_ROW."""
    t = np.empty(len(e), ENTRY_ROW)
    entry_rows(e["offset"], e["scope"], e["ledger"], e["entry"], log_id, t["key"], t["scope"], t["ledger"], t["entry"],
               t["log"])
    return t


def join_range(files: np.ndarray, here: Sequence[tuple[int, EntryLogArrays]],
               lr: np.ndarray, rows: int | None = None, ledgers: FileLedgers | None = None) -> tuple[Wrong, np.ndarray]:
    """The locations ``lr`` (location_ranges.LOCATION_ROW, in index order) joined with the entries of
    the range's logs ``here`` ((id, scan) in id order): the wrong locations in ``lr``'s order, and the
    entries no location points at (ENTRY_ROW, in log id and position order). Each log's entries are
    read a part of at most ``rows`` at a time (entrylogs.scan_parts). ``ledgers``: ``files`` placed by
    (scope, ledger) once for every range of a pass (made here when not given)."""
    got = _join_logs(files, here, lr, rows, ledgers) if _ids_apart(here) else None
    if got is None:
        return _join_rows(files, [(i, s.entries) for i, s in here], lr)
    return got


def _ids_apart(here: Sequence[tuple[int, EntryLogArrays]]) -> bool:
    """Whether each log of the range may be joined on its own as far as its id tells: some logs, their
    ids distinct and within a location's bits (their entries are looked at as they are joined)."""
    ids = [log_id for log_id, _s in here]
    return bool(ids) and all(i < LOCATABLE_LOGS for i in ids) and len(set(ids)) == len(ids)


def _join_logs(files: np.ndarray, logs: Sequence[tuple[int, EntryLogArrays]], lr: np.ndarray,
               rows: int | None, ledgers: FileLedgers | None) -> tuple[Wrong, np.ndarray] | None:
    """The join log by log, each log a part at a time, each location against the part that holds its
    position; None when a log's entries are not in position order or a position passes a location's
    bits (the caller joins the range as one table then)."""
    slot, verdict = np.empty(len(lr), np.int64), np.full(len(lr), UNMATCHED, np.uint8)
    fs, fl = files["scope"], files["ledger"]
    by_ids = ByIds.of(ledgers if ledgers is not None else FileLedgers(files), lr)
    other: dict[int, np.void] = {}   # location -> the entry of other ids found where it points
    free: list[np.ndarray] = []
    for (log_id, s), here in zip(logs, _by_log(logs, lr)):
        bounds = [(lo, hi) for lo, hi in entry_bounds(s, rows) if hi > lo]
        if not bounds:   # (a log without entries: no entry starts where its locations point)
            slot[here], verdict[here] = 0, NO_ENTRY
            continue
        firsts = np.array([int(entries_between(s, lo, lo + 1)["offset"][0]) for lo, _hi in bounds], np.int64)
        in_part = np.empty(len(here), np.int64)
        parts_holding(lr["key"], here, firsts, in_part)
        by_part, part_cuts = _grouped(in_part, len(bounds), len(here))
        last = -1
        for q, (lo, hi) in enumerate(bounds):
            e = entries_between(s, lo, hi)
            off = e["offset"]
            if int(off[0]) < last or bool(np.any(off[1:] < off[:-1])) \
                    or int(off[-1]) + SIZE_PREFIX_SIZE >= 1 << POSITION_BITS:
                return None
            last = int(off[-1])
            pointed = np.zeros(len(e), bool)
            mine = here[by_part[part_cuts[q]:part_cuts[q + 1]]]
            if by_ids is not None:   # most locations found from the entries' side; the rest by position
                by_ids.match(e, log_id, verdict, pointed)
                mine = mine[verdict[mine] != SAME]
            mine = _near_first(lr["key"], mine, int(off[0]), last)
            match_log(off, e["scope"], e["ledger"], e["entry"], lr["key"], lr["entry"], lr["file"], fs, fl, mine,
                      False, slot, verdict, pointed)
            for i in mine[verdict[mine] == OTHER_ENTRY].tolist():
                other[i] = e[slot[i]]
            if not pointed.all():
                free.append(log_rows(e[~pointed], log_id))
    found: Wrong = [(int(lr["k"][i]), other.get(i)) for i in np.flatnonzero(verdict != SAME).tolist()]
    return found, np.concatenate(free) if len(free) > 1 else free[0] if free else np.zeros(0, ENTRY_ROW)


class FileLedgers:
    """The index's file rows placed by (scope, ledger) (diskio.ledger_table), once for every range of a
    pass; ``table`` is None when two file rows are one ledger (either could be a location's)."""

    def __init__(self, files: np.ndarray):
        self.rows, self.scope, self.ledger = len(files), files["scope"], files["ledger"]
        table = empty_table(len(files))
        placed = place_rows(np.ascontiguousarray(self.scope), np.ascontiguousarray(self.ledger), table)
        self.table = table if placed else None


class ByIds:
    """What match_by_ids needs to look a range's locations up by the ids of the entries: the file rows
    by (scope, ledger) and each file row's run of the locations (in index order: by file row, then
    entry id). Where the interleaved logs of a busy bookie put a ledger's entries far apart, each
    entry then costs one lookup of its own location, against a search by position per location."""

    def __init__(self, ledgers: FileLedgers, table: np.ndarray, lr: np.ndarray, start: np.ndarray, first: np.ndarray):
        self.scope, self.ledger, self.table = ledgers.scope, ledgers.ledger, table
        self.start, self.first, self.key, self.entry = start, first, lr["key"], lr["entry"]

    @classmethod
    def of(cls, ledgers: FileLedgers, lr: np.ndarray) -> ByIds | None:
        """None when the lookup cannot be used (then every location is looked up by position): two file
        rows of one ledger, or the locations not in index order."""
        if len(lr) == 0 or ledgers.table is None:
            return None
        start, first = np.empty(ledgers.rows + 1, np.int64), np.empty(ledgers.rows, np.int64)
        if not file_runs(lr["file"], lr["entry"], start, first):
            return None
        return cls(ledgers, ledgers.table, lr, start, first)

    def match(self, e: np.ndarray, log_id: int, verdict: np.ndarray, pointed: np.ndarray) -> int:
        """match_by_ids over the entries ``e`` of log ``log_id``: the SAME locations marked in
        ``verdict``, their entries in ``pointed``; returns how many."""
        return match_by_ids(e["offset"], e["scope"], e["ledger"], e["entry"], log_id, self.scope, self.ledger,
                            self.table, self.start, self.first, self.key, self.entry, verdict, pointed,
                            np.empty(BY_IDS_BLOCK, np.int64), np.empty(BY_IDS_BLOCK, np.int64))


def _near_first(keys: np.ndarray, rows: np.ndarray, first: int, last: int) -> np.ndarray:
    """``rows`` (locations into the part of a log whose entries start at offsets ``first`` .. ``last``)
    grouped by the 64 KiB they point into, each group's in their order. A ledger's locations come in
    entry order; where the logs interleave ledgers, as a busy bookie's do, consecutive ones are far
    apart in the log, and each search would start from an entry far from the one it looks for. Each
    location's verdict is its own: the order of the lookups changes no result."""
    buckets = ((last - first) >> NEAR_BITS) + 1
    if buckets < 2 or len(rows) < 2:
        return rows
    bucket = np.empty(len(rows), np.int64)
    position_buckets(keys, rows, first, NEAR_BITS, buckets, bucket)
    return rows[_grouped(bucket, buckets, len(rows))[0]]


def _by_log(logs: Sequence[tuple[int, EntryLogArrays]], lr: np.ndarray) -> list[np.ndarray]:
    """Per log, the rows of ``lr`` pointing into it, in index order."""
    if len(logs) == 1:
        return [np.arange(len(lr), dtype=np.int64)]
    ids = np.array([i for i, _s in logs], np.uint64)
    order, cuts = _grouped(np.searchsorted(ids, location_logs(lr["key"]).astype(np.uint64)).astype(np.int64),
                           len(logs), len(lr))
    return [order[cuts[p]:cuts[p + 1]] for p in range(len(logs))]


def _grouped(part_of: np.ndarray, parts: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, cuts) of stable_partition: the rows grouped by ``part_of`` (``n`` rows), each group's in order."""
    order, cuts = np.empty(n, np.int64), np.zeros(parts + 1, np.int64)
    if len(part_of):
        stable_partition(part_of, parts, order, cuts)
    return order, cuts


def _join_rows(files: np.ndarray, here: list[tuple[int, np.ndarray]], lr: np.ndarray) -> tuple[Wrong, np.ndarray]:
    # A log whose id does not fit a location's high bits is one no location points at: its entries
    # are all free, after the others (its id is above theirs), and they take no key of another log.
    parts = [log_rows(e, log_id) for log_id, e in here if log_id < LOCATABLE_LOGS]
    beyond = [log_rows(e, log_id) for log_id, e in here if log_id >= LOCATABLE_LOGS]
    t = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, ENTRY_ROW)
    if len(t) > 1 and not bool(np.all(t["key"][1:] >= t["key"][:-1])):
        t = t[np.argsort(t["key"], kind="stable")]   # (each log's entries come in position order)
    slot, verdict = np.empty(len(lr), np.int64), np.empty(len(lr), np.uint8)
    pointed = np.zeros(len(t), dtype=bool)
    f = lr["file"]
    match_locations(t["key"], t["scope"], t["ledger"], t["entry"], lr["key"], files["scope"][f], files["ledger"][f],
                    lr["entry"], slot, verdict, pointed)
    found: Wrong = [(int(lr["k"][i]), t[slot[i]] if verdict[i] == OTHER_ENTRY else None)
                    for i in np.flatnonzero(verdict != SAME).tolist()]
    return found, np.concatenate([t[~pointed], *beyond]) if beyond else t[~pointed]
