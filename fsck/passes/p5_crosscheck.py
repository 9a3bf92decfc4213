"""Pass 5: cross-check: each index location points at an entry of that (scope, ledger, entry);
entries that no index points at are superseded copies or garbage, or unindexed data (an error)."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterator

import numpy as np

from entrylogs.arrays import EntryLogArrays
from formats.ids import LedgerId
from formats.index import slot_offset
from fsck.codes import ENTRY_NOT_INDEXED, GARBAGE_ENTRIES, INDEX_LOCATION_WRONG, LEDGER_INDEX_MISSING, LEDGER_NOT_INDEXED
from fsck.context import CheckContext
from fsck.findings import Finding


def log_table(ctx: CheckContext) -> dict[str, np.ndarray]:
    """All entries of all logs, keyed by location ((log id << 32) | position of the entry bytes)."""
    keys, scope, ledger, entry, logi = [], [], [], [], []
    for lf in ctx.log_files:
        scan = ctx.log_scans.get(lf.path)
        if not isinstance(scan, EntryLogArrays) or len(scan.entries) == 0:
            continue
        e = scan.entries
        keys.append((np.uint64(lf.log_id) << np.uint64(32)) | (e["offset"] + 4).astype(np.uint64))
        scope.append(e["scope"])
        ledger.append(e["ledger"])
        entry.append(e["entry"])
        logi.append(np.full(len(e), lf.log_id, dtype=np.int64))
    if not keys:
        z = np.zeros(0, np.uint64)
        return {"key": z, "scope": z, "ledger": z, "entry": np.zeros(0, np.int64), "log": np.zeros(0, np.int64)}
    t = {"key": np.concatenate(keys), "scope": np.concatenate(scope), "ledger": np.concatenate(ledger),
         "entry": np.concatenate(entry), "log": np.concatenate(logi)}
    order = np.argsort(t["key"], kind="stable")
    return {k: v[order] for k, v in t.items()}


def run(ctx: CheckContext) -> Iterator[Finding]:
    inv = ctx.index_inventory
    t = log_table(ctx)
    locs = inv.locations
    files = inv.files
    lkey = (locs["log"].astype(np.uint64) << np.uint64(32)) | locs["pos"].astype(np.uint64)
    lscope = files["scope"][locs["file"]] if len(locs) else np.zeros(0, np.uint64)
    lledger = files["ledger"][locs["file"]] if len(locs) else np.zeros(0, np.uint64)
    n = len(t["key"])
    w = np.searchsorted(t["key"], lkey)
    wc = np.minimum(w, max(n - 1, 0))
    hit = (n > 0) & (t["key"][wc] == lkey) if n else np.zeros(len(locs), bool)
    # With no entry in any log nothing is the same (and there is nothing to index into).
    same = (hit & (t["scope"][wc] == lscope) & (t["ledger"][wc] == lledger) & (t["entry"][wc] == locs["entry"])
            if n else np.zeros(len(locs), bool))
    # Only logs that were scanned can be judged; pass 3 reports missing logs, pass 4 unreadable ones.
    # A location past the end of its log is pass 3's INDEX_LOCATION_OUT_OF_RANGE: reported once, there.
    scanned = {lf.log_id: ctx.log_scans[lf.path].size for lf in ctx.log_files
               if isinstance(ctx.log_scans.get(lf.path), EntryLogArrays)}
    for k in np.flatnonzero(~same).tolist():
        loc = locs[k]
        if int(loc["log"]) not in scanned or int(loc["pos"]) >= scanned[int(loc["log"])]:
            continue
        f = int(loc["file"])
        where = f"log {int(loc['log']):x}.log position {int(loc['pos'])}"
        if hit[k]:
            j = wc[k]
            found = f"ledger {LedgerId(int(t['scope'][j]), int(t['ledger'][j]))} entry {int(t['entry'][j])}"
        else:
            found = "no entry starting there"
        yield Finding(INDEX_LOCATION_WRONG, path=inv.paths[f], offset=slot_offset(int(loc["entry"])),
                      scope=int(files["scope"][f]), ledger=int(files["ledger"][f]), entry=int(loc["entry"]),
                      detail=f"{where}, found {found}")
    # Entries in the logs no index points at.
    pointed = np.zeros(n, dtype=bool)
    pointed[wc[same]] = True
    free = np.flatnonzero(~pointed)
    if len(free) == 0:
        return
    indexed_ledgers = {LedgerId(int(r["scope"]), int(r["ledger"])) for r in files[files["named"]]}
    broken = {LedgerId(int(r["scope"]), int(r["ledger"])) for r in files[files["named"] & ~files["header_ok"]]}
    indexed_entries = set(zip(lscope.tolist(), lledger.tolist(), locs["entry"].tolist()))
    facts = ctx.journal_facts
    pending = {(lid, e) for _p, _o, lid, e in facts.pending}
    md = ctx.metadata if ctx.metadata is not None else {}   # a view with no ledger of its own still looks up
    log_paths = {lf.log_id: lf.path for lf in ctx.log_files}
    unindexed_ledgers: dict[LedgerId, list[int]] = defaultdict(list)
    garbage = 0
    garbage_ledgers = set()
    for j in free.tolist():
        lid = LedgerId(int(t["scope"][j]), int(t["ledger"][j]))
        e = int(t["entry"][j])
        if lid in broken or (lid, e) in pending or lid in ctx.relocation_leftovers:
            continue
        if lid in indexed_ledgers:
            if (lid.scope, lid.ledger, e) in indexed_entries:
                garbage += 1          # a superseded copy of an indexed entry
                garbage_ledgers.add(lid)
            else:
                yield Finding(ENTRY_NOT_INDEXED, scope=lid.scope, ledger=lid.ledger, entry=e,
                              path=log_paths.get(int(t["log"][j])),
                              detail=f"log {int(t['log'][j]):x}.log position {int(t['key'][j]) & 0xFFFFFFFF}")
        elif lid in md or (ctx.metadata is None and lid in facts.master_keys):
            unindexed_ledgers[lid].append(e)
        else:
            garbage += 1          # a ledger deleted since (metadata no longer has it), awaiting compaction
            garbage_ledgers.add(lid)
    for lid, ents in sorted(unindexed_ledgers.items()):
        if inv.unlisted_folder_of(lid) is not None:
            continue   # its index may be in a folder that could not be listed (pass 2's FILE_UNREADABLE)
        if lid in md:
            yield Finding(LEDGER_NOT_INDEXED, scope=lid.scope, ledger=lid.ledger, detail=f"{len(ents)} entries")
        else:
            # Without metadata a lost index and a ledger deleted by garbage collection look the same.
            yield Finding(LEDGER_INDEX_MISSING, scope=lid.scope, ledger=lid.ledger, detail=f"{len(ents)} entries")
    if garbage:
        yield Finding(GARBAGE_ENTRIES, detail=f"{garbage} entries of {len(garbage_ledgers)} ledgers in the entry "
                                                f"logs are not pointed at by any index")
