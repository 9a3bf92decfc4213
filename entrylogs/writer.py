"""Entry log writer: header, size-prefixed entries, and the ledgers map written when a log rolls."""
from __future__ import annotations

from bkdisk.formats import entrylog as fe
from bkdisk.formats.index import pack_location


class EntryLogWriter:
    """Appends entries to one ``.log`` file; ``close(roll=True)`` appends the ledgers map."""

    def __init__(self, path: str, log_id: int, *, header_version: int = fe.HEADER_V1):
        self.path = path
        self.log_id = log_id
        self.header_version = header_version
        self._f = open(path, "wb")
        self._f.write(fe.build_header(header_version))
        self.position = fe.HEADER_SIZE
        self.ledger_bytes: dict[tuple[int, int], int] = {}

    def append(self, entry: bytes, scope_id: int, ledger_id: int) -> int:
        """Write one entry; return its location ((log id << 32) | position of the entry bytes)."""
        pos = self.position
        prefix = fe.SIZE_PREFIX_SIZE
        self._f.write(fe.ENTRY_SIZE.build(len(entry)))
        self._f.write(entry)
        self.position += prefix + len(entry)
        k = (scope_id, ledger_id)
        self.ledger_bytes[k] = self.ledger_bytes.get(k, 0) + len(entry) + prefix
        return pack_location(self.log_id, pos + prefix)

    def close(self, *, roll: bool) -> int:
        """Close the log. A rolled log gets its ledgers map and a patched header; the current one does not."""
        if roll and self.header_version >= 1 and self.ledger_bytes:
            offset = self.position
            self._f.write(fe.build_ledgers_map(self.ledger_bytes))
            self._f.seek(0)
            self._f.write(fe.build_header(self.header_version, offset, len(self.ledger_bytes)))
        self._f.close()
        return self.position


def write_preallocated(path: str) -> None:
    """An empty next log, as a bookie leaves one preallocated at shutdown."""
    open(path, "wb").close()


def rebuild_entry_log(scan, data: bytes, path: str) -> None:
    """Write an entry log from a parsed one: header, each entry (its own content), ledgers map if it had one.

    The entries are copied as stored (an entry is content); header and map are built from their
    parsed fields.
    """
    if scan.size == 0:
        write_preallocated(path)
        return
    h = scan.header
    w = EntryLogWriter(path, scan.log_id or 0, header_version=h.version)
    for r in scan.records:
        w.append(data[r.offset + fe.SIZE_PREFIX_SIZE:r.offset + fe.SIZE_PREFIX_SIZE + r.size], r.scope_id, r.ledger_id)
    rolled = scan.ledgers_map is not None
    if rolled and w.ledger_bytes != scan.ledgers_map:
        raise ValueError(f"{scan.path}: the ledgers map does not match the entries; not reproducible")
    if rolled:
        w.ledger_bytes = dict(scan.ledgers_map.items())  # BookKeeper writes the map in its hash map's order
    w.close(roll=rolled)
