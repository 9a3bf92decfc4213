"""Pass 5 on a DbLedgerStorage ledger dir: every location of its ``locations`` database against the entry
the scan of that dir's entry log found at (its offset - 4), and every scanned entry no location points at.

The join runs over ranges of entry-log ids, one range's entries and the locations that point into it at
a time: ranges sized to the pass's share of ``--memory-limit``, the locations routed to their range
(diskio.spill.RangeSpill, spilled to the check's folder when they do not fit). Whether an entry no
location points at still has a location elsewhere is a join by ledger partitions (fsck.keyjoin).
Findings come out in the order of one join over everything: locations in key order, then entries in
(log, position) order.
"""
from __future__ import annotations

import os

import numpy as np

from diskio.spill import ChunkedArray, RangeSpill, split_ranges
from formats.dbledger import ENTRY_SIZE_FIELD
from formats.paths import LOCATIONS_DB
from fsck.codes import Code
from fsck.context import CheckContext
from fsck.keyjoin import KeySet
from fsck.passes.p_dbindex import REBUILD_HINT, Pairs, database_of
from fsck.scan_store import entry_count
from rocksdbfiles.dbindex import ledger_ids

SHARE = 0.25          # of --memory-limit: one range's entries and locations, and their sort
ENTRY_ROW = np.dtype([("at", "<u8"), ("ledger", "<i8"), ("entry", "<i8")])     # at = log << 32 | (offset + 4)
LOC_ROW = np.dtype([("k", "<i8"), ("at", "<u8"), ("ledger", "<i8"), ("entry", "<i8")])
PAIR_ROW = np.dtype([("seq", "<i8"), ("ledger", "<i8"), ("entry", "<i8")])
# A range's working set per entry, measured: its row, the join's copy and sort, the location routed to it
# (about one per entry), the slots and masks of the join.
_WORK_PER_ENTRY = 6 * ENTRY_ROW.itemsize + LOC_ROW.itemsize + 16
_KEYSET_ROW = 48      # bytes a KeySet holds per row (columns, mix, order) with its query's temporaries


def _at(log: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return (log.astype(np.uint64) << np.uint64(32)) | pos.astype(np.uint64)


def _entries(scan, log_id: int) -> np.ndarray:
    e = scan.entries
    t = np.empty(len(e), ENTRY_ROW)
    t["at"] = _at(np.full(len(e), log_id, np.int64), e["offset"].astype(np.int64) + ENTRY_SIZE_FIELD)
    t["ledger"], t["entry"] = e["ledger"], e["entry"]
    return t


def cross_check(ctx: CheckContext, di: int, current: str, idx, scans) -> Pairs:
    budget = ctx.options.memory.share(SHARE)
    logs = {lf.log_id: lf.path for lf in ctx.log_files if lf.dir_index == di}
    scanned = {lf.log_id: s for lf in ctx.log_files if lf.dir_index == di
               and (s := scans.get(lf.path)) is not None and not isinstance(s, Exception) and entry_count(s)}
    ids = np.array(sorted(logs), np.int64)
    weights = np.array([entry_count(scanned[i]) if i in scanned else 0 for i in ids.tolist()], np.float64)
    bounds = split_ranges(ids, weights * _WORK_PER_ENTRY, budget)

    def route(rows: np.ndarray) -> np.ndarray:
        return np.searchsorted(bounds, (rows["at"] >> np.uint64(32)).astype(np.int64), side="right")

    locations_db = os.path.join(current, LOCATIONS_DB)
    flagged: list[tuple[int, tuple]] = []
    locs = RangeSpill(LOC_ROW, route, len(bounds) + 1, budget, ctx.spill, "db-locations-by-log")
    k0 = 0
    for c in idx.location_chunks():
        known = np.isin(c["log"], ids)
        for i in np.flatnonzero(~known).tolist():
            flagged.append((k0 + i, (Code.DBINDEX_LOCATION_MISSING_LOG, dict(
                path=locations_db, scope=0, ledger=int(c["ledger"][i]), entry=int(c["entry"][i]),
                detail=f"{int(c['log'][i]):x}.log"))))
        rows = np.empty(int(known.sum()), LOC_ROW)
        rows["k"] = k0 + np.flatnonzero(known)
        rows["at"] = _at(c["log"][known], c["offset"][known])
        rows["ledger"], rows["entry"] = c["ledger"][known], c["entry"][known]
        locs.append(rows)
        k0 += len(c)
    free = ChunkedArray(ENTRY_ROW, budget, ctx.spill, "db-unpointed")
    starts = np.concatenate([[np.iinfo(np.int64).min], bounds]).astype(np.int64)
    for r, lr in locs.ranges():
        hi = int(bounds[r]) if r < len(bounds) else None
        parts = [_entries(s, i) for i, s in sorted(scanned.items()) if i >= starts[r] and (hi is None or i < hi)]
        t = np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else np.zeros(0, ENTRY_ROW)
        if len(t) > 1 and not bool(np.all(t["at"][1:] >= t["at"][:-1])):
            t = t[np.argsort(t["at"], kind="stable")]
        n = len(t)
        slot = np.minimum(np.searchsorted(t["at"], lr["at"]), max(n - 1, 0))
        if n:
            hit = t["at"][slot] == lr["at"]
            right = hit & (t["ledger"][slot] == lr["ledger"]) & (t["entry"][slot] == lr["entry"])
        else:
            hit = right = np.zeros(len(lr), bool)
        for i in np.flatnonzero(~right).tolist():
            at = int(lr["at"][i])
            what = f"ledger {int(t['ledger'][slot[i]])} entry {int(t['entry'][slot[i]])}" if hit[i] else "no entry"
            flagged.append((int(lr["k"][i]), (Code.DBINDEX_LOCATION_WRONG, dict(
                path=locations_db, scope=0, ledger=int(lr["ledger"][i]), entry=int(lr["entry"][i]),
                detail=f"{logs[at >> 32]} position {at & 0xFFFFFFFF}, found {what} there; {REBUILD_HINT}"))))
        pointed = np.zeros(n, bool)
        pointed[slot[hit]] = True              # (positions in a log are distinct: one entry per at)
        free.append(t[~pointed])
        del t, lr
    locs.close()
    out: Pairs = [pair for _k, pair in sorted(flagged, key=lambda kp: kp[0])]
    if len(free):
        out += _unpointed(ctx, idx, free, logs, budget)
    return out


def _unpointed(ctx: CheckContext, idx, free: ChunkedArray, logs: dict[int, str], budget: int) -> Pairs:
    """An entry no location points at is garbage (a superseded copy, a deleted ledger) unless its ledger is
    live, no location of that entry exists and the journal will not replay it: then reads of it fail.
    Where part of the locations database could not be read, what it holds is unknown: info only."""
    damaged = any(database_of(p.path)[0] == LOCATIONS_DB and p.kind != "wal-torn-tail" for p in idx.problems)
    torn = next((p for p in idx.problems if p.kind == "wal-torn-tail" and database_of(p.path)[0] == LOCATIONS_DB),
                None)
    why = f"; the WAL {torn.path} is torn at {torn.offset}" if torn is not None else ""
    pend = [(lid.ledger, eid) for _p, _o, lid, eid in ctx.journal_facts.pending if lid.scope == 0]
    pending = KeySet([np.array([p[0] for p in pend], np.uint64).view(np.int64),     # ledger ids as the keys' i8
                      np.array([p[1] for p in pend], np.int64)])
    live = ledger_ids(idx)
    lost = np.zeros(len(free), bool)           # per free entry: an error (else garbage, info)
    if not damaged:
        for start, t in free.chunks():
            lost[start:start + len(t)] = np.isin(t["ledger"], live) & ~pending.contains([t["ledger"], t["entry"]])
        if lost.any():
            lost[lost] = ~_has_location(idx, free, np.flatnonzero(lost), budget, ctx.spill)
    out: Pairs = []
    for start, t in free.chunks():
        for j in range(len(t)):
            at, lid, eid = int(t["at"][j]), int(t["ledger"][j]), int(t["entry"][j])
            where = dict(path=logs[at >> 32], offset=(at & 0xFFFFFFFF) - ENTRY_SIZE_FIELD, scope=0, ledger=lid,
                         entry=eid)
            if lost[start + j]:
                out.append((Code.DBINDEX_ENTRY_NOT_INDEXED, dict(where, detail=f"{why}; {REBUILD_HINT}")))
            else:
                out.append((Code.DBINDEX_ENTRY_UNINDEXED, where))
    return out


def _has_location(idx, free: ChunkedArray, rows: np.ndarray, budget: int, folder) -> np.ndarray:
    """Whether some location of the dir holds (ledger, entry) of each free entry ``rows`` names (in
    order): joined by ledger, in as many ledger partitions as the budget needs."""
    parts = max(1, -(-(len(rows) + idx.count) * _KEYSET_ROW // budget))

    def route(r: np.ndarray) -> np.ndarray:
        return (r["ledger"].astype(np.uint64) % np.uint64(parts)).astype(np.int64)

    wanted = RangeSpill(PAIR_ROW, route, parts, budget, folder, "db-unpointed-ledgers")
    for start, t in free.chunks():
        sel = rows[(rows >= start) & (rows < start + len(t))]
        w = np.empty(len(sel), PAIR_ROW)
        w["seq"] = np.searchsorted(rows, sel)
        w["ledger"], w["entry"] = t["ledger"][sel - start], t["entry"][sel - start]
        wanted.append(w)
    held = RangeSpill(PAIR_ROW, route, parts, budget, folder, "db-located-ledgers")
    for c in idx.location_chunks():
        h = np.empty(len(c), PAIR_ROW)
        h["seq"], h["ledger"], h["entry"] = 0, c["ledger"], c["entry"]
        held.append(h)
    out = np.zeros(len(rows), bool)
    for p, w in wanted.ranges():
        if len(w):
            ref = held.range_rows(p)
            out[w["seq"]] = KeySet([ref["ledger"], ref["entry"]]).contains([w["ledger"], w["entry"]])
    wanted.close()
    held.close()
    return out
