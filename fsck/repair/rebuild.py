"""What a rebuilt ``.idx`` of one ledger holds: the best copy of each of its entries in the entry logs.

A copy whose digest fails may owe that to a damaged header, and then its entry id is any number:
one flipped bit made entry 4,294,967,296 of a ledger of ten entries, and a rebuild sized from it
asked for a 32 GiB index. So a failed copy counts only up to the last entry id that a copy which did
not fail, or the ledger's current index, vouches for; and a rebuild that would still need more than
MAX_REBUILT_SLOTS slots is refused (``too_large``) rather than written.
"""
from __future__ import annotations

import os

import numpy as np

from bkdisk.digests.kernels import DIGEST_BAD, DIGEST_OK, DIGEST_UNKNOWN
from bkdisk.diskio.distinct import members
from bkdisk.diskio.failures import IoFailure, open_regular_file
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import log_scan_parts
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import HEADER_SIZE, SLOT_DTYPE, SLOT_SIZE, join_locations, pack_location
from bkdisk.fsck.context import CheckContext

MAX_REBUILT_SLOTS = 1 << 27   # 1 GiB of slots: about 134 million entries in one ledger
_RANK = {DIGEST_OK: 2, DIGEST_UNKNOWN: 1, DIGEST_BAD: 0}


def best_copies(ctx: CheckContext, lid: LedgerId, served: tuple[np.ndarray, np.ndarray] | None = None
                ) -> dict[int, tuple[int, int, int, int]]:
    """Entry id -> (rank, log id, offset, location) of the copy a rebuild keeps: a verified copy before
    an unverifiable one before a failed one; among equals the copy the current index points at (what the
    bookie serves now: a rebuild of a header must not move a read to another copy, a later one being
    garbage the check names), else the latest (highest log id, then offset), as BookKeeper's rebuild from
    the logs keeps the last copy it scans. ``served``: ``indexed_locations``' answer, when the caller has it."""
    served_entries, served_at = indexed_locations(ctx, lid) if served is None else served
    at = dict(zip(served_entries.tolist(), served_at.tolist()))   # (as ``copies``: an item per entry)
    copies: list[tuple[int, tuple[int, int, int, int]]] = []
    for lf in ctx.log_files:
        scan = ctx.log_scans.get(lf.path)
        if not isinstance(scan, EntryLogArrays):
            continue
        for part in log_scan_parts(scan):
            e, dig = part.entries, getattr(part, "digests", None)
            for i in np.flatnonzero((e["scope"] == lid.scope) & (e["ledger"] == lid.ledger)).tolist():
                r = _RANK[int(dig["status"][i])] if dig is not None else 1
                off = int(e["offset"][i])
                copies.append((int(e["entry"][i]), (r, lf.log_id, off,
                                                     pack_location(lf.log_id, off + SIZE_PREFIX_SIZE))))
    vouched = max([eid for eid, c in copies if c[0] > 0] + [int(served_entries[-1]) if len(served_entries) else -1])
    best: dict[int, tuple[int, int, int, int]] = {}
    for eid, cand in copies:
        if cand[0] == 0 and eid > vouched:
            continue
        if eid not in best or _order(cand, at.get(eid)) >= _order(best[eid], at.get(eid)):
            best[eid] = cand
    return best


def _order(copy: tuple[int, int, int, int], served: int | None) -> tuple[int, bool, int, int]:
    """How a rebuild ranks a copy of an entry whose current index location is ``served``."""
    rank, log_id, offset, location = copy
    return rank, location == served, log_id, offset


def indexed_locations(ctx: CheckContext, lid: LedgerId) -> tuple[np.ndarray, np.ndarray]:
    """(entry ids ascending, their locations) of the slots the ledger's current index fills: the slots the
    check read, and those of an index whose header it refused, read here (the check reads no slot past a
    header it refuses, yet the slots start at HEADER_SIZE whatever the header says)."""
    inv = ctx.index_inventory
    f, locs = inv.files, inv.locations
    rows = np.flatnonzero(f["named"] & (f["scope"] == lid.scope) & (f["ledger"] == lid.ledger))
    entries, places = [], []
    if len(rows) and len(locs):
        mine = locs[members(locs["file"], rows)]
        entries.append(mine["entry"].astype(np.int64))
        places.append(join_locations(mine["log"], mine["pos"]))
    for r in rows[~f["header_ok"][rows]].tolist():
        e, loc = slots_past_header(inv.paths[r])
        entries.append(e)
        places.append(loc)
    if not entries:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    e, loc = np.concatenate(entries), np.concatenate(places)
    order = np.argsort(e, kind="stable")
    return e[order], loc[order]


def slots_past_header(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(entry ids, locations) of the non-empty slots of the index file ``path``, read a window at a time
    past its header block; none when it cannot be read (a read the check could not do either: that
    failure blocks the rebuild already)."""
    none = np.zeros(0, np.int64), np.zeros(0, np.uint64)
    opened = open_regular_file(path)
    if isinstance(opened, IoFailure):
        return none
    fd, size = opened
    entries, places = [], []
    try:
        window = SLOT_SIZE * (1 << 17)
        for at in range(HEADER_SIZE, size - (size - HEADER_SIZE) % SLOT_SIZE, window):
            got = os.pread(fd, min(window, size - at), at)
            slots = np.frombuffer(got[:len(got) - len(got) % SLOT_SIZE], SLOT_DTYPE)
            filled = np.flatnonzero(slots)
            entries.append((at - HEADER_SIZE) // SLOT_SIZE + filled.astype(np.int64))
            places.append(slots[filled].astype(np.uint64))
    except OSError:
        return none
    finally:
        os.close(fd)
    return (np.concatenate(entries), np.concatenate(places)) if entries else none


def too_large(best: dict[int, tuple[int, int, int, int]]) -> str | None:
    """Why the index these copies make is not written, if it would exceed MAX_REBUILT_SLOTS."""
    if not best or max(best) < MAX_REBUILT_SLOTS:
        return None
    eid = max(best)
    _r, log_id, off, _loc = best[eid]
    return (f"entry {eid} (entry log {log_id:x} at offset {off}) would make a rebuilt index of "
            f"{(eid + 1) * SLOT_SIZE / (1 << 30):.1f} GiB; an entry id this far out is more likely a damaged "
            f"header than a real entry: rebuild refused")


def rebuilt_locations(best: dict[int, tuple[int, int, int, int]]) -> np.ndarray:
    """Entry id -> location of the kept copy (0 where none), as the slots of the rebuilt index."""
    arr = np.zeros((max(best) + 1) if best else 0, dtype=np.uint64)
    for eid, c in best.items():
        arr[eid] = c[3]
    return arr

