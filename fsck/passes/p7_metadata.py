"""Pass 7: ledger metadata: orphan ledgers on disk, entries this bookie should hold but does not."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bkdisk.bookie.layout import bookie_id_of
from bkdisk.diskio.distinct import members
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entry_parts
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.entry_ranges import runs
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.held_entries import HeldEntries

CHUNK = 1 << 20   # locations read at once


def held_entries(ctx: CheckContext) -> HeldEntries:
    """Entry ids this bookie's ledger storage holds, per ledger (index for .idx storage, else entry logs)."""
    held = HeldEntries()
    if ctx.dirs.storage_kind == "index-files":
        inv = ctx.index_inventory
        f = inv.files
        named = f["named"]
        held.add_ledgers(f["scope"][named], f["ledger"][named])
        locs = inv.locations
        for k0 in range(0, len(locs), CHUNK):   # a chunk at a time: the locations may be spilled
            c = locs[k0:k0 + CHUNK]
            fi = c["file"]
            held.add(f["scope"][fi], f["ledger"][fi], c["entry"])
    else:
        for s in ctx.log_scans.values():
            if not isinstance(s, EntryLogArrays):
                continue
            for _lo, e in entry_parts(s):
                held.add(e["scope"], e["ledger"], e["entry"])
    # Entries after lastMark are only in the journal until a restart replays them into storage.
    r = ctx.journal_facts.pending.rows
    held.add(r["scope"], r["ledger"], r["entry"])
    return held.finish()


def expected_entries(md, me: str, last_entry: int) -> np.ndarray:
    """Entry ids 0..last_entry that the ensembles place on bookie ``me`` (round-robin write sets)."""
    out = []
    segs = list(md.ensembles)
    for k, (first, ensemble) in enumerate(segs):
        end = segs[k + 1][0] - 1 if k + 1 < len(segs) else last_entry
        if end < first or me not in ensemble:
            continue
        E, Qw = len(ensemble), md.write_quorum
        b = ensemble.index(me)
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
    from bkdisk.bookie.metadata_dir import MetadataView, over_replicated
    from bkdisk.formats.ledger_metadata import bookkeeper_refusal

    held = held_entries(ctx)
    counts = held.counts()
    me = bookie_id_of(ctx.dirs)
    # Metadata BookKeeper's client refuses to build: no reader of the ledger gets past opening it, and
    # what it says of ensembles and quorums places no entry for sure.
    unloadable: set[LedgerId] = set()
    # A view that can list the ledgers it has (a folder) tells the orphans at once; the others are asked one by one.
    known = md.known(held.scope, held.ledger) if isinstance(md, MetadataView) else None
    orphan_details: dict[int, str] = {}
    for i, (scope, ledger, n) in enumerate(zip(held.scope.tolist(), held.ledger.tolist(), counts.tolist())):
        m = None if known is not None and not known[i] else md.get(LedgerId(scope, ledger))
        if m is None:
            detail = orphan_details.get(n)   # (one string per count, not per ledger: a million orphans share a few)
            if detail is None:
                detail = orphan_details[n] = f"{n} entries; deleted from metadata, or metadata incomplete"
            yield Finding(Code.ORPHAN_LEDGER, scope=scope, ledger=ledger, detail=detail)
        elif (why := bookkeeper_refusal(m)) is not None:
            unloadable.add(LedgerId(scope, ledger))
            yield Finding(Code.METADATA_UNLOADABLE, scope=scope, ledger=ledger, detail=why)
        elif me is not None and over_replicated(m, me):
            yield Finding(Code.LEDGER_OVER_REPLICATED, scope=scope, ledger=ledger,
                          detail=f"{n} entries; garbage: the collector's over-replicated check "
                                 f"(gcOverreplicatedLedgerWaitTime > 0, a day by default) removes them")
    if me is None:
        return
    for lid, m in sorted(md.items()):
        if lid in unloadable:
            continue
        if (why := bookkeeper_refusal(m)) is not None:
            yield Finding(Code.METADATA_UNLOADABLE, scope=lid.scope, ledger=lid.ledger, detail=why)
            continue
        i = held.find(lid)
        have = held.ids(i) if i >= 0 else np.zeros(0, np.int64)
        # An open or recovering ledger's end is not in its metadata: check up to the last entry held.
        last = m.last_entry_id if m.state == "CLOSED" else int(have[-1]) if len(have) else -1
        want = expected_entries(m, me, last)
        missing = want[~members(want, have)]   # (both sorted and distinct)
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
