"""Pass 5 on a DbLedgerStorage bookie: each location of a ledger dir's ``locations`` database against the
entry the scan of that entry log found there, a range of log ids at a time within DB_SHARE; an entry no
location points at is garbage, or an error when its ledger is live and nothing else will find it."""
from __future__ import annotations

import os

import numpy as np

from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.distinct import distinct, members
from bkdisk.diskio.mapped import DiskError
from bkdisk.diskio.sorted_search import searched_in_order
from bkdisk.diskio.spill import RangeSpill, split_ranges
from bkdisk.entrylogs.scan_parts import entry_count, entry_parts
from bkdisk.formats.index import join_locations, location_logs, unpack_location
from bkdisk.formats.paths import LOCATIONS_DB, entry_log_name
from bkdisk.fsck import dbindex
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.keyjoin import KeySet

DB_SHARE = 0.25       # of --memory-limit: one range's entries and locations, and their sort
DB_ENTRY_ROW = np.dtype([("at", "<u8"), ("ledger", "<i8"), ("entry", "<i8")])     # at: the location of the entry
LOC_ROW = np.dtype([("k", "<i8"), ("at", "<u8"), ("ledger", "<i8"), ("entry", "<i8")])
# A range's working set per entry, measured: its row, the join's copy and sort, the location routed to it
# (about one per entry), the slots and masks of the join; and the locations' search order and sorted keys.
_DB_WORK_PER_ENTRY = 6 * DB_ENTRY_ROW.itemsize + LOC_ROW.itemsize + 16 + 2 * np.dtype(np.int64).itemsize


def check_locations(ctx: CheckContext) -> dbindex.Pairs:
    """DbLedgerStorage: each location against the entry the scan of that dir's entry log found there."""
    out: dbindex.Pairs = []
    for di, current, idx in dbindex.read(ctx):
        if dbindex.is_index(idx):
            out += _cross_check_dir(ctx, di, current, idx, ctx.log_scans)
    return out


def _at(log: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return join_locations(log, pos)


def _entries(scan, log_id: int) -> np.ndarray:
    from bkdisk.formats.dbledger import ENTRY_SIZE_FIELD
    t = np.empty(entry_count(scan), DB_ENTRY_ROW)
    for lo, e in entry_parts(scan):
        p = t[lo:lo + len(e)]
        p["at"] = _at(np.full(len(e), log_id, np.int64), e["offset"].astype(np.int64) + ENTRY_SIZE_FIELD)
        p["ledger"], p["entry"] = e["ledger"], e["entry"]
    return t


def _cross_check_dir(ctx: CheckContext, di: int, current: str, idx, scans) -> dbindex.Pairs:
    """One ledger dir's locations joined with the entries of its scanned entry logs."""
    budget = ctx.options.memory.share(DB_SHARE)
    logs = {lf.log_id: lf.path for lf in ctx.log_files if lf.dir_index == di}
    scanned = {lf.log_id: s for lf in ctx.log_files if lf.dir_index == di
               and (s := scans.get(lf.path)) is not None and not isinstance(s, Exception) and entry_count(s)}
    ids = np.array(sorted(logs), np.int64)
    # Logs that could not be read: their locations are unchecked, not wrong (pass 4 and 7 say so).
    unread = np.array(sorted(lf.log_id for lf in ctx.log_files if lf.dir_index == di
                             and isinstance(scans.get(lf.path), DiskError)), np.int64)
    weights = np.array([entry_count(scanned[i]) if i in scanned else 0 for i in ids.tolist()], np.float64)
    bounds = split_ranges(ids, weights * _DB_WORK_PER_ENTRY, budget)

    def route(rows: np.ndarray) -> np.ndarray:
        return np.searchsorted(bounds, location_logs(rows["at"]).astype(np.int64), side="right")

    locations_db = os.path.join(current, LOCATIONS_DB)
    flagged: list[tuple[int, tuple]] = []
    locs = RangeSpill(LOC_ROW, route, len(bounds) + 1, budget, ctx.spill, "db-locations-by-log")
    k0 = 0
    for c in idx.location_chunks():
        known = members(c["log"], ids)
        for i in np.flatnonzero(~known).tolist():
            log_id = int(c["log"][i])
            flagged.append((k0 + i, (Code.DBINDEX_LOCATION_MISSING_LOG, dict(
                path=locations_db, scope=0, ledger=int(c["ledger"][i]), entry=int(c["entry"][i]),
                detail=entry_log_name(log_id), extra={"log_id": log_id}))))
        if len(unread):
            known &= ~members(c["log"], unread)
        rows = np.empty(int(known.sum()), LOC_ROW)
        rows["k"] = k0 + np.flatnonzero(known)
        rows["at"] = _at(c["log"][known], c["offset"][known])
        rows["ledger"], rows["entry"] = c["ledger"][known], c["entry"][known]
        locs.append(rows)
        k0 += len(c)
    free = ChunkedArray(DB_ENTRY_ROW, budget, ctx.spill, "db-unpointed")
    starts = np.concatenate([[np.iinfo(np.int64).min], bounds]).astype(np.int64)
    for r, lr in locs.ranges():
        hi = int(bounds[r]) if r < len(bounds) else None
        parts = [_entries(s, i) for i, s in sorted(scanned.items()) if i >= starts[r] and (hi is None or i < hi)]
        t = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, DB_ENTRY_ROW)
        if len(t) > 1 and not bool(np.all(t["at"][1:] >= t["at"][:-1])):
            t = t[np.argsort(t["at"], kind="stable")]
        n = len(t)
        slot = np.minimum(searched_in_order(t["at"], lr["at"]), max(n - 1, 0))
        if n:
            hit = t["at"][slot] == lr["at"]
            right = hit & (t["ledger"][slot] == lr["ledger"]) & (t["entry"][slot] == lr["entry"])
        else:
            hit = right = np.zeros(len(lr), bool)
        for i in np.flatnonzero(~right).tolist():
            log, pos = unpack_location(int(lr["at"][i]))
            what = f"ledger {int(t['ledger'][slot[i]])} entry {int(t['entry'][slot[i]])}" if hit[i] else "no entry"
            flagged.append((int(lr["k"][i]), (Code.DBINDEX_LOCATION_WRONG, dict(
                path=locations_db, scope=0, ledger=int(lr["ledger"][i]), entry=int(lr["entry"][i]),
                detail=f"{logs[log]} position {pos}, found {what} there; {dbindex.REBUILD_HINT}"))))
        pointed = np.zeros(n, bool)
        pointed[slot[hit]] = True              # (positions in a log are distinct: one entry per at)
        free.append(t[~pointed])
        del t, lr
    locs.close()
    out: dbindex.Pairs = [pair for _k, pair in sorted(flagged, key=lambda kp: kp[0])]
    if len(free):
        out += _unpointed(ctx, idx, free, logs, budget)
    return out


def _unpointed(ctx: CheckContext, idx, free: ChunkedArray, logs: dict[int, str], budget: int) -> dbindex.Pairs:
    """An entry no location points at is garbage (a superseded copy, a deleted ledger) unless its ledger is
    live, no location of that entry exists and the journal will not replay it: then reads of it fail.
    Where part of the locations database could not be read, what it holds is unknown: info only."""
    from bkdisk.formats.dbledger import ENTRY_SIZE_FIELD
    from bkdisk.rocksdbfiles.dbindex import ledger_ids
    # (a database gone is read as the empty one BookKeeper makes: what it held is lost, not unknown)
    damage = next((p for p in idx.problems if dbindex.database_of(p.path)[0] == LOCATIONS_DB
                   and p.kind not in ("wal-torn-tail", "db-missing")), None)
    damaged = damage is not None
    # (garbage only where the whole database was read: else its location may be in the part that was not)
    unknown = "collectable garbage" if damage is None else (
        f"unknown whether garbage: the locations database is damaged ({damage.kind} in {damage.path}"
        + (f" at offset {damage.offset}" if damage.offset is not None else "") + "), its location may be there")
    torn = next((p for p in idx.problems
                 if p.kind == "wal-torn-tail" and dbindex.database_of(p.path)[0] == LOCATIONS_DB), None)
    gone = next((p for p in idx.problems
                 if p.kind == "db-missing" and dbindex.database_of(p.path)[0] == LOCATIONS_DB), None)
    why = f"; the WAL {torn.path} is torn at {torn.offset}" if torn is not None else \
        "; the locations database is gone (BookKeeper's next start makes it empty)" if gone else ""
    pend = ctx.journal_facts.pending.rows
    pend = pend[pend["scope"] == 0]
    pending = KeySet([pend["ledger"].view(np.int64), pend["entry"]])     # ledger ids as the keys' i8
    live = distinct(ledger_ids(idx).view(np.uint64))   # (the index keys ids as signed longs)
    lost = np.zeros(len(free), bool)           # per free entry: an error (else garbage, info)
    if not damaged:
        for start, t in free.chunks():
            lost[start:start + len(t)] = members(t["ledger"], live) & ~pending.contains([t["ledger"], t["entry"]])
        if lost.any():
            lost[lost] = ~dbindex.has_location(idx, free, np.flatnonzero(lost), budget, ctx.spill)
    out: dbindex.Pairs = []
    for start, t in free.chunks():
        for j in range(len(t)):
            at, lid, eid = int(t["at"][j]), int(t["ledger"][j]), int(t["entry"][j])
            log, pos = unpack_location(at)
            where = dict(path=logs[log], offset=pos - ENTRY_SIZE_FIELD, scope=0, ledger=lid, entry=eid)
            if lost[start + j]:
                out.append((Code.DBINDEX_ENTRY_NOT_INDEXED, dict(where, detail=f"{why}; {dbindex.REBUILD_HINT}")))
            else:
                out.append((Code.DBINDEX_ENTRY_UNINDEXED, dict(where, detail=unknown)))
    return out
