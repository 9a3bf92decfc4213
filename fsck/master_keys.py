"""Master keys: storage's against the journal's ledger-key records, and the records a restart replays
against the ledger's password.

BookKeeper keeps SHA-1("ledger" + password) (formats.digests.master_key): the ledger's password in
metadata tells which key is the ledger's. A restart replays the ledger-key records after lastMark
(BookieImpl's replay): the first makes the ledger's handle with its key, and a later record of another
key is refused (HandleFactoryImpl.getHandle's checkAccess), which stops the start. What storage does with
a key differs by kind: DbLedgerStorage keeps a key once set and refuses another (LedgerMetadataIndex
.setMasterKey; an empty or all-zero stored key counts as unset, as BookKeeper's own ledgers-index
rebuild leaves it), so a replayed record of another key stops the start and a damaged stored key refuses
every add; index files never compare keys (IndexPersistenceMgr), so a wrong key costs only where a handle
is made from it (a replayed record; a fence or explicit LAC replayed without a key record takes the
index's), and then refuses adds made with the password until the bookie restarts. Which key the handle
takes follows the replay's order: the ledger's first record replayed, a ledger-key record (its key) or a
fence, explicit LAC or entry (the key storage holds); a key record of another key after that stops the start.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import numpy as np

from bkdisk.diskio.distinct import distinct, members
from bkdisk.formats.digests import master_key
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import RecordKind
from bkdisk.fsck import replay_fate
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding
from bkdisk.journal.arrays import JournalArrays
from bkdisk.journal.scan_parts import record_parts

_FROM_PASSWORD = "SHA-1('ledger' + the password in metadata)"


def key_unset(ctx: CheckContext, stored: bytes) -> bool:
    """A stored key DbLedgerStorage replaces with the next one given (empty, or all zeros)."""
    return ctx.dirs.storage_kind == "rocksdb" and not any(stored)


def _replay_cost(db: bool, key: bytes, first: tuple[int, str, int] | None = None, known: bool = True) -> str:
    """What replaying a ledger-key record of ``key`` that is not the ledger's (``known``: or may not be, the
    password unknown), nor the key storage holds, does on a restart; ``first``: the ledger's first record the
    replay meets (_first_replayed), when known."""
    if not db and first is not None:
        if first[0] != _KEY:
            return _start_fails(first)
        return ("a restart replays it before any other record of the ledger: the handle takes its key and refuses "
                + ("adds made with the password" if known else "adds made with any other key")
                + " until the bookie restarts")
    if not any(key):
        return ("a restart replays it: the ledger's handle takes it (storage ignores an all-zero key) and refuses "
                "adds made with the password until the bookie restarts")
    if db:
        return ("a restart replays it: DbLedgerStorage refuses a key other than the one it holds, and the start "
                "fails; holding none for the ledger yet, it keeps this one and refuses adds made with the password")
    return ("a restart replays it: the ledger's handle takes the first key the replay meets for the ledger (this "
            "record's, or the index's for a fence, explicit LAC or entry before it) and refuses the other: the "
            "start fails, or adds made with the password are refused until the bookie restarts")


def key_mismatch(ctx: CheckContext, lid: LedgerId, journal: bytes, stored: bytes) -> tuple[bool | None, str]:
    """Storage's key ``stored`` differs from the journal's ``journal``: (an error, rather than a damaged
    record no restart reads, or None when the damaged record is one a restart replays, which
    ``replayed_key_findings`` reports; the finding's detail)."""
    db = ctx.dirs.storage_kind == "rocksdb"
    replayed = _replay_reaches(ctx, lid)
    detail = f"journal {journal.hex()}, index {stored.hex()}"
    password = ctx.digest_plan.passwords.get((lid.scope, lid.ledger))
    if password is None:
        restart = f"; {_replay_cost(db, journal, _first_replayed(ctx).get(lid), known=False)}" if replayed else ""
        return True, f"{detail}; without the ledger's password in metadata, which one is damaged is unknown{restart}"
    ours = master_key(password)
    if ours == stored:
        if not replayed:
            return False, (f"{detail}; the index's is {_FROM_PASSWORD}: the journal's ledger-key record is the "
                           f"damaged one, and {_unread(ctx, lid)}")
        return None, ""
    if ours == journal:
        if db:
            cost = ("DbLedgerStorage refuses adds made with the password, and the journal's key when a restart "
                    "replays it: the start fails" if replayed else
                    "DbLedgerStorage refuses adds made with the password")
        elif not replayed:
            cost = ("a handle made from it (a fence, explicit LAC or entry replayed before any key record of the "
                    "ledger) refuses adds made with the password until the bookie restarts")
        else:
            first = _first_replayed(ctx).get(lid)
            cost = (_start_fails(first) if first is not None and first[0] != _KEY else
                    "a restart replays the journal's ledger-key record before any other record of the ledger: the "
                    "handle takes its key and adds made with the password are accepted, until a restart from a "
                    "lastMark past that record makes the handle from the index's key, which refuses them")
        return True, f"{detail}; the journal's is {_FROM_PASSWORD}: the index's key is damaged, and {cost}"
    restart = f"; {_replay_cost(db, journal, _first_replayed(ctx).get(lid))}" if replayed else ""
    return True, f"{detail}; neither is {_FROM_PASSWORD}{restart}"


def _replay_reaches(ctx: CheckContext, lid: LedgerId) -> bool:
    """Whether a restart replays a ledger-key record of ``lid``: one lies after lastMark, in a journal dir
    the replay reads before it stops (replay_fate.replay_stop: a dir whose marked journal is missing)."""
    return lid in ctx.journal_facts.replayed_keys and any(
        replay_fate.replay_reads(ctx, p) for p, _o in ctx.journal_facts.replayed_key_at[lid])


def _reached_keys(ctx: CheckContext) -> Iterator[tuple[LedgerId, list[bytes], list[tuple[str, int]]]]:
    """Per ledger, in id order, the distinct keys of its ledger-key records a restart replays and where each
    is first met: those after lastMark, in the journal dirs read before the replay stops."""
    facts = ctx.journal_facts
    for lid, keys in sorted(facts.replayed_keys.items()):
        kept = [(k, w) for k, w in zip(keys, facts.replayed_key_at[lid]) if replay_fate.replay_reads(ctx, w[0])]
        if kept:
            yield lid, [k for k, _w in kept], [w for _k, w in kept]


def _unread(ctx: CheckContext, lid: LedgerId) -> str:
    """Why no restart reads the ledger's ledger-key record."""
    stop = replay_fate.replay_stop(ctx)
    if stop is None or lid not in ctx.journal_facts.replayed_keys:
        return "it lies before lastMark, where no restart reads it"
    return (f"no restart reads it: the replay stops at journal dir {ctx.dirs.journal_dirs[stop[0]]}, whose lastMark "
            f"names {stop[1]}, which it lacks, before reaching it")


def _start_fails(first: tuple[int, str, int]) -> str:
    """The replay meeting ``first`` (kind, journal path, offset: a fence, explicit LAC or entry) before any
    ledger-key record of the ledger."""
    kind, path, offset = first
    return (f"a restart replays the ledger's {_KIND_NAMES[kind]} record ({os.path.basename(path)} offset {offset}) "
            "before its ledger-key record: the handle is made from the index's key and refuses the record's, "
            "and the start fails")


_KEY = int(RecordKind.LEDGER_KEY)
# The records whose replay makes a ledger's handle (BookieImpl's replay skips the other meta records).
_HANDLE_KINDS = np.array([int(k) for k in (RecordKind.DATA, RecordKind.LEDGER_KEY, RecordKind.FENCE,
                                           RecordKind.EXPLICIT_LAC)], np.uint8)
_KIND_NAMES = {int(RecordKind.DATA): "entry", int(RecordKind.FENCE): "fence",
               int(RecordKind.EXPLICIT_LAC): "explicit-LAC", _KEY: "ledger-key"}
FIRST_REPLAYED = "first_replayed_records"   # ctx.shared's name for _first_replayed's table


def _first_replayed(ctx: CheckContext) -> dict[LedgerId, tuple[int, str, int]]:
    """Per ledger with ledger-key records after lastMark, its first record a restart replays that makes its
    handle (kind, journal path, record offset): the journal dirs in turn, each one's journals and records in
    order, from lastMark. One pass over the records, made only when a stored key differs from one replayed."""
    return ctx.shared(FIRST_REPLAYED, lambda: _first_replayed_records(ctx))


def _first_replayed_records(ctx: CheckContext) -> dict[LedgerId, tuple[int, str, int]]:
    asked = ctx.journal_facts.replayed_keys
    ledgers = distinct(np.array([lid.ledger for lid in asked], np.uint64))
    out: dict[LedgerId, tuple[int, str, int]] = {}
    for jf in sorted(ctx.journal_files, key=lambda j: (j.dir_index, j.journal_id)):
        scan, mark = ctx.journal_scans.get(jf.path), ctx.effective_last_mark(jf.dir_index)
        if not replay_fate.replay_reads(ctx, jf.path):
            break   # (the replay ends there)
        if not isinstance(scan, JournalArrays) or (mark is not None and jf.journal_id < mark.log_id):
            continue
        for _lo, recs, _facts in record_parts(scan):
            if mark is not None and jf.journal_id == mark.log_id:
                recs = recs[recs["offset"] >= mark.offset]
            recs = recs[members(recs["kind"], _HANDLE_KINDS) & members(recs["ledger"], ledgers)]
            for s, l, k, o in zip(recs["scope"].tolist(), recs["ledger"].tolist(), recs["kind"].tolist(),
                                  recs["offset"].tolist()):
                lid = LedgerId(s, l)
                if lid in asked and lid not in out:
                    out[lid] = (k, jf.path, o)
    return out


def replayed_key_findings(ctx: CheckContext) -> Iterator[Finding]:
    """Ledger-key records after lastMark: of two keys for one ledger, or not the password's key.
    The finding points at the record of the key a restart refuses (the second), or of the bad key."""
    db = ctx.dirs.storage_kind == "rocksdb"
    for lid, keys, at in _reached_keys(ctx):
        password = ctx.digest_plan.passwords.get((lid.scope, lid.ledger))
        if len(keys) > 1:
            ours = master_key(password) if password is not None else None
            mark = "; the password's"
            listed = ", ".join(f"{k.hex()} (first at {os.path.basename(p)} offset {o}{mark if k == ours else ''})"
                               for k, (p, o) in zip(keys, at))
            yield Finding(Code.JOURNAL_REPLAYED_KEYS_DIFFER, path=at[1][0], offset=at[1][1], scope=lid.scope,
                          ledger=lid.ledger, detail=f"{len(keys)} keys: {listed}")
            continue
        if password is None or keys[0] == master_key(password):
            continue
        yield Finding(Code.JOURNAL_REPLAYED_KEY_BAD, path=at[0][0], offset=at[0][1], scope=lid.scope,
                      ledger=lid.ledger, detail=f"{keys[0].hex()}, not {master_key(password).hex()} "
                                                f"({_FROM_PASSWORD}); {_replay_cost(db, keys[0])}")


def at_journal_records(ctx: CheckContext, found: Iterable[Finding]) -> list[Finding]:
    """``found`` with each JOURNAL_MASTER_KEY_BAD pointed at the damaged record: the ledger's last
    ledger-key record (the key the journal facts hold), found in one pass over the journals' records
    (there are any such findings only when a key record is damaged); the index's place in its detail."""
    out = list(found)
    want = {LedgerId(f.scope or 0, (f.ledger or 0) % (1 << 64)): f   # (DbLedgerStorage's ids are signed)
            for f in out if f.code == Code.JOURNAL_MASTER_KEY_BAD}
    if not want:
        return out
    ledgers = distinct(np.array([lid.ledger for lid in want], np.uint64))
    places: dict[LedgerId, tuple[str, int]] = {}
    for jf in ctx.journal_files:   # (in journal order: the last record met is the key the facts hold)
        scan = ctx.journal_scans.get(jf.path)
        if not isinstance(scan, JournalArrays):
            continue
        for _lo, recs, _facts in record_parts(scan):
            keyed = recs[recs["kind"] == int(RecordKind.LEDGER_KEY)]
            keyed = keyed[members(keyed["ledger"], ledgers)]
            for s, l, o in zip(keyed["scope"].tolist(), keyed["ledger"].tolist(), keyed["offset"].tolist()):
                places[LedgerId(s, l)] = (jf.path, o)
    for lid, f in want.items():
        if lid in places:
            index = f"{f.path} offset {f.offset}" if f.offset is not None else f"{f.path}"
            f.path, f.offset = places[lid]
            f.detail = f"{f.detail} (the index: {index})"
    return out
