"""DbLedgerStorage's RocksDB databases on disk: their size, and the SST files whose key range holds
no ledger the bookie keeps (only deleted ledgers: what a deleteRange leaves on disk until RocksDB
compacts that range; BookKeeper PRs #3802 and #4555). Key ranges come from the MANIFEST; no table
is read."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from bkdisk.bookie.inventory import ledger_dir_name
from bkdisk.bookie.layout import BookieDirs
from bkdisk.diskio.mapped import DiskError
from bkdisk.formats.dbledger import LEDGERS_KEY, LEDGERS_KEY_SIZE
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import to_unsigned64
from bkdisk.formats.paths import LEDGERS_DB, LOCATIONS_DB

_INTERNAL_KEY_TRAILER = 8   # sequence number and type after the user key


def _folder_bytes(folder: str) -> int:
    total = 0
    with os.scandir(folder) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                total += e.stat(follow_symlinks=False).st_size
    return total


def _ledger_of(internal_key: bytes) -> int | None:
    """The ledger id a key of either database starts with (the ledgers key; the locations key begins
    with the same long), unsigned."""
    user = internal_key[:-_INTERNAL_KEY_TRAILER]
    return to_unsigned64(LEDGERS_KEY.parse(user[:LEDGERS_KEY_SIZE])) if len(user) >= LEDGERS_KEY_SIZE else None


def stale_tables(db_dir: str, live: np.ndarray) -> tuple[list[dict[str, Any]], int, list[str]]:
    """The live SST files of ``db_dir`` whose key range holds no ledger of ``live`` (sorted uint64),
    how many SST files the MANIFEST lists, and those of them the folder lacks."""
    from bkdisk.rocksdbfiles.manifest import read_manifest
    version = read_manifest(db_dir)
    out = []
    missing = sorted(f.name for f in version.files.values() if not os.path.lexists(os.path.join(db_dir, f.name)))
    for f in sorted(version.files.values(), key=lambda f: (f.level, f.number)):
        lo, hi = _ledger_of(f.smallest), _ledger_of(f.largest)
        if lo is None or hi is None:
            continue
        first = int(np.searchsorted(live, np.uint64(lo), side="left"))
        if first < len(live) and int(live[first]) <= hi:
            continue   # some kept ledger falls inside the range
        out.append({"database": os.path.basename(db_dir), "file": f.name, "level": f.level, "bytes": f.size,
                    "first_ledger": str(lo), "last_ledger": str(hi)})
    return out, len(version.files), missing


def rocksdb_space(dirs: BookieDirs, kept: list[set[int]], warnings: list[str]) -> list[dict[str, Any]]:
    """Per ledger dir: the bytes of its two databases and their SST files holding only ledgers not kept
    (``kept``: per ledger dir, the ledger ids its index holds that the collector keeps)."""
    out = []
    for d, keep in zip(dirs.ledger_dirs, kept):
        live = np.array(sorted(keep), np.uint64)
        cur = dirs.current(d)
        row: dict[str, Any] = {"ledger_dir": ledger_dir_name(d)}
        stale: list[dict[str, Any]] = []
        for db in (LOCATIONS_DB, LEDGERS_DB):
            p = os.path.join(cur, db)
            try:
                row[f"{db}_bytes"] = _folder_bytes(p)
                found, n, missing = stale_tables(p, live)
            except (OSError, DiskError, FormatError) as e:
                warnings.append(f"{p}: cannot read its MANIFEST ({e}): its SST files are not judged")
                row.setdefault(f"{db}_bytes", None)
                row[f"{db}_sst_files"] = None
                continue
            row[f"{db}_sst_files"] = n
            stale += found
            if missing:   # (RocksDB's open checks every live file: "No such file or directory")
                warnings.append(f"{p}: its MANIFEST lists {len(missing)} SST file{'s' if len(missing) > 1 else ''} "
                                f"the folder lacks ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): "
                                "RocksDB will not open this database, and the bookie will not start")
        row["stale_sst"] = stale
        row["stale_sst_bytes"] = sum(s["bytes"] for s in stale)
        out.append(row)
    return out
