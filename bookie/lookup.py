"""Reading one entry the way a bookie serves a read: find the ledger's index, follow the location."""
from __future__ import annotations

import os

from bkdisk.bookie.layout import BookieDirs
from bkdisk.diskio.mapped import read_bytes
from bkdisk.formats.codec import read_value
from bkdisk.formats.entry import parse_entry_ids
from bkdisk.formats.entrylog import ENTRY_SIZE, MIN_SANE_ENTRY_SIZE
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import LOCATION, slot_offset, unpack_location
from bkdisk.formats.paths import CURRENT_DIR, entry_log_name, index_relpath


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
    data = read_bytes(idx, limit=None)
    off = slot_offset(entry_id)
    if off + LOCATION.sizeof() > len(data):
        return None
    loc = read_value(LOCATION, data, off)
    if loc == 0:
        return None
    log_id, pos = unpack_location(loc)
    for d in dirs.ledger_dirs:
        p = os.path.join(d, CURRENT_DIR, entry_log_name(log_id))
        if os.path.exists(p):
            log = read_bytes(p, limit=None)
            # A location points just past the entry's size prefix.
            prefix = ENTRY_SIZE.sizeof()
            if pos < prefix or pos > len(log):
                return None
            size = read_value(ENTRY_SIZE, log, pos - prefix)
            if size < MIN_SANE_ENTRY_SIZE or pos + size > len(log):
                return None
            entry = log[pos:pos + size]
            try:
                _v, scope, ledger, eid = parse_entry_ids(entry)
            except FormatError:
                return None
            return entry if (scope, ledger, eid) == (lid.scope, lid.ledger, entry_id) else None
    return None
