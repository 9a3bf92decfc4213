"""The entries a bookie's index points at that no entry log holds: lost on this bookie, to come back
from the other bookies (``recover``), never to be dropped by a rebuild that would make the bookie deny
them. Of a ledger its metadata says is closed, only those up to its last entry: past it no entry is
the ledger's (no reader asks for one), whatever a slot of the index says."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from bkdisk.diskio.distinct import distinct, members
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entry_parts
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.entry_ranges import ranges
from bkdisk.fsck.findings import Finding

_POINTING_ELSEWHERE = (Code.DBINDEX_LOCATION_WRONG, Code.DBINDEX_LOCATION_MISSING_LOG)
# What the bookie answers for lost entries, as the plan leaves them.
KEPT = "the index keeps pointing where it pointed (reads fail, never 'no such entry')"
DROPPED = "the rebuilt index drops them: this bookie answers 'no such entry' for them until they are recovered"
UNINDEXED = ("its metadata places them on this bookie and no index points at them: it answers 'no such entry' for "
             "them until they are recovered")


def within_closed(ctx: CheckContext, lid: LedgerId, gone: np.ndarray) -> tuple[np.ndarray, list[int], int | None]:
    """(the entries of ``gone`` that are the ledger's, those past its closed last entry, that entry or None)."""
    m = ctx.metadata.get(lid) if ctx.metadata is not None else None
    if m is None or m.state != "CLOSED":
        return gone, [], None
    last = int(m.last_entry_id)
    return gone[gone <= last], gone[gone > last].tolist(), last


def placed_in_no_log(ctx: CheckContext, lid: LedgerId, have: np.ndarray, pointed: np.ndarray) -> list[int]:
    """The entries a closed ledger's metadata places on this bookie that a rebuild keeping the entry ids
    ``have`` (sorted) will not have, that the current index does not point at (``pointed``: those are the
    rebuild's to keep or drop) and that no restart replays from the journal: lost here, whatever the plan."""
    from bkdisk.bookie.layout import bookie_id_of
    from bkdisk.fsck.ensemble_placement import missing_listed
    m = ctx.metadata.get(lid) if ctx.metadata is not None else None
    me = bookie_id_of(ctx.dirs)
    if m is None or m.state != "CLOSED" or me is None:
        return []
    missing, _whole = missing_listed(m, me, int(m.last_entry_id), have)
    pend = ctx.journal_facts.pending.rows
    replayed = pend["entry"][(pend["scope"] == lid.scope) & (pend["ledger"] == lid.ledger)]
    return missing[~members(missing, distinct(np.concatenate([pointed, replayed]).astype(np.int64)))].tolist()


def dropped_past_close(past: list[int], last: int | None) -> str:
    """What a rebuild drops past a closed ledger's last entry, for its plan line ('' for nothing)."""
    return f"; the slots of entries {ranges(past)}, past its last entry {last} (closed), are dropped" if past else ""


def db_lost_entries(ctx: CheckContext, findings: Iterable[Finding]) -> dict[LedgerId, list[int]]:
    """DbLedgerStorage: the entries whose location points where they are not (DBINDEX_LOCATION_WRONG),
    or into a log that is gone (DBINDEX_LOCATION_MISSING_LOG), and of which no entry log holds a copy:
    BookKeeper's rebuild of the locations database keeps only what the logs hold, so it would make the
    bookie deny these."""
    wanted: dict[LedgerId, set[int]] = {}
    for f in findings:
        if f.code in _POINTING_ELSEWHERE and f.ledger is not None and f.entry is not None:
            wanted.setdefault(f.lid, set()).add(f.entry)
    if not wanted:
        return {}
    ledgers = np.array(sorted({lid.ledger for lid in wanted}), np.uint64)
    held: set[tuple[int, int, int]] = set()
    for scan in ctx.log_scans.values():
        if not isinstance(scan, EntryLogArrays):
            continue
        for _lo, e in entry_parts(scan):
            for i in np.flatnonzero(members(e["ledger"], ledgers)).tolist():
                held.add((int(e["scope"][i]), int(e["ledger"][i]), int(e["entry"][i])))
    out: dict[LedgerId, list[int]] = {}
    for lid, entries in sorted(wanted.items()):
        gone = np.array(sorted(x for x in entries if (lid.scope, lid.ledger, x) not in held), np.int64)
        mine, _past, _last = within_closed(ctx, lid, gone)
        if len(mine):
            out[lid] = mine.tolist()
    return out
