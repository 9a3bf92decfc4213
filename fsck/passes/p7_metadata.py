"""Pass 7: ledger metadata: orphan ledgers on disk, entries this bookie should hold but does not."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bkdisk.bookie.layout import bookie_id_of
from bkdisk.diskio.distinct import distinct, run_starts
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entry_parts
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.entry_ranges import runs
from bkdisk.fsck.findings import Finding

CHUNK = 1 << 20   # locations read at once


def held_entries(ctx: CheckContext) -> dict[LedgerId, np.ndarray]:
    """Entry ids this bookie's ledger storage holds, per ledger (index for .idx storage, else entry logs)."""
    out: dict[LedgerId, list[np.ndarray]] = {}
    if ctx.dirs.storage_kind == "index-files":
        inv = ctx.index_inventory
        f = inv.files
        for i in range(len(f)):
            if f["named"][i]:
                out.setdefault(LedgerId(int(f["scope"][i]), int(f["ledger"][i])), [])
        locs = inv.locations
        # The walk gives each file's locations together, in file order: one slice per run of a file,
        # a chunk at a time (the locations may be spilled), instead of a scan of them all per ledger.
        for k0 in range(0, len(locs), CHUNK):
            c = locs[k0:k0 + CHUNK]
            fi = c["file"]
            starts = np.flatnonzero(np.concatenate([[True], fi[1:] != fi[:-1]]))
            ends = np.append(starts[1:], len(c))
            ids = c["entry"].copy()   # (a view would keep the chunk's every column alive: it may be read back)
            for i, a, b in zip(fi[starts].tolist(), starts.tolist(), ends.tolist()):
                lid = LedgerId(int(f["scope"][i]), int(f["ledger"][i]))
                out.setdefault(lid, []).append(ids[a:b])
    else:
        for s in ctx.log_scans.values():
            if not isinstance(s, EntryLogArrays):
                continue
            for _lo, e in entry_parts(s):
                _add_per_ledger(out, e["scope"], e["ledger"], e["entry"])
    # Entries after lastMark are only in the journal until a restart replays them into storage.
    r = ctx.journal_facts.pending.rows
    _add_per_ledger(out, r["scope"], r["ledger"], r["entry"])
    held: dict[LedgerId, np.ndarray] = {}
    for k in list(out):   # one ledger's parts at a time become its sorted ids, and are dropped
        v = out.pop(k)
        held[k] = distinct(np.concatenate(v)) if v else np.zeros(0, np.int64)
    return held


def _add_per_ledger(out: dict[LedgerId, list[np.ndarray]], scope: np.ndarray, ledger: np.ndarray,
                    entry: np.ndarray) -> None:
    """Add each ledger's entry ids among these rows to ``out``: one sort, then a slice per ledger (a
    log may interleave hundreds of thousands of ledgers: a mask per ledger costs rows x ledgers)."""
    if not len(entry):
        return
    order = np.lexsort((ledger, scope))
    scope, ledger, entry = scope[order], ledger[order], entry[order]
    cuts = run_starts(scope, ledger)[1:].tolist()
    for a, b in zip([0, *cuts], [*cuts, len(entry)]):
        out.setdefault(LedgerId(int(scope[a]), int(ledger[a])), []).append(entry[a:b])


def expected_entries(md, me: str, last_entry: int) -> np.ndarray:
    """Entry ids 0..last_entry that the ensembles place on bookie ``me`` (round-robin write sets)."""
    out = []
    segs = list(md.ensembles)
    for k, (first, members) in enumerate(segs):
        end = segs[k + 1][0] - 1 if k + 1 < len(segs) else last_entry
        if end < first or me not in members:
            continue
        E, Qw = len(members), md.write_quorum
        b = members.index(me)
        e = np.arange(first, end + 1, dtype=np.int64)
        out.append(e[((b - e) % E) < Qw])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def run(ctx: CheckContext) -> Iterator[Finding]:
    md = ctx.metadata
    if md is None:
        yield Finding(Code.METADATA_SKIPPED, detail="pass 7 skipped: no ledger metadata given (--metadata-dir)",
                      extra={"skipped": "no ledger metadata given"})
        return
    # (imported here: a check without metadata loads none of the metadata formats)
    from bkdisk.bookie.metadata_dir import over_replicated
    from bkdisk.formats.ledger_metadata import bookkeeper_refusal

    held = held_entries(ctx)
    me = bookie_id_of(ctx.dirs)
    # Metadata BookKeeper's client refuses to build: no reader of the ledger gets past opening it, and
    # what it says of ensembles and quorums places no entry for sure.
    unloadable: set[LedgerId] = set()
    for lid in sorted(held):   # looked up one by one: md may be a view
        m = md.get(lid)
        if m is None:
            yield Finding(Code.ORPHAN_LEDGER, scope=lid.scope, ledger=lid.ledger,
                          detail=f"{len(held[lid])} entries; deleted from metadata, or metadata incomplete")
        elif (why := bookkeeper_refusal(m)) is not None:
            unloadable.add(lid)
            yield Finding(Code.METADATA_UNLOADABLE, scope=lid.scope, ledger=lid.ledger, detail=why)
        elif me is not None and over_replicated(m, me):
            yield Finding(Code.LEDGER_OVER_REPLICATED, scope=lid.scope, ledger=lid.ledger,
                          detail=f"{len(held[lid])} entries; garbage: the collector's over-replicated check "
                                 f"(gcOverreplicatedLedgerWaitTime > 0, a day by default) removes them")
    if me is None:
        return
    for lid, m in sorted(md.items()):
        if lid in unloadable:
            continue
        if (why := bookkeeper_refusal(m)) is not None:
            yield Finding(Code.METADATA_UNLOADABLE, scope=lid.scope, ledger=lid.ledger, detail=why)
            continue
        if m.state == "CLOSED":
            last = m.last_entry_id
        else:
            # An open or recovering ledger's end is not in its metadata: check up to the last entry held.
            h = held.get(lid)
            last = int(h[-1]) if h is not None and len(h) else -1
        want = expected_entries(m, me, last)
        have = held.get(lid, np.zeros(0, np.int64))
        missing = np.setdiff1d(want, have)
        if len(missing) == 0:
            continue
        if len(missing) > 20:
            yield Finding(Code.ENTRIES_MISSING, scope=lid.scope, ledger=lid.ledger,
                          detail=f"{len(missing)} entries ({_ranges(missing)})",
                          extra={"entries": missing.tolist()})
        else:
            for e in missing.tolist():
                yield Finding(Code.ENTRY_MISSING, scope=lid.scope, ledger=lid.ledger, entry=e)


def _ranges(a: np.ndarray) -> str:
    """The first ten runs of the ids in ``a`` (sorted, distinct)."""
    parts = runs(a.tolist())
    return ", ".join(parts[:10]) + (" ..." if len(parts) > 10 else "")
