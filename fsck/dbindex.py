"""DbLedgerStorage's RocksDB indexes as passes 2, 3 and 5 read them on such a bookie: each ledger dir's
databases read once per check, which database a finding is about, and BookKeeper's command that
rebuilds it.

The passes' DbLedgerStorage checks give (code, finding fields) pairs (``Pairs``) with codes from the one
problem table (fsck/problems.py); ``findings`` makes them Findings. Nothing here writes: BookKeeper's
shell rebuilds the databases (``bookkeeper_rebuilds`` says with which command).
"""
from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.mapped import DiskError
from bkdisk.diskio.spill import RangeSpill
from bkdisk.formats.errors import FormatError
from bkdisk.formats.paths import CURRENT_DIR, LEDGERS_DB, LOCATIONS_DB
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.keyjoin import KeySet
from bkdisk.fsck.problems import Severity

if TYPE_CHECKING:   # the RocksDB reader loads only for a DbLedgerStorage bookie (in ``read``)
    from typing_extensions import TypeIs

    from bkdisk.rocksdbfiles.dbindex import LedgerDirIndex

Pairs = list[tuple[Code, dict[str, Any]]]
# BookKeeper's offline rebuilds (bin/bookkeeper shell, the bookie stopped), per database.
REBUILD_COMMANDS = {LOCATIONS_DB: "bin/bookkeeper shell rebuild-db-ledger-locations-index",
                    LEDGERS_DB: "bin/bookkeeper shell rebuild-db-ledgers-index"}
REBUILD_HINT = f"{REBUILD_COMMANDS[LOCATIONS_DB]} (the bookie stopped)"
_REBUILT = {Code.DBINDEX_UNREADABLE, Code.DBINDEX_BLOCK_CHECKSUM, Code.DBINDEX_SST_MISSING, Code.DBINDEX_WAL_TORN,
            Code.DBINDEX_LEDGER_UNKNOWN, Code.DBINDEX_LEDGER_MISSING, Code.DBINDEX_MASTER_KEY_MISMATCH,
            Code.DBINDEX_NOT_FENCED, Code.DBINDEX_EXPLICIT_LAC_MISMATCH, Code.DBINDEX_LOCATION_MISSING_LOG,
            Code.DBINDEX_LOCATION_WRONG, Code.DBINDEX_ENTRY_NOT_INDEXED}
_CACHE = "_dbindex_read"     # each ledger dir's databases are read once per check (an attribute of ctx)
HELD_SHARE = 0.25            # of --memory-limit: the locations kept from the read to the cross-check
PAIR_ROW = np.dtype([("seq", "<i8"), ("ledger", "<i8"), ("entry", "<i8")])
KEYSET_ROW = 48      # bytes a KeySet holds per row (columns, mix, order) with its query's temporaries


def read(ctx: CheckContext) -> list[tuple[int, str, LedgerDirIndex | Pairs]]:
    """(dir index, current folder, its indexes or the findings of a read that could not start) per ledger dir."""
    cached = ctx.__dict__.get(_CACHE)
    if cached is not None:
        return cached
    from bkdisk.rocksdbfiles.dbindex import LOCATION_ROW, read_ledger_dir
    out: list[tuple[int, str, LedgerDirIndex | Pairs]] = []
    share = ctx.options.memory.share(HELD_SHARE) // max(1, len(ctx.dirs.ledger_dirs))
    for di, d in enumerate(ctx.dirs.ledger_dirs):
        current = os.path.join(d, CURRENT_DIR)
        try:
            out.append((di, current, read_ledger_dir(current, ChunkedArray(LOCATION_ROW, share, ctx.spill,
                                                                           "db-locations"))))
        except FormatError as e:
            out.append((di, current, [(Code.DBINDEX_UNREADABLE, dict(path=e.path, offset=e.offset,
                                                                detail=f"{e.expected}, found {e.found}"))]))
        except DiskError as e:      # no CURRENT or MANIFEST, or one that cannot be read
            out.append((di, current, [(Code.DBINDEX_UNREADABLE, dict(path=e.path, detail=e.what, errno=e.errno))]))
    ctx.__dict__[_CACHE] = out
    return out


def is_index(idx: LedgerDirIndex | Pairs) -> TypeIs[LedgerDirIndex]:
    """Whether ``read`` read the dir's databases (else ``idx`` is the findings of a read that could not start)."""
    return not isinstance(idx, list)


def location_count(ctx: CheckContext) -> int:
    """How many live locations the check read, over every ledger dir."""
    return sum(idx.count for _di, _c, idx in read(ctx) if is_index(idx))


def findings(pairs: Pairs) -> Iterator[Finding]:
    """The (code, fields) pairs as Findings."""
    for code, fields in pairs:
        yield Finding(code, **fields)


def signed(ledger: int) -> int:
    """A ledger id as the ledgers index keys it (LEDGERS_KEY: a signed big-endian long)."""
    return ledger - (1 << 64) if ledger >= 1 << 63 else ledger


def database_of(path: str | None) -> tuple[str, str | None]:
    """Which of a ledger dir's two databases a DBINDEX finding is about, and its folder: the one its path
    lies in, else ``ledgers`` (a ledger the journal knows and no ledgers index holds; no folder)."""
    if path is None:
        return LEDGERS_DB, None
    parts = os.path.normpath(path).split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1] == CURRENT_DIR and parts[i] in REBUILD_COMMANDS:
            return parts[i], os.sep.join(parts[:i + 1])
    return LOCATIONS_DB, None


_REFUSED = (errno.EACCES, errno.EPERM)   # permissions: fixed by an operator, not by rebuilding the database


def bookkeeper_rebuilds(findings: list) -> list[tuple[str, list[str], list]]:
    """(BookKeeper command, database folders, findings) for the DBINDEX errors and warnings: what an
    operator runs, the bookie stopped, to rebuild a database bkdisk never writes. The ledgers index first:
    BookKeeper's locations rebuild keeps only the entries of ledgers the ledgers index holds."""
    by_db: dict[str, tuple[set[str], list]] = {}
    refused = {f.path for f in findings if f.code == Code.FILE_UNREADABLE and f.errno in _REFUSED}
    for f in findings:
        if f.code not in _REBUILT or f.severity == Severity.INFO:
            continue
        if f.errno in _REFUSED or f.path in refused:   # the system refused access: the bytes may be sound
            continue
        db, folder = database_of(f.path)
        folders, covers = by_db.setdefault(db, (set(), []))
        covers.append(f)
        if folder is not None:
            folders.add(folder)
    return [(REBUILD_COMMANDS[db], sorted(by_db[db][0]), by_db[db][1]) for db in (LEDGERS_DB, LOCATIONS_DB)
            if db in by_db]


def has_location(idx, free: ChunkedArray, rows: np.ndarray, budget: int, folder) -> np.ndarray:
    """Whether some location of the dir holds (ledger, entry) of each free entry ``rows`` names (in
    order): joined by ledger, in as many ledger partitions as the budget needs."""
    parts = max(1, -(-(len(rows) + idx.count) * KEYSET_ROW // budget))

    def route(r: np.ndarray) -> np.ndarray:
        return (r["ledger"].astype(np.uint64) % np.uint64(parts)).astype(np.int64)

    wanted = RangeSpill(PAIR_ROW, route, parts, budget, folder, "db-unpointed-ledgers")
    for start, t in free.chunks():
        sel = rows[(rows >= start) & (rows < start + len(t))]
        w = np.empty(len(sel), PAIR_ROW)
        w["seq"] = np.searchsorted(rows, sel)
        w["ledger"], w["entry"] = t["ledger"][sel - start], t["entry"][sel - start]
        wanted.append(w)
    held = RangeSpill(PAIR_ROW, route, parts, budget, folder, "db-located-ledgers")
    for c in idx.location_chunks():
        h = np.empty(len(c), PAIR_ROW)
        h["seq"], h["ledger"], h["entry"] = 0, c["ledger"], c["entry"]
        held.append(h)
    out = np.zeros(len(rows), bool)
    for p, w in wanted.ranges():
        if len(w):
            ref = held.range_rows(p)
            out[w["seq"]] = KeySet([ref["ledger"], ref["entry"]]).contains([w["ledger"], w["entry"]])
    wanted.close()
    held.close()
    return out
