"""Pass 5: cross-check: each index location points at an entry of that (scope, ledger, entry);
entries that no index points at are superseded copies or garbage, or unindexed data (an error). On a
DbLedgerStorage bookie the same join runs per ledger dir, between its ``locations`` database and the
entries the scan of that dir's entry logs found (at their offset + 4); whether an entry no location
points at still has a location elsewhere is a join by ledger partitions (fsck.dbindex.has_location).

The join runs over ranges of entry-log ids, one range's entries and the locations that point into it
at a time: ranges sized to the pass's share of ``--memory-limit``, the locations grouped by range
(location_ranges.py: read again per range when the ranges are few, else routed once and spilled to the
check's folder when they do not fit). Findings come out in
the order of one join over everything: wrong locations in index order, then entries no index points
at in log and position order, then ledgers without an index by ledger id (DbLedgerStorage: locations
in key order, then entries in (log, position) order).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.config import free_heap_returned
from bkdisk.diskio.distinct import run_starts
from bkdisk.diskio.spill import RangeSpill, split_ranges
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entry_count
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import slot_offset, unpack_location
from bkdisk.fsck import dbindex
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.keyjoin import KeySet, ledger_set
from bkdisk.fsck.lanes import Task, in_order
from bkdisk.fsck.passes.p5_crosscheck.db_locations import check_locations
from bkdisk.fsck.passes.p5_crosscheck.location_ranges import CHUNK, HalvesRouted, RereadLocations, routed_locations
from bkdisk.fsck.passes.p5_crosscheck.range_join import ENTRY_ROW, FileLedgers, join_range

SHARE = 0.10          # of --memory-limit: the routed locations; again, one range's entries and their join
TRIPLE_ROW = np.dtype([("scope", "<u8"), ("ledger", "<u8"), ("entry", "<i8")])
FREE_ROW = np.dtype([("seq", "<i8"), ("scope", "<u8"), ("ledger", "<u8"), ("entry", "<i8")])
# A range's working set per entry at most: the one-table join's row, its sort's order and the sorted copy
# (a range joined log by log takes less: rows only for the free entries).
_WORK_PER_ENTRY = 3 * ENTRY_ROW.itemsize
PAIR_SHARE = 0.25     # of --memory-limit: two ranges joined at once


def run(ctx: CheckContext) -> Iterable[Finding]:
    free_heap_returned()   # (what the passes before freed: this pass's peak would stand on it)
    if ctx.dirs.storage_kind == "rocksdb":
        return dbindex.findings(check_locations(ctx))
    return _index_files(ctx)


RANGES = "crosscheck_ranges"   # ctx.shared's name for the ranges and their routed locations


@dataclass
class Ranges:
    """What the join of index-file locations with the entries starts from: the scanned logs, the
    ranges of log ids it runs over, each range's locations."""
    scans: list
    log_paths: dict[int, str]
    bounds: np.ndarray
    width: int             # ranges joined at once
    locs: RereadLocations | RangeSpill | HalvesRouted


def plan_ranges(ctx: CheckContext) -> Ranges:
    """The ranges of the join and their locations: on a lane of its own (``ranges_ahead``), else by
    this pass."""
    inv = ctx.index_inventory
    budget = ctx.options.memory.share(SHARE)
    # Only logs that were scanned can be judged; pass 3 reports missing logs, pass 4 unreadable ones.
    got = [(lf, ctx.log_scans.get(lf.path)) for lf in ctx.log_files]
    scans = [(lf, s) for lf, s in got if isinstance(s, EntryLogArrays)]
    size_of = {lf.log_id: s.size for lf, s in scans}
    log_paths = {lf.log_id: lf.path for lf in ctx.log_files}
    ids = np.array(sorted(size_of), dtype=np.uint64)
    per_id = dict.fromkeys(size_of, 0)
    for lf, s in scans:
        per_id[lf.log_id] += entry_count(s)
    # With --jobs, two ranges are joined at once, each within half the share, while two of the largest
    # log's joins fit in PAIR_SHARE (a range holds a log at least, whatever the share).
    largest = max(per_id.values(), default=0) * _WORK_PER_ENTRY
    width = 2 if ctx.options.jobs > 1 and 2 * largest <= ctx.options.memory.share(PAIR_SHARE) else 1
    bounds = split_ranges(ids, np.array([per_id[i] for i in ids.tolist()], np.float64) * _WORK_PER_ENTRY,
                          budget // width)
    sizes = np.array([size_of[i] for i in ids.tolist()], np.int64)
    # (a location past the end of its log is pass 3's INDEX_LOCATION_OUT_OF_RANGE: reported once, there)
    locs = routed_locations(inv.locations, ids, sizes, bounds, budget, ctx.spill, keep_going=ctx.keep_going,
                            threads=2 if ctx.options.jobs > 1 else 1)
    return Ranges(scans, log_paths, bounds, width, locs)


def ranges_ahead(ctx: CheckContext) -> list[Task]:
    """The lane that plans the join (waiting for the entry-log scans) while the passes before this one
    report: with --jobs above 1 on index files, once the index was read (by pass 1, on the passes'
    thread: the lane never reads it first)."""
    if ctx.options.jobs <= 1 or ctx.dirs.storage_kind == "rocksdb" or not ctx.computed("index_inventory"):
        return []
    return [(RANGES, lambda: plan_ranges(ctx))]


def _index_files(ctx: CheckContext) -> Iterator[Finding]:
    inv = ctx.index_inventory
    files = inv.files
    budget = ctx.options.memory.share(SHARE)
    plan = ctx.shared(RANGES, lambda: plan_ranges(ctx))
    ctx.lanes.results.pop(RANGES, None)   # (held by this pass only: its locations go as the join ends)
    scans, log_paths, bounds, width, locs = plan.scans, plan.log_paths, plan.bounds, plan.width, plan.locs
    all_locs = inv.locations

    wrong: list[tuple[int, Finding]] = []
    free = ChunkedArray(ENTRY_ROW, budget, ctx.spill, "free")
    lo_ids = np.concatenate([[0], bounds]).astype(np.uint64)
    by_id = sorted(scans, key=lambda ls: ls[0].log_id)   # (stable: one id in two dirs keeps the dirs' order)
    ledgers = FileLedgers(files)   # (placed once for every range's lookup by ids)

    def join(r: int, lr: np.ndarray) -> tuple[list[tuple[int, Finding]], np.ndarray]:
        """Range ``r``'s entries joined with the locations routed to it: wrong locations, free entries."""
        hi = bounds[r] if r < len(bounds) else None
        here = [(lf.log_id, s) for lf, s in by_id
                if lf.log_id >= int(lo_ids[r]) and (hi is None or lf.log_id < int(hi))]
        found, free_here = join_range(files, here, lr, ledgers=ledgers)
        return [(k, _wrong(inv, all_locs[k], f)) for k, f in found], free_here

    def rows_joined(r: int) -> tuple[list[tuple[int, Finding]], np.ndarray]:
        """Range ``r``'s locations made (read back from the spill, or picked from the index's) and
        joined, on the join's thread: with two joins at once, neither core waits while this thread
        makes the next range's rows or takes the last range's results."""
        return join(r, locs.range_rows(r))

    for wrong_here, free_here in in_order(rows_joined, [(r,) for r in range(locs.n)], width):
        wrong += wrong_here
        free.append(free_here)   # (in range order, as one join over everything gives them)
    locs.close()
    for _k, f in sorted(wrong, key=lambda kf: kf[0]):
        yield f
    if len(free) == 0:
        return
    yield from _free_entries(ctx, inv, free, log_paths, budget)


def _triples(c: np.ndarray, files: np.ndarray) -> np.ndarray:
    """(scope, ledger, entry) of index locations."""
    t = np.empty(len(c), TRIPLE_ROW)
    f = c["file"]
    t["scope"], t["ledger"], t["entry"] = files["scope"][f], files["ledger"][f], c["entry"]
    return t


def _wrong(inv, loc, found) -> Finding:
    f = int(loc["file"])
    files = inv.files
    where = f"log {int(loc['log']):x}.log position {int(loc['pos'])}"
    what = "no entry starting there" if found is None else \
        f"ledger {LedgerId(int(found['scope']), int(found['ledger']))} entry {int(found['entry'])}"
    return Finding(Code.INDEX_LOCATION_WRONG, path=inv.paths[f], offset=slot_offset(int(loc["entry"])),
                   scope=int(files["scope"][f]), ledger=int(files["ledger"][f]), entry=int(loc["entry"]),
                   detail=f"{where}, found {what}")


def _indexed(free: ChunkedArray, inv, budget: int, folder) -> np.ndarray:
    """Per free entry (in order): whether some index holds its (scope, ledger, entry) at all (it is a
    superseded copy). Joined by ledger, in as many ledger partitions as the budget needs."""
    parts = max(1, -(-(len(free) + len(inv.locations)) * 48 // budget))

    def route(rows: np.ndarray) -> np.ndarray:
        return (rows["ledger"] % np.uint64(parts)).astype(np.int64)

    out = np.zeros(len(free), bool)
    wanted = RangeSpill(FREE_ROW, route, parts, budget, folder, "free-ledgers")
    for start, c in free.chunks(CHUNK):
        rows = np.empty(len(c), FREE_ROW)
        rows["seq"] = start + np.arange(len(c))
        rows["scope"], rows["ledger"], rows["entry"] = c["scope"], c["ledger"], c["entry"]
        wanted.append(rows)
    held = RangeSpill(TRIPLE_ROW, route, parts, budget, folder, "indexed-ledgers")
    for k0 in range(0, len(inv.locations), CHUNK):
        held.append(_triples(inv.locations[k0:k0 + CHUNK], inv.files))
    for p, rows in wanted.ranges():
        if len(rows):
            ref = held.range_rows(p)
            out[rows["seq"]] = KeySet([ref["scope"], ref["ledger"], ref["entry"]]).contains(
                [rows["scope"], rows["ledger"], rows["entry"]])
    wanted.close()
    held.close()
    return out


def _looked_up(md, ids: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Per row, whether a view that holds only this bookie's ledgers knows the row's ledger (asked
    once per distinct ledger among ``rows``); a plain mapping was iterated whole: nothing to ask."""
    out = np.zeros(len(rows), bool)
    if isinstance(md, dict) or not rows.any():
        return out
    from bkdisk.bookie.metadata_dir import MetadataView  # only with metadata: a check without needs none of it
    if not isinstance(md, MetadataView) or md.lookup is None:
        return out
    scope, ledger = ids[0][rows], ids[1][rows]
    asked = {(int(s), int(l)) for s, l in zip(scope.tolist(), ledger.tolist())}
    known = [p for p in sorted(asked) if LedgerId(*p) in md]
    out[rows] = ledger_set(known).contains([scope, ledger])
    return out


def _free_entries(ctx: CheckContext, inv, free: ChunkedArray, log_paths: dict, budget: int) -> Iterator[Finding]:
    """Entries in the logs no index points at: superseded copies and deleted ledgers' entries (garbage,
    counted), an indexed ledger's entry missing from its index, a ledger with no index at all."""
    files = inv.files
    named = files["named"]   # (columns picked, not whole rows copied: a bookie may hold millions of files)
    broken = named & ~files["header_ok"]
    indexed_ledgers = KeySet([files["scope"][named], files["ledger"][named]])
    broken_ledgers = KeySet([files["scope"][broken], files["ledger"][broken]])
    del named, broken
    facts = ctx.journal_facts
    pending = KeySet(facts.pending.ids())
    leftovers = ledger_set(ctx.relocation_leftovers)
    md = ctx.metadata if ctx.metadata is not None else {}   # a view with no ledger of its own still looks up
    in_md = ledger_set(md)
    keyed = ledger_set(facts.master_keys) if ctx.metadata is None else None
    superseded = _indexed(free, inv, budget, ctx.spill)
    garbage = 0
    garbage_ids: list[np.ndarray] = []
    unindexed: list[np.ndarray] = []
    for start, t in free.chunks(CHUNK):
        ids = [t["scope"], t["ledger"]]
        skip = broken_ledgers.contains(ids) | pending.contains(ids + [t["entry"]]) | leftovers.contains(ids)
        known = ~skip & indexed_ledgers.contains(ids)
        sup = superseded[start:start + len(t)]
        for j in np.flatnonzero(known & ~sup).tolist():
            log = int(t["log"][j])
            yield Finding(Code.ENTRY_NOT_INDEXED, scope=int(t["scope"][j]), ledger=int(t["ledger"][j]),
                          entry=int(t["entry"][j]), path=log_paths.get(log),
                          detail=f"log {log:x}.log position {unpack_location(int(t['key'][j]))[1]}")
        rest = ~skip & ~known
        has_md = in_md.contains(ids)
        has_md |= _looked_up(md, ids, rest & ~has_md)
        lost = rest & (has_md | (keyed.contains(ids) if keyed is not None else False))
        dead = (known & sup) | (rest & ~lost)   # a superseded copy; a ledger deleted since, awaiting compaction
        garbage += int(dead.sum())
        garbage_ids.append(t[["scope", "ledger"]][dead])
        unindexed.append(t[["scope", "ledger"]][lost])
    for (scope, ledger), n in _counts(unindexed):
        lid = LedgerId(scope, ledger)
        if inv.unlisted_folder_of(lid) is not None:
            continue   # its index may be in a folder that could not be listed (pass 2's FILE_UNREADABLE)
        if lid in md:
            yield Finding(Code.LEDGER_NOT_INDEXED, scope=scope, ledger=ledger, detail=f"{n} entries")
        else:
            # Without metadata a lost index and a ledger deleted by garbage collection look the same.
            yield Finding(Code.LEDGER_INDEX_MISSING, scope=scope, ledger=ledger, detail=f"{n} entries")
    if garbage:
        yield Finding(Code.GARBAGE_ENTRIES, detail=f"{garbage} entries of {_distinct(garbage_ids)} ledgers in the "
                                                     f"entry logs are not pointed at by any index")


def _runs(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows' distinct (scope, ledger) in ledger-id order, and rows of each."""
    a = np.concatenate(parts) if parts else np.zeros(0, [("scope", "<u8"), ("ledger", "<u8")])
    order = np.lexsort((a["ledger"], a["scope"]))
    s, l = a["scope"][order], a["ledger"][order]
    first = run_starts(s, l)
    return s[first], l[first], np.diff(np.append(first, len(a)))


def _distinct(parts: list[np.ndarray]) -> int:
    return len(_runs(parts)[0])


def _counts(parts: list[np.ndarray]) -> list[tuple[tuple[int, int], int]]:
    """((scope, ledger), rows) per distinct ledger of the rows, by ledger id."""
    s, l, n = _runs(parts)
    return list(zip(zip(s.tolist(), l.tolist()), n.tolist()))
