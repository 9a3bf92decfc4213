"""DbLedgerStorage's two RocksDB indexes for a bookie the writer built: ``current/locations`` (entry ->
location in an entry log) and ``current/ledgers`` (ledger -> exists, fenced, master key, explicit
LAC), as one SST each, flushed (an empty WAL), as a bookie leaves them after a clean shutdown.

The keys and values are formats/dbledger.py's declarations; the database files are
rocksdbfiles/writer.py's. DbLedgerStorage keys a ledger by its 64-bit id alone: BP-35's scoped
ledgers have no place in it (specs/dbledgerstorage.md).
"""
from __future__ import annotations

import os

from bkdisk.formats import dbledger as fd
from bkdisk.formats.digests import master_key
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import unpack_location
from bkdisk.formats.paths import LEDGERS_DB, LOCATIONS_DB
from bkdisk.formats.rocksdb import ValueType
from bkdisk.rocksdbfiles.sst import Record
from bkdisk.rocksdbfiles.writer import write_db


def check_ledgers(ledgers: list) -> None:
    """ValueError unless every ledger (LedgerSpec) can be kept by DbLedgerStorage (before writing)."""
    scoped = sorted({str(l.lid) for l in ledgers if l.scope_id != 0})
    if scoped:
        raise ValueError(f"DbLedgerStorage keys ledgers by a 64-bit id: scoped ledgers {scoped} cannot be stored")


def write_db_indexes(current: str, ledgers: list, locations: dict[tuple[LedgerId, int], int],
                     lac_body) -> None:
    """Write both databases under ``current`` for ``ledgers`` (LedgerSpec) whose entries are at
    ``locations`` ((ledger, entry) -> (entry log id << 32) | offset of the entry after its size field)."""
    check_ledgers(ledgers)
    seq = 0

    def records(items: list[tuple[bytes, bytes]]) -> list[Record]:
        nonlocal seq
        out = []
        for key, value in sorted(items):   # RocksDB's bytewise order: big-endian ids sort as numbers
            seq += 1
            out.append(Record(key, seq, int(ValueType.VALUE), value))
        return out

    locs = [(fd.locations_key(lid.ledger, eid), fd.location_value(*unpack_location(loc)))
            for (lid, eid), loc in locations.items()]
    infos = [(fd.LEDGERS_KEY.build(l.ledger_id), fd.ledger_value(fd.LedgerInfo(
        l.ledger_id, True, l.fenced, master_key(l.password),
        lac_body(l) if l.explicit_lac is not None else None, None))) for l in ledgers]
    for name, items in ((LOCATIONS_DB, locs), (LEDGERS_DB, infos)):
        rows = records(items)
        write_db(os.path.join(current, name), [(0, rows)] if rows else [])
