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
index's), and then refuses adds made with the password until the bookie restarts.
"""
from __future__ import annotations

from collections.abc import Iterator

from bkdisk.formats.digests import master_key
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding

_FROM_PASSWORD = "SHA-1('ledger' + the password in metadata)"


def key_unset(ctx: CheckContext, stored: bytes) -> bool:
    """A stored key DbLedgerStorage replaces with the next one given (empty, or all zeros)."""
    return ctx.dirs.storage_kind == "rocksdb" and not any(stored)


def key_mismatch(ctx: CheckContext, lid: LedgerId, journal: bytes, stored: bytes) -> tuple[bool | None, str]:
    """Storage's key ``stored`` differs from the journal's ``journal``: (an error, rather than a damaged
    record no restart reads, or None when the damaged record is one a restart replays, which
    ``replayed_key_findings`` reports; the finding's detail)."""
    db = ctx.dirs.storage_kind == "rocksdb"
    replayed = lid in ctx.journal_facts.replayed_keys
    detail = f"journal {journal.hex()}, index {stored.hex()}"
    restart = ""
    if replayed:
        restart = ("; a restart replays the journal's record, and storage refuses its key: the start fails" if db else
                   "; a restart replays the journal's record: the ledger's handle takes its key")
    password = ctx.digest_plan.passwords.get((lid.scope, lid.ledger))
    if password is None:
        return True, f"{detail}; without the ledger's password in metadata, which one is damaged is unknown{restart}"
    ours = master_key(password)
    if ours == stored:
        if not replayed:
            return False, (f"{detail}; the index's is {_FROM_PASSWORD}: the journal's ledger-key record is the "
                           "damaged one, and it lies before lastMark, where no restart reads it")
        return None, ""
    if ours == journal:
        cost = ("DbLedgerStorage refuses adds made with the password" if db else
                "a handle made from it (a fence or explicit LAC replayed without a key record) refuses adds made "
                "with the password until the bookie restarts")
        return True, f"{detail}; the journal's is {_FROM_PASSWORD}: the index's key is damaged, and {cost}"
    return True, f"{detail}; neither is {_FROM_PASSWORD}{restart}"


def replayed_key_findings(ctx: CheckContext) -> Iterator[Finding]:
    """Ledger-key records after lastMark: of two keys for one ledger, or not the password's key."""
    db = ctx.dirs.storage_kind == "rocksdb"
    for lid, keys in sorted(ctx.journal_facts.replayed_keys.items()):
        if len(keys) > 1:
            yield Finding(Code.JOURNAL_REPLAYED_KEYS_DIFFER, scope=lid.scope, ledger=lid.ledger,
                          detail=f"{len(keys)} keys: {', '.join(k.hex() for k in keys)}")
            continue
        password = ctx.digest_plan.passwords.get((lid.scope, lid.ledger))
        if password is None or keys[0] == master_key(password):
            continue
        cost = ("storage keeps it, and refuses adds made with the password" if db else
                "the ledger's handle takes it, and refuses adds made with the password until the bookie restarts")
        yield Finding(Code.JOURNAL_REPLAYED_KEY_BAD, scope=lid.scope, ledger=lid.ledger,
                      detail=f"{keys[0].hex()}, not {master_key(password).hex()} ({_FROM_PASSWORD}); a restart "
                             f"replays it: {cost}")
