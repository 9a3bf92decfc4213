"""The header a rebuilt ``.idx`` gets (master key, fenced bit, explicit LAC, version) and its page size:
the old header's where the check read it, else the journals' records, and the fenced bit a header the
check refused still tells."""
from __future__ import annotations

import os
from collections.abc import Collection

import numpy as np

from bkdisk.diskio.failures import IoFailure, open_regular_file
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import HEADER_SIZE, STATE_FENCED, IndexHeader, lac_after_state, state_after_key
from bkdisk.fsck.context import CheckContext

PAGE_SIZES = (65536, 32768, 16384, 8192, 4096, 2048, 1024, 512)


def header_for(ctx: CheckContext, lid: LedgerId) -> IndexHeader | None:
    """The header a rebuilt index gets: the old one when readable, else what the journal knows."""
    facts = ctx.journal_facts
    old = old_header(ctx, lid)
    key = old.master_key if old is not None else facts.master_keys.get(lid)
    if key is None:
        return None
    fenced = (old.fenced if old is not None else bool(damaged_index_fenced(ctx, lid))) or facts.fenced.get(lid, False)
    version = old.version if old is not None else common_version(ctx.index_inventory)
    lac = old.explicit_lac_body if old is not None else facts.explicit_lac.get(lid) or damaged_index_lac(ctx, lid)
    return IndexHeader(version, key, STATE_FENCED if fenced else 0, lac if version >= 1 else None)


def old_header(ctx: CheckContext, lid: LedgerId) -> IndexHeader | None:
    """The readable header of the ledger's current index, if any."""
    inv = ctx.index_inventory
    for i, h in enumerate(inv.headers):
        if h is not None and inv.files["named"][i] and \
                LedgerId(int(inv.files["scope"][i]), int(inv.files["ledger"][i])) == lid:
            return h
    return None


def common_version(inv) -> int:
    v = [h.version for h in inv.headers if h is not None]
    return max(set(v), key=v.count) if v else 1


def infer_page_size(inv, rebuilt: Collection[str] = ()) -> int:
    """The bookie's pageSize, as its index files show it: the largest of PAGE_SIZES that divides the slots
    of every file with a readable header and no stray bytes after its last slot, but those a repair
    rebuilds (``rebuilt``: a file cut short tells nothing); BookKeeper's default where none does."""
    f = inv.files
    sizes = [int(s) - HEADER_SIZE for p, s, ok, trailing in zip(inv.paths, f["size"], f["header_ok"], f["trailing"])
             if ok and not trailing and int(s) > HEADER_SIZE and p not in rebuilt]
    for p in PAGE_SIZES:
        if sizes and all(s % p == 0 for s in sizes):
            return p
    return 8192


def _head(path: str) -> bytes | None:
    """The header block of the index file ``path``; None when it cannot be read."""
    opened = open_regular_file(path)
    if isinstance(opened, IoFailure):
        return None
    fd, _size = opened
    try:
        return os.pread(fd, HEADER_SIZE, 0)
    except OSError:
        return None
    finally:
        os.close(fd)


def damaged_header_state(path: str) -> int | None:
    """The state bits of an index header refused as a whole, where the rest of it still says where they
    are: the key length that of a master key (a SHA-1; the state follows the key in both versions, whatever
    the signature or version say) and no bit but the fenced one set. None when that cannot be told: a
    header zeroed or overwritten says "not fenced" by accident, never by a length of 20."""
    head = _head(path)
    state = None if head is None else state_after_key(head)
    return state if state is not None and state & ~STATE_FENCED == 0 else None


def damaged_index_lac(ctx: CheckContext, lid: LedgerId) -> bytes | None:
    """The explicit-LAC body a refused header of the ledger's index still holds (formats.index
    .lac_after_state), if one does."""
    f = ctx.index_inventory.files
    rows = np.flatnonzero(f["named"] & ~f["header_ok"] & (f["scope"] == lid.scope) & (f["ledger"] == lid.ledger))
    for r in rows.tolist():
        head = _head(ctx.index_inventory.paths[r])
        body = None if head is None else lac_after_state(head, lid.ledger)
        if body is not None:
            return body
    return None


def damaged_index_fenced(ctx: CheckContext, lid: LedgerId) -> bool | None:
    """Whether a refused header of the ledger's index says fenced (``damaged_header_state``): False
    when it has none refused, None when one cannot tell."""
    inv = ctx.index_inventory
    f = inv.files
    rows = np.flatnonzero(f["named"] & ~f["header_ok"] & (f["scope"] == lid.scope) & (f["ledger"] == lid.ledger))
    states = [damaged_header_state(inv.paths[int(r)]) for r in rows]
    if any(s is None for s in states):
        return None
    return any(bool(s & STATE_FENCED) for s in states if s is not None)
