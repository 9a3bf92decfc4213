"""Reading one entry the way a bookie serves a read: find the ledger's index, follow the location."""
from __future__ import annotations

import os

from bookie.layout import BookieDirs
from diskio.mapped import read_bytes
from formats.errors import FormatError
from formats.ids import LedgerId
from formats.index import slot_offset, unpack_location
from formats.paths import CURRENT_DIR, entry_log_name, index_relpath


def find_index(dirs: BookieDirs, lid: LedgerId) -> str | None:
    """The ledger's ``.idx`` at its hierarchy path, probing every index dir in order (findIndexFile)."""
    rel = index_relpath(lid)
    for d in dirs.effective_index_dirs:
        p = os.path.join(d, CURRENT_DIR, rel)
        if os.path.exists(p):
            return p
    return None


def read_entry(dirs: BookieDirs, lid: LedgerId, entry_id: int) -> bytes | None:
    """The stored entry bytes, or None when the index has no location for it or it cannot be read."""
    idx = find_index(dirs, lid)
    if idx is None:
        return None
    data = read_bytes(idx)
    off = slot_offset(entry_id)
    if off + 8 > len(data):
        return None
    loc = int.from_bytes(data[off:off + 8], "big")
    if loc == 0:
        return None
    log_id, pos = unpack_location(loc)
    for d in dirs.ledger_dirs:
        p = os.path.join(d, CURRENT_DIR, entry_log_name(log_id))
        if os.path.exists(p):
            log = read_bytes(p)
            if pos < 4 or pos > len(log):
                return None
            size = int.from_bytes(log[pos - 4:pos], "big", signed=True)
            if size < 16 or pos + size > len(log):
                return None
            entry = log[pos:pos + size]
            try:
                from formats.entry import parse_entry_ids
                _v, scope, ledger, eid = parse_entry_ids(entry)
            except FormatError:
                return None
            return entry if (scope, ledger, eid) == (lid.scope, lid.ledger, entry_id) else None
    return None
