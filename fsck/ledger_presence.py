"""Whether a checked bookie knows a ledger at all: a file, entry or record of it on disk, or its
metadata. `bookie-fsck --ledger-id` says so when it does not, instead of a clean report that reads as
"that ledger is fine here"."""
from __future__ import annotations

import numpy as np

from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entry_parts
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import RecordKind
from bkdisk.fsck.context import CheckContext
from bkdisk.journal.arrays import JournalArrays

# Journal records that name no ledger (a padding record's ledger field is zero).
_NO_LEDGER = (int(RecordKind.PADDING), int(RecordKind.UNKNOWN_META))


def on_disk(ctx: CheckContext, lid: LedgerId) -> bool:
    """Any trace of ``lid`` in what the check read: an index file named for it (index-file storage), an
    entry in an entry log, a record in a journal."""
    if ctx.dirs.storage_kind == "index-files":
        f = ctx.index_inventory.files
        if np.any((f["scope"] == lid.scope) & (f["ledger"] == lid.ledger)):
            return True
    for s in ctx.log_scans.values():
        if isinstance(s, EntryLogArrays):
            for _lo, e in entry_parts(s):
                if np.any((e["scope"] == lid.scope) & (e["ledger"] == lid.ledger)):
                    return True
    for j in ctx.journal_scans.values():
        if isinstance(j, JournalArrays):
            r = j.records
            if np.any((r["scope"] == lid.scope) & (r["ledger"] == lid.ledger) & ~np.isin(r["kind"], _NO_LEDGER)):
                return True
    return False


def unknown_ledger_line(ctx: CheckContext, lid: LedgerId) -> str | None:
    """The line to say when the bookie holds nothing of ``lid`` and the metadata (when given) does not
    name it either; None when either knows it."""
    md = ctx.metadata
    if (md is not None and lid in md) or on_disk(ctx, lid):
        return None
    if md is None:
        return f"ledger {lid} is not on this bookie (and no ledger metadata was given): nothing to check"
    return f"ledger {lid} is neither on this bookie nor in the ledger metadata: nothing to check"
