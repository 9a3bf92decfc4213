"""Pass 7: ledger metadata: orphan ledgers on disk, entries this bookie should hold but does not."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from bkdisk.bookie.layout import bookie_id_of
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entry_parts
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck import ensemble_placement as placement
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.entry_ranges import runs
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.held_entries import HeldEntries

if TYPE_CHECKING:
    from bkdisk.fsck.ensemble_placement import Placement
    from bkdisk.fsck.unseen_storage import Unseen

CHUNK = 1 << 20   # locations read at once
NEAR_BLOCK = 1 << 18   # near ledgers decided at once: their columns of the pass a block at a time


def held_entries(ctx: CheckContext) -> HeldEntries:
    """Entry ids this bookie's ledger storage holds, per ledger (index for .idx storage, else entry logs)."""
    held = HeldEntries()
    if ctx.dirs.storage_kind == "index-files":
        inv = ctx.index_inventory
        f = inv.files
        locs = inv.locations
        located = np.zeros(len(f), bool)
        for k0 in range(0, len(locs), CHUNK):   # a chunk at a time: the locations may be spilled
            c = locs[k0:k0 + CHUNK]
            fi = c["file"]
            located[fi] = True
            held.add(f["scope"][fi], f["ledger"][fi], c["entry"])
        # A ledger's index file that locates nothing still holds the ledger (one run more per ledger
        # for those that do would double a million ledgers' runs, each then counted the long way).
        empty = f["named"] & ~located
        held.add_ledgers(f["scope"][empty], f["ledger"][empty])
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


def run(ctx: CheckContext) -> Iterator[Finding]:
    md = ctx.metadata
    if md is None:
        yield Finding(Code.METADATA_SKIPPED, detail="pass 7 skipped: no ledger metadata given (--metadata-dir)",
                      extra={"skipped": "no ledger metadata given"})
        return
    # (imported here: a check without metadata loads none of the metadata formats)
    from bkdisk.bookie.metadata_dir import MetadataView

    held = held_entries(ctx)
    me = bookie_id_of(ctx.dirs)
    near = _near(md)
    at = near.positions(held.scope, held.ledger)   # each held ledger's row among the near ones, or -1
    # A view that can list the ledgers it has (a folder) tells the orphans at once; the others are asked
    # one by one. Only the ledgers held that are not near are asked about.
    far = np.flatnonzero(at < 0)
    known = None
    if isinstance(md, MetadataView) and len(far):
        known_far = md.known(held.scope[far], held.ledger[far])
        if known_far is not None:
            known = np.ones(len(held), bool)
            known[far] = known_far
    unloadable: set[LedgerId] = set()
    counts = held.counts()
    models = near.per_shape(lambda m: m)   # (a ledger of each shape, for what the shape alone decides)
    yield from _held_ledgers(md, near, models, held, counts, at, known, me, unloadable)
    if me is None:
        return
    from bkdisk.fsck.unseen_storage import unseen_ledgers
    unseen = unseen_ledgers(ctx)
    skipped: list[LedgerId] = []
    yield from _missing_entries(near, held, counts, at, me, unloadable, models, unseen, skipped)
    if skipped:   # (a ledger storage may hold where the check could not look: unknown, not missing)
        yield Finding(Code.ENTRIES_UNCHECKED, detail=f"found {len(skipped)} ledger{'s' if len(skipped) != 1 else ''} "
                      f"whose entries may be where {unseen.why if unseen else ''}: whether this bookie holds "
                      f"those it lacks is unknown (ledgers {', '.join(str(x) for x in skipped[:5])}"
                      f"{' ...' if len(skipped) > 5 else ''})",
                      extra={"ledgers": [str(x) for x in skipped]})


def _near(md):
    """The ledgers iterating ``md`` gives, as columns (bookie.near_ledgers)."""
    from bkdisk.bookie.metadata_dir import MetadataView
    from bkdisk.bookie.near_ledgers import NearLedgers
    got = md.near if isinstance(md, MetadataView) else md
    return got if isinstance(got, NearLedgers) else NearLedgers.of(got)


def _held_ledgers(md, near, models: list, held: HeldEntries, counts: np.ndarray, at: np.ndarray,
                  known: np.ndarray | None, me: str | None, unloadable: set[LedgerId]) -> Iterator[Finding]:
    """Each ledger held that metadata does not know (an orphan), that BookKeeper's client cannot load,
    or that is over-replicated here; a near ledger is told by its shape, without building its metadata."""
    from bkdisk.bookie.metadata_dir import over_replicated
    from bkdisk.formats.ledger_metadata import bookkeeper_refusal

    flagged = np.array([bookkeeper_refusal(m) is not None or (me is not None and over_replicated(m, me))
                        for m in models], bool)
    look = at < 0
    if len(flagged):
        look[~look] = flagged[near.shape[at[~look]]]
    orphan_details: dict[int, str] = {}
    for i in np.flatnonzero(look).tolist():
        scope, ledger, n = int(held.scope[i]), int(held.ledger[i]), int(counts[i])
        if at[i] >= 0:
            m = near.metadata(int(at[i]))
        else:
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


def _whole_span(m, me: str) -> tuple[int, int] | None:
    """Where the entries ``m`` places all on ``me`` begin (its first ensemble's first entry), and the
    entry they run to at least (the one before its last ensemble's first: an ensemble change follows
    entries written), when it places every entry from there on ``me`` (``me`` in every ensemble, the
    write quorum the whole ensemble) and BookKeeper's client loads it; else None."""
    from bkdisk.formats.ledger_metadata import bookkeeper_refusal
    if bookkeeper_refusal(m) is not None or not all(me in e and m.write_quorum >= len(e) for _f, e in m.ensembles):
        return None
    if m.ensembles[0][0] < 0:   # (no entry id is negative: and a span from -2^63 overflows int64)
        return None
    return m.ensembles[0][0], m.ensembles[-1][0] - 1


def _missing_entries(near, held: HeldEntries, counts: np.ndarray, at: np.ndarray, me: str,
                     unloadable: set[LedgerId], models: list | None = None, unseen: Unseen | None = None,
                     skipped: list[LedgerId] | None = None) -> Iterator[Finding]:
    """Each near ledger's entries this bookie should hold and does not, in ledger order, decided a block
    of NEAR_BLOCK near ledgers at a time. A ledger whose every entry is placed here and whose held ids
    are exactly its range is passed over without a step of its own (the ids' count and bounds say so);
    the others are counted (``_missing_counts``), and only those missing some are compared entry by entry."""
    from bkdisk.formats.ledger_metadata import bookkeeper_refusal

    n = len(near)
    row = np.full(n, -1, np.int64)   # each near ledger's row among the held ones, or -1
    row[at[at >= 0]] = np.flatnonzero(at >= 0)
    models = near.per_shape(lambda m: m) if models is None else models
    shapes = _Shapes(models, me)
    lo, hi = held.bounds()
    for r0 in range(0, n, NEAR_BLOCK):
        r1 = min(n, r0 + NEAR_BLOCK)
        done, missing_count = _decided(near, held, counts, row, lo, hi, shapes, r0, r1)
        for r in (np.flatnonzero(~done) + r0).tolist():
            lid, m = LedgerId(int(near.scope[r]), int(near.ledger[r])), near.metadata(r)
            if lid in unloadable:
                continue
            if unseen is not None and skipped is not None and unseen.has(lid):
                skipped.append(lid)
                continue
            if (why := bookkeeper_refusal(m)) is not None:
                yield Finding(Code.METADATA_UNLOADABLE, scope=lid.scope, ledger=lid.ledger, detail=why)
                continue
            yield from _compared(lid, m, held, int(row[r]), int(missing_count[r - r0]), me)


class _Shapes:
    """What pass 7 decides once per shape (fsck/ensemble_placement's Placement made when first asked)."""

    def __init__(self, models: list, me: str):
        spans = [_whole_span(m, me) for m in models]
        self.models, self.me = models, me
        self.closed = np.array([m.state == "CLOSED" for m in models], bool)
        self.whole = np.array([s is not None for s in spans], bool)
        self.start = np.array([s[0] if s is not None else 0 for s in spans], np.int64)
        self.at_least = np.array([s[1] if s is not None else 0 for s in spans], np.int64)
        self._placement: Placement | None = None

    def placement(self) -> Placement:
        from bkdisk.fsck.ensemble_placement import Placement
        if self._placement is None:
            self._placement = Placement.of(self.models, self.me)
        return self._placement


def _decided(near, held: HeldEntries, counts: np.ndarray, row: np.ndarray, lo: np.ndarray, hi: np.ndarray,
             shapes: _Shapes, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    """Of near ledgers ``r0:r1``: which need no comparison (``done``), and how many entries each misses
    where counted (-1 where not)."""
    row = row[r0:r1]
    k, h, has = near.shape[r0:r1], np.maximum(row, 0), row >= 0
    if len(held):
        last = np.maximum(np.where(shapes.closed[k], near.last[r0:r1], np.where(has, hi[h], -1)), shapes.at_least[k])
        start = shapes.start[k]
        none = last < start   # (not ``want == 0``: ``want`` wraps for a last entry id near 2^63)
        want = last - start + 1
        exact = has & (counts[h] == want) & (lo[h] >= start) & (hi[h] <= last)
        done = shapes.whole[k] & (none | exact)
        del last, start, none, want, exact
    else:
        done = np.zeros(r1 - r0, bool)
    missing_count = _missing_counts(near, shapes, held, row, hi, r0, ~done)
    done |= missing_count == 0
    return done, missing_count


def _compared(lid: LedgerId, m, held: HeldEntries, i: int, count: int, me: str) -> Iterator[Finding]:
    """The findings of one near ledger compared id by id (``i``: its row among the held, or -1; ``count``:
    its missing entries where counted, else -1)."""
    have = held.ids(i) if i >= 0 else np.zeros(0, np.int64)
    # An open or recovering ledger's end is not in its metadata: check up to the last entry held.
    last_entry = m.last_entry_id if m.state == "CLOSED" else int(have[-1]) if len(have) else -1
    missing, all_listed = placement.missing_listed(m, me, last_entry, have)
    if len(missing) == 0:
        return
    if not all_listed:   # (the first of them listed, and how many there are where they were counted)
        said = f"{count} entries" if count >= 0 else f"more than {len(missing)} entries"
        shown = _ranges(missing)
        yield Finding(Code.ENTRIES_MISSING, scope=lid.scope, ledger=lid.ledger,
                      detail=f"{said} ({shown if shown.endswith('...') else shown + ' ...'})",
                      extra={"entries": missing.tolist(), "count": count if count >= 0 else None})
    elif len(missing) > 20:
        yield Finding(Code.ENTRIES_MISSING, scope=lid.scope, ledger=lid.ledger,
                      detail=f"{len(missing)} entries ({_ranges(missing)})", extra={"entries": missing.tolist()})
    else:
        for e in missing.tolist():
            yield Finding(Code.ENTRY_MISSING, scope=lid.scope, ledger=lid.ledger, entry=e)


def _missing_counts(near, shapes: _Shapes, held: HeldEntries, row: np.ndarray, hi: np.ndarray, r0: int,
                    undecided: np.ndarray) -> np.ndarray:
    """Of the ``undecided`` near ledgers of a block from ``r0`` (a mask; ``row``: the block's held rows),
    how many entries placed on this bookie each misses, told by counting what their segments place here
    and how much of it is held (fsck.ensemble_placement): striped ensembles, ensemble changes, open
    ledgers; -1 for a ledger not counted (its ensembles out of order or from a negative entry id, a last
    entry past LAST_COUNTED, refused by BookKeeper's client). Only a ledger missing some (or not counted)
    is compared id by id."""
    from bkdisk.fsck.ensemble_placement import LAST_COUNTED
    out = np.full(len(undecided), -1, np.int64)
    rows = np.flatnonzero(undecided)
    if not len(rows):
        return out
    placement = shapes.placement()
    k, held_row = near.shape[rows + r0], row[rows]
    # (the last entry as the comparison takes it: a closed ledger's own, else the last one held, or -1)
    last = np.full(len(rows), -1, np.int64)
    some = np.flatnonzero(held_row >= 0)
    last[some] = hi[held_row[some]]
    last = np.where(shapes.closed[k], near.last[rows + r0], last)
    ok = placement.counted[k] & (last < LAST_COUNTED)
    rows, k, held_row, last = rows[ok], k[ok], held_row[ok], last[ok]
    got = np.zeros(len(rows), np.int64)
    some = np.flatnonzero(held_row >= 0)
    taken = 0
    for group in held.batches(held_row[some]):
        pos = some[taken:taken + len(group)]
        taken += len(group)
        ids, cuts = held.gathered(group)
        got[pos] = placement.held(ids, cuts, k[pos], last[pos])
    out[rows] = placement.wanted(k, last) - got
    return out


def _ranges(a: np.ndarray) -> str:
    """The first ten runs of the ids in ``a`` (sorted, distinct)."""
    parts = runs(a.tolist())
    return ", ".join(parts[:10]) + (" ..." if len(parts) > 10 else "")
