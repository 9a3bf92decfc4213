"""DbLedgerStorage's RocksDB indexes in fsck, in the places of the index passes of index-file storage:
the databases themselves (pass 2: MANIFEST, SST blocks, WAL), the ledgers index against the journal
(pass 3), every location against the scanned entry logs (pass 5).

``check_databases``, ``check_ledgers`` and ``check_locations`` return (code, finding fields) pairs with
codes from the one problem table (fsck/problems.py); ``run_databases``, ``run_ledgers`` and
``run_locations`` yield them as Findings for fsck.api's pass list; ``check`` is all three. Nothing here
writes: BookKeeper's shell rebuilds the databases (``bookkeeper_rebuilds`` says with which command).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator

from diskio.mapped import DiskError
from formats.errors import FormatError
from formats.ids import LedgerId
from formats.paths import CURRENT_DIR, LEDGERS_DB, LOCATIONS_DB
from fsck.context import CheckContext
from fsck.problems import Severity
from fsck.codes import Code

if TYPE_CHECKING:   # the RocksDB reader loads only for a DbLedgerStorage bookie (in _read)
    from rocksdbfiles.dbindex import LedgerDirIndex

Pairs = list[tuple[str, dict[str, Any]]]
# BookKeeper's offline rebuilds (bin/bookkeeper shell, the bookie stopped), per database.
REBUILD_COMMANDS = {LOCATIONS_DB: "bin/bookkeeper shell rebuild-db-ledger-locations-index",
                    LEDGERS_DB: "bin/bookkeeper shell rebuild-db-ledgers-index"}
REBUILD_HINT = f"{REBUILD_COMMANDS[LOCATIONS_DB]} (the bookie stopped)"
_READER_CODES = {"sst-checksum": Code.DBINDEX_BLOCK_CHECKSUM, "sst-missing": Code.DBINDEX_SST_MISSING,
                 "wal-torn-tail": Code.DBINDEX_WAL_TORN}
_REBUILT = {Code.DBINDEX_UNREADABLE, Code.DBINDEX_BLOCK_CHECKSUM, Code.DBINDEX_SST_MISSING, Code.DBINDEX_WAL_TORN, Code.DBINDEX_LEDGER_UNKNOWN,
            Code.DBINDEX_LEDGER_MISSING, Code.DBINDEX_MASTER_KEY_MISMATCH, Code.DBINDEX_NOT_FENCED, Code.DBINDEX_EXPLICIT_LAC_MISMATCH,
            Code.DBINDEX_LOCATION_MISSING_LOG, Code.DBINDEX_LOCATION_WRONG, Code.DBINDEX_ENTRY_NOT_INDEXED}
_CACHE = "_dbindex_read"     # each ledger dir's databases are read once per check (an attribute of ctx)
HELD_SHARE = 0.25            # of --memory-limit: the locations kept from the read to the cross-check


def _key_text(k: bytes | None) -> str:
    return "start" if k is None else k.hex()


def _read(ctx: CheckContext) -> list[tuple[int, str, LedgerDirIndex | Pairs]]:
    """(dir index, current folder, its indexes or the findings of a read that could not start) per ledger dir."""
    cached = ctx.__dict__.get(_CACHE)
    if cached is not None:
        return cached
    from diskio.spill import ChunkedArray
    from rocksdbfiles.dbindex import LOCATION_ROW, read_ledger_dir
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
            out.append((di, current, [(Code.DBINDEX_UNREADABLE, dict(path=e.path, detail=e.what))]))
    ctx.__dict__[_CACHE] = out
    return out


def _is_index(idx: LedgerDirIndex | Pairs) -> bool:
    """Whether ``_read`` read the dir's databases (else ``idx`` is the findings of a read that could not start)."""
    return not isinstance(idx, list)


def location_count(ctx: CheckContext) -> int:
    """How many live locations the check read, over every ledger dir."""
    return sum(idx.count for _di, _c, idx in _read(ctx) if _is_index(idx))


def check_databases(ctx: CheckContext) -> Pairs:
    """Pass 2's place: each database readable, every SST the MANIFEST names present, every block's
    checksum, the WAL's tail."""
    out: Pairs = []
    for _di, _current, idx in _read(ctx):
        if not _is_index(idx):
            out += idx
            continue
        for p in idx.problems:
            detail = p.detail
            if p.key_range is not None:
                detail += f"; keys {_key_text(p.key_range[0])} .. {_key_text(p.key_range[1])} unreadable"
            out.append((_READER_CODES.get(p.kind, Code.DBINDEX_UNREADABLE), dict(path=p.path, offset=p.offset, detail=detail)))
    return out


def check_ledgers(ctx: CheckContext) -> Pairs:
    """Pass 3's place: the ledgers index against the locations and the journal's meta records (only the
    ledgers the journal speaks of are looked up: no step per ledger of the index)."""
    import numpy as np

    from rocksdbfiles.dbindex import ledger_ids, ledgers_without_metadata
    out: Pairs = []
    facts = ctx.journal_facts
    told = sorted({x.ledger for x in (*facts.master_keys, *facts.fenced, *facts.explicit_lac) if x.scope == 0},
                  key=_signed)
    known: list[np.ndarray] = []
    for _di, current, idx in _read(ctx):
        if not _is_index(idx):
            continue
        known.append(ledger_ids(idx))
        ledgers_db = os.path.join(current, LEDGERS_DB)
        for lid, n in sorted(ledgers_without_metadata(idx).items()):
            out.append((Code.DBINDEX_LEDGER_UNKNOWN, dict(path=ledgers_db, scope=0, ledger=lid,
                                                       detail=f"none, with {n} locations in {current}/{LOCATIONS_DB}")))
        for x in told:
            lid = _signed(x)
            info = idx.ledgers.get(lid)
            if info is None:
                continue
            ledger = LedgerId(0, x)
            key = facts.master_keys.get(ledger)
            where = dict(path=ledgers_db, scope=0, ledger=lid)
            if key is not None and key != info.master_key:
                out.append((Code.DBINDEX_MASTER_KEY_MISMATCH,
                            dict(where, detail=f"journal {key.hex()}, index {info.master_key.hex()}")))
            if facts.fenced.get(ledger) and not info.fenced:
                out.append((Code.DBINDEX_NOT_FENCED, where))
            lac = facts.explicit_lac.get(ledger)
            if lac is not None and info.explicit_lac_body is not None and lac != info.explicit_lac_body:
                out.append((Code.DBINDEX_EXPLICIT_LAC_MISMATCH,
                            dict(where, detail=f"journal {lac.hex()}, index {info.explicit_lac_body.hex()}")))
    if all(_is_index(idx) for _di, _c, idx in _read(ctx)):   # else unknown, not missing
        journal = [x for x in sorted(facts.master_keys, key=lambda x: (x.scope, x.ledger)) if x.scope == 0]
        held = np.isin(np.array([_signed(x.ledger) for x in journal], np.int64),
                       np.concatenate(known) if known else np.zeros(0, np.int64))
        out += [(Code.DBINDEX_LEDGER_MISSING, dict(scope=0, ledger=x.ledger)) for x, h in zip(journal, held.tolist()) if not h]
    return out


def _signed(ledger: int) -> int:
    """A ledger id as the ledgers index keys it (LEDGERS_KEY: a signed big-endian long)."""
    return ledger - (1 << 64) if ledger >= 1 << 63 else ledger


def check_locations(ctx: CheckContext) -> Pairs:
    """Pass 5's place: each location against the entry the scan of that dir's entry log found there."""
    from fsck.passes.dbindex_join import cross_check as _cross_check
    out: Pairs = []
    for di, current, idx in _read(ctx):
        if _is_index(idx):
            out += _cross_check(ctx, di, current, idx, ctx.log_scans)
    return out


def check(ctx: CheckContext) -> Pairs:
    """Every DbLedgerStorage finding of the bookie, as (code, Finding fields), in pass order."""
    return check_databases(ctx) + check_ledgers(ctx) + check_locations(ctx)


def _findings(pairs: Pairs) -> Iterator:
    from fsck.findings import Finding
    for code, fields in pairs:
        yield Finding(code, **fields)


def run_databases(ctx: CheckContext) -> Iterator:
    return _findings(check_databases(ctx))


def run_ledgers(ctx: CheckContext) -> Iterator:
    return _findings(check_ledgers(ctx))


def run_locations(ctx: CheckContext) -> Iterator:
    return _findings(check_locations(ctx))


def run(ctx: CheckContext) -> Iterator:
    """The findings of ``check`` as Findings."""
    return _findings(check(ctx))


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


def bookkeeper_rebuilds(findings: list) -> list[tuple[str, list[str], list]]:
    """(BookKeeper command, database folders, findings) for the DBINDEX errors and warnings: what an
    operator runs, the bookie stopped, to rebuild a database bkdisk never writes. The ledgers index first:
    BookKeeper's locations rebuild keeps only the entries of ledgers the ledgers index holds."""
    by_db: dict[str, tuple[set[str], list]] = {}
    for f in findings:
        if f.code not in _REBUILT or f.severity == Severity.INFO:
            continue
        db, folder = database_of(f.path)
        folders, covers = by_db.setdefault(db, (set(), []))
        covers.append(f)
        if folder is not None:
            folders.add(folder)
    return [(REBUILD_COMMANDS[db], sorted(by_db[db][0]), by_db[db][1]) for db in (LEDGERS_DB, LOCATIONS_DB)
            if db in by_db]
