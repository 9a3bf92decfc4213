"""A folder of ledger metadata files serialized as BookKeeper does, one per ledger, and the digest
plan (type and password per ledger) it gives the scanners."""
from __future__ import annotations

import os

from diskio.mapped import DiskError, read_bytes
from formats.errors import FormatError
from formats.ids import LedgerId
from formats.metadata import LedgerMetadata, parse_metadata

# Preference when a ledger has several files: the binary format first, as BookKeeper writes today.
_SUFFIXES = (".bin", ".txt", ".v1.txt")


def ledger_of_file(name: str) -> tuple[LedgerId, int] | None:
    """(ledger, preference rank) a metadata file name stands for, or None."""
    for rank, suf in reversed(list(enumerate(_SUFFIXES))):
        if name.endswith(suf):
            stem = name[: -len(suf)]
            if not stem or len(stem) > 32 or any(c not in "0123456789abcdef" for c in stem):
                return None
            if len(stem) == 32:
                return LedgerId.from_qualified_name(stem), rank
            value = int(stem, 16)
            # 17 to 31 digits above 2^64 - 1 name no ledger (scoped ledgers take all 32 digits)
            return (LedgerId(0, value), rank) if value >> 64 == 0 else None
    return None


def load_metadata_dir(folder: str) -> tuple[dict[LedgerId, LedgerMetadata], list[FormatError | DiskError]]:
    """Parse every metadata file in ``folder``; unreadable files come back as errors, not exceptions."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        raise DiskError(folder, f"cannot list the metadata folder ({e.strerror})") from None
    best: dict[LedgerId, tuple[int, str]] = {}
    for n in names:
        got = ledger_of_file(n)
        if got is None:
            continue
        lid, rank = got
        if lid not in best or rank < best[lid][0]:
            best[lid] = (rank, n)
    out: dict[LedgerId, LedgerMetadata] = {}
    errors: list[FormatError | DiskError] = []
    for lid, (_rank, n) in sorted(best.items()):
        p = os.path.join(folder, n)
        try:
            out[lid] = parse_metadata(read_bytes(p), path=p)
        except (FormatError, DiskError) as e:
            errors.append(e)
    return out, errors


def digest_plan(md: dict[LedgerId, LedgerMetadata]):
    """The scanners' DigestPlan: digest type and password per ledger where the metadata has them;
    the scanner sniffs the rest."""
    from entrylogs.scan import DigestPlan
    from formats.digests import DigestType
    known = {tuple(lid): DigestType.parse(m.digest_type) for lid, m in md.items() if m.digest_type is not None}
    passwords = {tuple(lid): m.password for lid, m in md.items() if m.password is not None}
    return DigestPlan(known=known, passwords=passwords)
