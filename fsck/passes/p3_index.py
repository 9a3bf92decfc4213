"""Pass 3: index files: header, master key and fenced state against the journal, explicit LAC,
locations inside existing entry logs; on a DbLedgerStorage bookie, its ledgers index against the
journal in this pass's place."""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import numpy as np

from bkdisk.diskio.config import free_heap_returned
from bkdisk.diskio.distinct import distinct, members
from bkdisk.diskio.mapped import DiskError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import KEY_OFFSET, slot_offset
from bkdisk.formats.paths import LEDGERS_DB, LOCATIONS_DB, entry_log_name
from bkdisk.fsck import dbindex
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.explicit_lacs import lac_mismatch, stored_lac_fault
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.keyjoin import ledger_set
from bkdisk.fsck.master_keys import at_journal_records, key_mismatch, key_unset
from bkdisk.fsck.placed_locations import PlacedCheck
from bkdisk.fsck.placed_locations import log_sizes as placed_log_sizes
from bkdisk.indexfiles.row_objects import HeaderColumn
from bkdisk.journal.ledger_keys import LedgerKeys

CHUNK = 1 << 20   # locations checked at once
BLOCK = 65536     # index files checked at once


def run(ctx: CheckContext) -> Iterable[Finding]:
    free_heap_returned()   # (what the passes before freed: this pass's peak would stand on it)
    found = dbindex.findings(check_ledgers(ctx)) if ctx.dirs.storage_kind == "rocksdb" else _index_files(ctx)
    return at_journal_records(ctx, found)


def _index_files(ctx: CheckContext) -> Iterator[Finding]:
    inv = ctx.index_inventory
    facts = ctx.journal_facts
    log_sizes = placed_log_sizes(ctx.log_files)
    keys, fenced = facts.master_keys, facts.fenced
    files = inv.files
    for r, key in _rows_to_check(inv, keys, fenced):
        path, err, h = inv.paths[r], inv.errors[r], inv.headers[r]
        row = files[r]
        scope, ledger, trailing, size = int(row["scope"]), int(row["ledger"]), int(row["trailing"]), int(row["size"])
        if err is not None:
            if isinstance(err, DiskError):
                if path not in ctx.unreadable:
                    yield Finding(Code.FILE_UNREADABLE, path=path, detail=err.what)
                continue
            yield Finding(Code.INDEX_HEADER_BAD, path=path, offset=err.offset, scope=scope, ledger=ledger,
                          detail=f"{err.expected}, found {err.found}")
            continue
        assert h is not None   # (a file without a valid header has its error)
        if trailing:
            yield Finding(Code.INDEX_TRUNCATED, path=path, offset=size - trailing, scope=scope, ledger=ledger,
                          detail=f"{trailing} stray bytes at the end (file size {size})")
        lid = LedgerId(scope, ledger)
        if key is not None and key != h.master_key:
            bad, detail = key_mismatch(ctx, LedgerId(scope, ledger), key, h.master_key)
            if bad is not None:
                yield Finding(Code.INDEX_MASTER_KEY_MISMATCH if bad else Code.JOURNAL_MASTER_KEY_BAD, path=path,
                              offset=KEY_OFFSET, scope=scope, ledger=ledger, detail=detail)
        if fenced.get(lid) and not h.fenced:
            yield Finding(Code.INDEX_NOT_FENCED, path=path, offset=KEY_OFFSET + len(h.master_key), scope=scope,
                          ledger=ledger)
        body = h.explicit_lac_body
        fault = None if body is None else stored_lac_fault(ctx, lid, body)
        if fault is not None:
            yield Finding(Code.INDEX_EXPLICIT_LAC_BAD, path=path, scope=scope, ledger=ledger, detail=fault)
    if ctx.per_dir_log_ids:
        return
    locs = inv.locations
    if len(locs) == 0:
        return
    missing, past = _misplaced(locs, log_sizes)
    for row in missing:
        log_id = int(row["loc"]["log"])
        yield _loc_finding(inv, row["loc"], Code.INDEX_LOCATION_MISSING_LOG, entry_log_name(log_id), {"log_id": log_id})
    for row in past:
        loc = row["loc"]
        lf = int(loc["log"])
        yield _loc_finding(inv, loc, Code.INDEX_LOCATION_OUT_OF_RANGE,
                           f"{lf:x}.log (position {int(loc['pos'])}, log size {log_sizes[lf]})")


def _misplaced(locs, sizes: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """PlacedCheck.found of every location: as the walk spilled them (its tap), when that saw them all
    against these logs; else a chunk at a time here (a chunk read back at a time, if they spilled)."""
    tap = getattr(locs, "tap", None)
    if isinstance(tap, PlacedCheck) and tap.rows == len(locs) and tap.sizes == sizes:
        return tap.found()
    return _read_and_placed(locs, sizes)


def _read_and_placed(locs, sizes: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    check = PlacedCheck(sizes)
    for k0 in range(0, len(locs), CHUNK):
        check.add(k0, locs[k0:k0 + CHUNK])
    return check.found()


def _rows_to_check(inv, keys: LedgerKeys, fenced: dict[LedgerId, bool]) -> Iterator[tuple[int, bytes | None]]:
    """(row, the journals' master key or None) of each index file that may give a finding, in row
    order: found with arrays a block of rows at a time (no Python object per file kept or made for a
    file without a finding); the checks themselves then run on these rows only."""
    files = inv.files
    headers = inv.headers
    by_id = isinstance(headers, HeaderColumn)
    if by_id:   # per distinct header: what its rows may give
        # (a row without a header has id -1: the last, False)
        lac = np.array([h.explicit_lac_body is not None for h in headers.distinct] + [False], bool)
        ids = headers.id_column()
    fenced_set = ledger_set(lid for lid, f in fenced.items() if f)
    for lo in range(0, len(files), BLOCK):
        block = files[lo:lo + BLOCK]
        cols = [block["scope"], block["ledger"]]
        at = keys.index_of(*cols)
        if not by_id:
            look = np.ones(len(block), bool)
        else:
            hid = ids[lo:lo + len(block)]
            look = ~block["header_ok"] | (block["trailing"] != 0) | lac[hid] | fenced_set.contains(cols)
            look |= _key_differs(headers, hid, keys, at)
        for k in np.flatnonzero(look).tolist():
            yield lo + k, (keys.key_at(int(at[k])) if at[k] >= 0 else None)


def _key_differs(headers: HeaderColumn, hid: np.ndarray, keys: LedgerKeys, at: np.ndarray) -> np.ndarray:
    """Per row, whether its header's master key differs from the journals' (rows with both), compared
    once per distinct (header, key) pair."""
    both = (hid >= 0) & (at >= 0)
    out = np.zeros(len(hid), bool)
    if not both.any():
        return out
    # (header id, key id) as one number: a column of pairs is sorted far faster than pairs as rows
    kid = keys.key_ids(at[both]).astype(np.int64)
    width = max(int(kid.max()) + 1, 1)
    pairs, inverse = np.unique(hid[both].astype(np.int64) * width + kid, return_inverse=True)
    differs = np.array([headers.distinct[p // width].master_key != keys.distinct[p % width] for p in pairs.tolist()],
                       bool)
    out[both] = differs[inverse.reshape(-1)]
    return out


def _loc_finding(inv, loc, code: Code, detail: str, extra: dict | None = None) -> Finding:
    f = int(loc["file"])
    row = inv.files[f]
    entry = int(loc["entry"])
    return Finding(code, path=inv.paths[f], offset=slot_offset(entry), scope=int(row["scope"]),
                   ledger=int(row["ledger"]), entry=entry, detail=detail, extra=extra or {})


# A file of the database the system would not let the check read (not one missing or damaged: those
# lose what they held, and the ledgers index then lacks it).
_UNREAD = ("sst-unreadable", "wal-unreadable")


def check_ledgers(ctx: CheckContext) -> dbindex.Pairs:
    """DbLedgerStorage: the ledgers index against the locations and the journal's meta records (only the
    ledgers the journal speaks of are looked up, and those holding an explicit LAC: no step per ledger of
    the index)."""
    from bkdisk.rocksdbfiles.dbindex import explicit_lac_infos as stored_lacs
    from bkdisk.rocksdbfiles.dbindex import ledger_ids, ledger_infos, ledgers_without_metadata, same_master_keys
    out: dbindex.Pairs = []
    facts = ctx.journal_facts
    scopes, ids = facts.master_keys.columns()          # (sorted by scope, then ledger)
    keyed = ids[scopes == 0]
    others = np.array([x.ledger for x in (*facts.fenced, *facts.explicit_lac) if x.scope == 0], np.uint64)
    told_ids = distinct(np.concatenate([keyed, others]))
    told_ids = told_ids[np.argsort(told_ids.view(np.int64), kind="stable")]   # in the index's (signed) order
    told = told_ids.tolist()
    known: list[np.ndarray] = []
    # Looked up for all the told ledgers at once (a lookup each costs tens of numpy calls)
    mk = facts.master_keys
    key_rows = mk.index_of(np.zeros(len(told), np.uint64), told_ids)
    key_of = np.full(len(told), -1, np.int64)   # (per told ledger: its key among mk.distinct)
    key_of[key_rows >= 0] = mk.key_of[key_rows[key_rows >= 0]]
    # Beyond the master keys, only ledgers the journal says were fenced or given an explicit LAC are
    # compared: the rest need no LedgerInfo of theirs parsed when the index holds the journal's key.
    said = [x.ledger for x, v in facts.fenced.items() if v and x.scope == 0]
    said += [x.ledger for x, v in facts.explicit_lac.items() if v is not None and x.scope == 0]
    said_of = members(told_ids, distinct(np.array(said, np.uint64)))
    unread = False   # a ledgers index with a file it could not read: a ledger not found may be in it
    compared: set[int] = set()   # ledgers whose stored explicit LAC differs from the journal's (said there)
    for _di, current, idx in dbindex.read(ctx):
        if not dbindex.is_index(idx):
            continue
        known.append(ledger_ids(idx))
        ledgers_db = os.path.join(current, LEDGERS_DB)
        damaged = any(dbindex.database_of(p.path)[0] == LEDGERS_DB and p.kind in _UNREAD for p in idx.problems)
        unread |= damaged
        for lid, n in sorted(ledgers_without_metadata(idx).items()) if not damaged else ():
            out.append((Code.DBINDEX_LEDGER_UNKNOWN, dict(path=ledgers_db, scope=0, ledger=lid,
                                                       detail=f"none, with {n} locations in {current}/{LOCATIONS_DB}")))
        signed_ids = told_ids.view(np.int64)   # the index keys ids as signed longs
        look = np.flatnonzero(said_of | ((key_of >= 0) & ~same_master_keys(idx, signed_ids, key_of, mk.distinct)))
        infos = ledger_infos(idx, signed_ids[look])
        for i, info in zip(look.tolist(), infos):
            if info is None:
                continue
            x, key_row = told[i], int(key_rows[i])
            lid = dbindex.signed(x)
            ledger = LedgerId(0, x)
            key = mk.key_at(key_row) if key_row >= 0 else None
            where = dict(path=ledgers_db, scope=0, ledger=lid)
            if key is not None and key != info.master_key and not key_unset(ctx, info.master_key):
                bad, detail = key_mismatch(ctx, ledger, key, info.master_key)
                if bad is not None:
                    out.append((Code.DBINDEX_MASTER_KEY_MISMATCH if bad else Code.JOURNAL_MASTER_KEY_BAD,
                                dict(where, detail=detail)))
            if facts.fenced.get(ledger) and not info.fenced:
                out.append((Code.DBINDEX_NOT_FENCED, where))
            lac = facts.explicit_lac.get(ledger)
            if lac is not None and info.explicit_lac_body is not None and lac != info.explicit_lac_body:
                bad, detail = lac_mismatch(ctx, ledger, lac, info.explicit_lac_body)
                out.append((Code.DBINDEX_EXPLICIT_LAC_MISMATCH if bad else Code.JOURNAL_EXPLICIT_LAC_BAD,
                            dict(where, detail=detail)))
                compared.add(x)
        for info in stored_lacs(idx):   # (every body storage holds; those compared above said once)
            x = info.ledger_id % (1 << 64)
            fault = None if x in compared else stored_lac_fault(ctx, LedgerId(0, x), info.explicit_lac_body or b"")
            if fault is not None:
                out.append((Code.DBINDEX_EXPLICIT_LAC_BAD,
                            dict(path=ledgers_db, scope=0, ledger=dbindex.signed(x), detail=fault)))
    if not unread and all(dbindex.is_index(idx) for _di, _c, idx in dbindex.read(ctx)):   # else unknown
        held = members(keyed.view(np.int64), distinct(np.concatenate(known)) if known else np.zeros(0, np.int64))
        # A ledger keyed after lastMark is one the replay adds (setMasterKey): a crash before the checkpoint.
        replayed = facts.replayed_keys
        out += [(Code.DBINDEX_LEDGER_MISSING, dict(scope=0, ledger=x)) for x in keyed[~held].tolist()
                if LedgerId(0, x) not in replayed]
    return out
