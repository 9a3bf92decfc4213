"""DbLedgerStorage's RocksDB indexes in fsck: the databases themselves (pass 2's place), the ledgers index
against the journal (pass 3's), every location against the scanned entry logs (pass 5's).

``check(ctx)`` returns (code, finding fields) pairs with codes from the one problem table
(fsck/problems.py); ``run(ctx)`` yields them as Findings. Nothing here writes: BookKeeper's
``rebuild-db-ledger-locations-index`` rebuilds.
"""
from __future__ import annotations

import os
from typing import Any, Iterator

from diskio.mapped import DiskError
from formats.dbledger import ENTRY_SIZE_FIELD
from formats.errors import FormatError
from formats.ids import LedgerId
from formats.paths import CURRENT_DIR
from fsck.context import CheckContext
from fsck.codes import (DBINDEX_BLOCK_CHECKSUM, DBINDEX_ENTRY_UNINDEXED, DBINDEX_EXPLICIT_LAC_MISMATCH, DBINDEX_LEDGER_MISSING, DBINDEX_LEDGER_UNKNOWN, DBINDEX_LOCATION_MISSING_LOG, DBINDEX_LOCATION_WRONG, DBINDEX_MASTER_KEY_MISMATCH, DBINDEX_NOT_FENCED, DBINDEX_SST_MISSING, DBINDEX_UNREADABLE, DBINDEX_WAL_TORN)
from rocksdbfiles.dbindex import LedgerDirIndex, ledgers_without_metadata, read_ledger_dir

REBUILD_HINT = "bookkeeper shell rebuild-db-ledger-locations-index (the bookie stopped)"
_READER_CODES = {"sst-checksum": DBINDEX_BLOCK_CHECKSUM, "sst-missing": DBINDEX_SST_MISSING,
                 "wal-torn-tail": DBINDEX_WAL_TORN}


def _key_text(k: bytes | None) -> str:
    return "start" if k is None else k.hex()


def _reader_findings(idx: LedgerDirIndex) -> Iterator[tuple[str, dict[str, Any]]]:
    for p in idx.problems:
        detail = p.detail
        if p.key_range is not None:
            detail += f"; keys {_key_text(p.key_range[0])} .. {_key_text(p.key_range[1])} unreadable"
        yield _READER_CODES.get(p.kind, DBINDEX_UNREADABLE), dict(path=p.path, offset=p.offset, detail=detail)


def check(ctx: CheckContext) -> list[tuple[str, dict[str, Any]]]:
    """Every DbLedgerStorage finding of the bookie, as (code, Finding fields)."""
    out: list[tuple[str, dict[str, Any]]] = []
    facts = ctx.journal_facts
    known: set[int] = set()
    scans = ctx.log_scans
    for di, d in enumerate(ctx.dirs.ledger_dirs):
        current = os.path.join(d, CURRENT_DIR)
        try:
            idx = read_ledger_dir(current)
        except FormatError as e:
            out.append((DBINDEX_UNREADABLE, dict(path=e.path, offset=e.offset, detail=f"{e.expected}, found {e.found}")))
            continue
        except DiskError as e:      # no CURRENT or MANIFEST, or one that cannot be read
            out.append((DBINDEX_UNREADABLE, dict(path=e.path, detail=e.what)))
            continue
        out += _reader_findings(idx)
        known |= set(idx.ledgers)
        for lid, n in sorted(ledgers_without_metadata(idx).items()):
            out.append((DBINDEX_LEDGER_UNKNOWN, dict(path=os.path.join(current, "ledgers"), scope=0, ledger=lid,
                                                       detail=f"none, with {n} locations in {current}/locations")))
        for lid, info in sorted(idx.ledgers.items()):
            ledger = LedgerId(0, lid)
            key = facts.master_keys.get(ledger)
            where = dict(path=os.path.join(current, "ledgers"), scope=0, ledger=lid)
            if key is not None and key != info.master_key:
                out.append((DBINDEX_MASTER_KEY_MISMATCH,
                            dict(where, detail=f"journal {key.hex()}, index {info.master_key.hex()}")))
            if facts.fenced.get(ledger) and not info.fenced:
                out.append((DBINDEX_NOT_FENCED, where))
            lac = facts.explicit_lac.get(ledger)
            if lac is not None and info.explicit_lac_body is not None and lac != info.explicit_lac_body:
                out.append((DBINDEX_EXPLICIT_LAC_MISMATCH,
                            dict(where, detail=f"journal {lac.hex()}, index {info.explicit_lac_body.hex()}")))
        out += _cross_check(ctx, di, current, idx, scans)
    for ledger in sorted(facts.master_keys, key=lambda x: (x.scope, x.ledger)):
        if ledger.scope == 0 and ledger.ledger not in known:
            out.append((DBINDEX_LEDGER_MISSING, dict(scope=0, ledger=ledger.ledger)))
    return out


def _cross_check(ctx: CheckContext, di: int, current: str, idx: LedgerDirIndex, scans) -> list:
    """Each location against the entry found at (its offset - 4) by the scan of that dir's log."""
    out = []
    logs = {lf.log_id: lf.path for lf in ctx.log_files if lf.dir_index == di}
    at: dict[tuple[int, int], tuple[int, int]] = {}
    for log_id, path in logs.items():
        scan = scans.get(path)
        if scan is None or isinstance(scan, Exception):
            continue
        e = scan.entries
        for off, lid, eid in zip(e["offset"].tolist(), e["ledger"].tolist(), e["entry"].tolist()):
            at[(log_id, off + ENTRY_SIZE_FIELD)] = (lid, eid)
    pointed = set()
    for loc in idx.locations:
        where = dict(path=os.path.join(current, "locations"), scope=0, ledger=loc.ledger_id, entry=loc.entry_id)
        if loc.log_id not in logs:
            out.append((DBINDEX_LOCATION_MISSING_LOG, dict(where, detail=f"{loc.log_id:x}.log")))
            continue
        found = at.get((loc.log_id, loc.offset))
        pointed.add((loc.log_id, loc.offset))
        if found != (loc.ledger_id, loc.entry_id):
            what = "no entry" if found is None else f"ledger {found[0]} entry {found[1]}"
            out.append((DBINDEX_LOCATION_WRONG, dict(where, detail=f"{logs[loc.log_id]} position {loc.offset}, "
                                                                        f"found {what} there; {REBUILD_HINT}")))
    for (log_id, pos), (lid, eid) in sorted(at.items()):
        if (log_id, pos) not in pointed:
            out.append((DBINDEX_ENTRY_UNINDEXED, dict(path=logs[log_id], offset=pos - ENTRY_SIZE_FIELD, scope=0,
                                                        ledger=lid, entry=eid)))
    return out


def run(ctx: CheckContext) -> Iterator:
    """The findings of ``check`` as Findings."""
    from fsck.findings import Finding
    for code, fields in check(ctx):
        yield Finding(code, **fields)
