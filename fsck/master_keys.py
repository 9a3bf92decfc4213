"""A ledger whose master key in ledger storage is not the one its journal ledger-key record holds:
which side is damaged, and what the mismatch costs.

BookKeeper keeps SHA-1("ledger" + password) (formats.digests.master_key): the ledger's password in
metadata tells which key is the ledger's. A restart replays a ledger-key record after lastMark
(BookieImpl's replay re-inserts the key into storage, which refuses a different one, and the start
fails); one before lastMark no restart reads, so a damaged record there costs nothing, while a damaged
key in storage refuses every add made with the password.
"""
from __future__ import annotations

from bkdisk.formats.digests import master_key
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.context import CheckContext


def key_mismatch(ctx: CheckContext, lid: LedgerId, journal: bytes, stored: bytes) -> tuple[bool, str]:
    """(whether storage's key is the damaged one or the mismatch stops a restart, the finding's detail)."""
    replayed = lid in ctx.journal_facts.replayed_keys
    detail = f"journal {journal.hex()}, index {stored.hex()}"
    restart = "; a restart replays the journal's record and fails on the mismatch" if replayed else ""
    password = ctx.digest_plan.passwords.get((lid.scope, lid.ledger))
    if password is None:
        return True, f"{detail}; without the ledger's password in metadata, which one is damaged is unknown{restart}"
    ours = master_key(password)
    if ours == stored:
        where = "a restart replays it and fails on the mismatch" if replayed else \
            "it lies before lastMark and no restart reads it"
        return replayed, (f"{detail}; the index's is SHA-1('ledger' + the password in metadata): the journal's "
                          f"ledger-key record is the damaged one, and {where}")
    if ours == journal:
        return True, (f"{detail}; the journal's is SHA-1('ledger' + the password in metadata): the index's key is "
                      f"damaged, and storage refuses adds made with the password{restart}")
    return True, f"{detail}; neither is SHA-1('ledger' + the password in metadata){restart}"
