"""What a restart does with an entry after lastMark that ledger storage does not hold yet.

BookieImpl's replay adds a journal entry through the ledger's handle, made with the key a ledger-key
record replayed before it gave (its masterKeyCache) or, failing that, the key storage holds
(readMasterKey). When storage knows no such ledger (no index file; not in DbLedgerStorage's ledgers
index) and no ledger-key record after lastMark gives its key, readMasterKey throws NoLedgerException
and the replay skips the entry, taking the ledger as deleted: a ledger its metadata still lists loses
the entry.
"""
from __future__ import annotations

import os

import numpy as np

from bkdisk.diskio.distinct import members
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR
from bkdisk.fsck.context import CheckContext


def entries_replay_skips(ctx: CheckContext, told: list[tuple[str, int, LedgerId, int]]) -> set[tuple[str, int]] | None:
    """Of the entries ``told`` (journal path, record offset, ledger, entry id) after lastMark, where those
    a restart's replay skips lie; None when the check cannot tell (a folder not listed, an index that
    could not be read). The replay reads the journal dirs in turn, each journal's records in order: an
    entry is keyed by a ledger-key record before it, else by what storage holds."""
    if ctx.unlisted or ctx.dirs.storage_kind not in ("index-files", "rocksdb"):
        return None
    keyed_at = ctx.journal_facts.replayed_key_at
    order = {jf.path: (jf.dir_index, jf.journal_id) for jf in ctx.journal_files}

    def keyed_before(path: str, offset: int, lid: LedgerId) -> bool:
        first = keyed_at.get(lid)   # (the first key's first record: the ledger's first key record replayed)
        return first is not None and (order[first[0][0]], first[0][1]) < (order[path], offset)

    unkeyed = [(p, o, lid) for p, o, lid, _e in told if not keyed_before(p, o, lid)]
    asked = {lid for _p, _o, lid in unkeyed}
    if not asked:
        return set()
    want = np.array(sorted({lid.ledger for lid in asked}), np.uint64)
    known: set[LedgerId] = set()
    if ctx.dirs.storage_kind == "index-files":
        files = ctx.index_inventory.files
        hit = members(files["ledger"], want)
        known = set(map(LedgerId, files["scope"][hit].tolist(), files["ledger"][hit].tolist()))
    else:
        from bkdisk.fsck import dbindex
        from bkdisk.rocksdbfiles.dbindex import ledger_ids
        for _di, _current, idx in dbindex.read(ctx):
            if not dbindex.is_index(idx):
                return None
            ids = ledger_ids(idx).view(np.uint64)   # (the index keys ids as signed longs)
            known |= {LedgerId(0, x) for x in ids[members(ids, want)].tolist()}
    return {(p, o) for p, o, lid in unkeyed if lid not in known}


def storage_unlisted(ctx: CheckContext) -> str | None:
    """A ledger or index dir's ``current`` folder that could not be listed (pass 1 reports it): what
    ledger storage holds is then unknown, and an entry not found in the rest may be there."""
    return next((os.path.join(d, CURRENT_DIR) for d in (*ctx.dirs.ledger_dirs, *ctx.dirs.effective_index_dirs)
                 if ctx.not_listed(d)), None)


def index_unlisted(ctx: CheckContext, lid: LedgerId) -> bool:
    """Index files: a folder on the path of ``lid``'s index could not be listed (pass 3 reports it), so
    whether storage holds its entries is unknown."""
    return ctx.dirs.storage_kind == "index-files" and ctx.index_inventory.unlisted_folder_of(lid) is not None
