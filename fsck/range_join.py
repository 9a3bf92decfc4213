"""One range's join in pass 5 (fsck/passes/p5_crosscheck.py): the index locations routed to a range of
entry-log ids (fsck.location_ranges) against the entries the scans of those logs found.

Each log is joined on its scan's own arrays, its locations grouped by log: nothing per entry is
copied but the entries no location points at. A range whose logs cannot be joined one at a time (one
id in two ledger dirs, entries out of position order) is joined as one table of rows sorted by
location. Both give the same wrong locations, the entries found where they point, and free entries;
every entry of a log whose id no location can name is free."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bkdisk.diskio.kernels import stable_partition
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.index import POSITION_BITS, location_logs
from bkdisk.fsck.crosscheck_kernels import OTHER_ENTRY, SAME, entry_rows, match_locations, match_log

LOCATABLE_LOGS = 1 << (64 - POSITION_BITS)   # log ids a location's high bits can name
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
               lr: np.ndarray) -> tuple[Wrong, np.ndarray]:
    """The locations ``lr`` (location_ranges.LOCATION_ROW, in index order) joined with the entries of
    the range's logs ``here`` ((id, scan) in id order): the wrong locations in ``lr``'s order, and the
    entries no location points at (ENTRY_ROW, in log id and position order)."""
    logs = _apart(here)
    if not logs:
        return _join_rows(files, [(i, s.entries) for i, s in here], lr)
    return _join_logs(files, logs, lr)


def _apart(here: Sequence[tuple[int, EntryLogArrays]]) -> list[tuple[int, np.ndarray]] | None:
    """The range's logs as (id, entries) when each can be joined on its own: ids distinct and within a
    location's bits, each log's entries in position order (as its scan walks it), every position within
    a location's bits."""
    out: list[tuple[int, np.ndarray]] = []
    for log_id, s in here:
        if log_id >= LOCATABLE_LOGS:
            return None
        e = s.entries   # (read once: a spilled scan reads its file at each access)
        off = e["offset"]
        if (out and out[-1][0] == log_id) or (len(e) and (int(off[-1]) + SIZE_PREFIX_SIZE >= 1 << POSITION_BITS
                                                           or bool(np.any(off[1:] < off[:-1])))):
            return None
        out.append((log_id, e))
    return out


def _join_logs(files: np.ndarray, logs: list[tuple[int, np.ndarray]], lr: np.ndarray) -> tuple[Wrong, np.ndarray]:
    slot, verdict = np.empty(len(lr), np.int64), np.empty(len(lr), np.uint8)
    pointed = [np.zeros(len(e), bool) for _i, e in logs]
    part = np.zeros(0, np.int64)
    if len(lr) and len(logs) > 1:   # the locations grouped by log, each log's in index order
        ids = np.array([i for i, _e in logs], np.uint64)
        part = np.searchsorted(ids, location_logs(lr["key"]).astype(np.uint64)).astype(np.int64)
        order, cuts = np.empty(len(lr), np.int64), np.empty(len(logs) + 1, np.int64)
        stable_partition(part, len(logs), order, cuts)
    fs, fl = files["scope"], files["ledger"]
    for p, (_i, e) in enumerate(logs):
        if not len(lr):
            break
        every = len(logs) == 1
        rows = part if every else order[cuts[p]:cuts[p + 1]]
        match_log(e["offset"], e["scope"], e["ledger"], e["entry"], lr["key"], lr["entry"], lr["file"], fs, fl, rows,
                  every, slot, verdict, pointed[p])
    found: Wrong = []
    for i in np.flatnonzero(verdict != SAME).tolist():
        e = logs[int(part[i]) if len(part) else 0][1]
        found.append((int(lr["k"][i]), e[slot[i]] if verdict[i] == OTHER_ENTRY else None))
    free = [log_rows(e[~mark], log_id) for (log_id, e), mark in zip(logs, pointed) if not mark.all()]
    return found, np.concatenate(free) if len(free) > 1 else free[0] if free else np.zeros(0, ENTRY_ROW)


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
