"""Ledgers whose entries ledger storage may hold where the check could not look: an index file that
could not be read or a folder on its path that could not be listed (index files); an entry log that
could not be read, or a ledger dir that could not be listed, that the locations of DbLedgerStorage
point into. Whether this bookie holds their entries is unknown, not "none": the files or folders are
reported where they failed, and what they hide is not called missing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bkdisk.diskio.distinct import distinct, members
from bkdisk.diskio.failures import LIST
from bkdisk.diskio.mapped import DiskError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, parse_index_name
from bkdisk.fsck.context import CheckContext

if TYPE_CHECKING:
    from bkdisk.indexfiles.arrays import IndexInventory


@dataclass
class Unseen:
    why: str                                    # what could not be read, for the report
    ledgers: set[LedgerId] = field(default_factory=set)
    everything: bool = False                    # which ledgers the unread part held is itself unknown
    inventory: IndexInventory | None = None     # index files: asked per ledger for a folder not listed

    def has(self, lid: LedgerId) -> bool:
        if self.everything or lid in self.ledgers:
            return True
        return self.inventory is not None and self.inventory.unlisted_folder_of(lid) is not None


def unseen_ledgers(ctx: CheckContext) -> Unseen | None:
    """What ledger storage could not show this check, or None when it showed everything."""
    if ctx.dirs.storage_kind == "index-files":
        return _index_files(ctx)
    return _locations(ctx)


def _index_files(ctx: CheckContext) -> Unseen | None:
    inv = ctx.index_inventory
    failed = inv.io_failures
    if not failed:
        return None
    ledgers = {lid for f in failed if f.op != LIST and (lid := parse_index_name(os.path.basename(f.path)))}
    listed = any(f.op == LIST for f in failed)
    where = ", ".join(sorted({f.path for f in failed})[:3]) + (" ..." if len(failed) > 3 else "")
    return Unseen(f"index files or folders could not be read ({where})", ledgers,
                  inventory=inv if listed else None)


def _locations(ctx: CheckContext) -> Unseen | None:
    """DbLedgerStorage: the ledgers whose locations point into logs the check could not read."""
    dirs = ctx.dirs.ledger_dirs
    unlisted = {i for i, d in enumerate(dirs) if ctx.not_listed(d)}
    failed: dict[int, list[int]] = {}
    for lf in ctx.log_files:
        if isinstance(ctx.log_scans.get(lf.path), DiskError):
            failed.setdefault(lf.dir_index, []).append(lf.log_id)
    if not unlisted and not failed:
        return None
    why = ", ".join([f"{os.path.join(dirs[i], CURRENT_DIR)} could not be listed" for i in sorted(unlisted)] +
                    [f"{len(ids)} entry log{'s' if len(ids) != 1 else ''} in {dirs[i]} could not be read"
                     for i, ids in sorted(failed.items())])
    from bkdisk.fsck import dbindex
    out = Unseen(why)
    for di, _current, idx in dbindex.read(ctx):
        if not dbindex.is_index(idx):
            out.everything |= di in unlisted   # (neither its logs nor its locations seen)
            continue
        if di in unlisted:
            out.ledgers |= {LedgerId(0, x) for x in idx.ledger_ids.view(np.uint64).tolist()}
        elif di in failed:
            bad = distinct(np.array(failed[di], np.int64))
            for c in idx.location_chunks():
                hit = c["ledger"][members(c["log"], bad)]
                out.ledgers |= {LedgerId(0, x) for x in distinct(hit).view(np.uint64).tolist()}
    return out
