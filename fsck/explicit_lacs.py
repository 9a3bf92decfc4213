"""Explicit LACs: the body a client sends (its ledger id, its LAC, then a digest over those 16 bytes made
with the ledger's digest type, DigestManager.computeDigestAndPackageForSendingLac) tells a damaged body
from a good one. A restart replays the explicit-LAC records after lastMark into storage (BookieImpl's
replay, setExplicitLac), so a damaged one there reaches every client that reads the ledger's LAC from
this bookie; one before lastMark no restart reads.
"""
from __future__ import annotations

from collections.abc import Iterator

from bkdisk.formats import journal as fj
from bkdisk.formats.codec import field_offsets
from bkdisk.formats.digests import DigestType, compute_digest
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import LAC_BODY_MIN
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding

COVERED = field_offsets(fj.LAC_BODY)["digest"]   # the digest covers the body's ledger id and LAC


def lac_digest_ok(ctx: CheckContext, lid: LedgerId, body: bytes) -> bool | None:
    """Whether ``body``'s digest verifies with the ledger's digest type in metadata; None when metadata
    does not give it (or, for HMAC, the password), or for a scoped ledger."""
    key = (lid.scope, lid.ledger)
    known = ctx.digest_plan.known.get(key)
    if known is None or lid.scope:
        return None
    dtype = DigestType(int(known))
    password = ctx.digest_plan.passwords.get(key)
    if dtype == DigestType.HMAC and password is None:
        return None
    # As DigestManager.verifyDigestAndReturnLac: the body's own ledger id, then as many digest bytes as the
    # type makes (bytes after them are not read).
    if len(body) < COVERED + dtype.length:
        return False
    parsed = fj.LAC_BODY.parse(body)
    return parsed.ledger_id == lid.ledger and \
        compute_digest(dtype, body[:COVERED], password=password) == parsed.digest[:dtype.length]


def stored_lac_fault(ctx: CheckContext, lid: LedgerId, body: bytes) -> str | None:
    """What is wrong with the explicit-LAC body ledger storage holds for ``lid``; None when nothing the
    check can tell is."""
    if len(body) < LAC_BODY_MIN:
        return f"at least {LAC_BODY_MIN} bytes, found {len(body)}"
    ledger = fj.LAC_BODY.parse(body).ledger_id
    if ledger != lid.ledger:
        return f"ledger id {lid.ledger} in the body, found {ledger}"
    if lac_digest_ok(ctx, lid, body) is False:
        return (f"a digest that verifies with the ledger's digest type in metadata, found {body.hex()}: a client "
                "reading the ledger's LAC from this bookie gets it")
    return None


def replayed_lac_findings(ctx: CheckContext) -> Iterator[Finding]:
    """Explicit-LAC records after lastMark whose digest does not verify."""
    from bkdisk.fsck.replay_fate import entries_replay_skips
    facts = ctx.journal_facts
    for lid, body in sorted(facts.replayed_lacs.items()):
        if lac_digest_ok(ctx, lid, body) is False:
            path, offset = facts.replayed_lac_at[lid]
            if (path, offset) in (entries_replay_skips(ctx, [(path, offset, lid, -1)]) or ()):
                continue   # (no key for it when the replay meets it: skipped as a deleted ledger's, as its entries)
            yield Finding(Code.JOURNAL_REPLAYED_LAC_BAD, path=path, offset=offset, scope=lid.scope, ledger=lid.ledger,
                          detail=body.hex())


def lac_mismatch(ctx: CheckContext, lid: LedgerId, journal: bytes, stored: bytes) -> tuple[bool, str]:
    """Storage's explicit LAC ``stored`` differs from the one the journal recorded before lastMark: (an
    error, rather than a damaged record no restart reads; the finding's detail)."""
    detail = f"journal {journal.hex()}, index {stored.hex()}"
    ours, theirs = lac_digest_ok(ctx, lid, journal), lac_digest_ok(ctx, lid, stored)
    if ours is False and theirs:
        return False, (f"{detail}; the journal's fails its digest and the index's verifies: the journal's record "
                       "is the damaged one, and it lies before lastMark, where no restart reads it")
    if theirs is False:
        return True, f"{detail}; the index's fails its digest: the index's is damaged"
    return True, detail
