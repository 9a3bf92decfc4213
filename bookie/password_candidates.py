"""Ledger passwords tried against the master keys bookies keep: a candidates file read as text, one
password a line, and the match of a master key against them (the empty password always first).

A bookie stores only the master key SHA-1("ledger" + password) (formats.digests.master_key, as
BookKeeper's DigestManager.generateMasterKey): a password is known when its master key is equal.
"""
from __future__ import annotations

from collections.abc import Iterable

from bkdisk.formats.digests import master_key as key_of
from bkdisk.formats.errors import BkdiskError

EMPTY_PASSWORD = b""


class CandidatesError(BkdiskError):
    """A password candidates file that cannot be read as text (the command exits 8)."""


def read_candidates(path: str) -> list[bytes]:
    """The passwords of ``path``, one a line (UTF-8, ``\\n`` or ``\\r\\n``; a line is the password as
    written, spaces kept; blank lines skipped, the empty password being tried always), each once, in
    file order. Raises CandidatesError, one line, for a file that cannot be read or is not text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CandidatesError(f"{path}: cannot read the password candidates file ({e.strerror})") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise CandidatesError(f"{path}: offset {nul}: expected a text file of passwords, one a line, "
                              "found a NUL byte")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CandidatesError(f"{path}: offset {e.start}: expected a text file of passwords (UTF-8), "
                              f"found byte {data[e.start]:02x}") from None
    out: dict[bytes, None] = {}
    for line in data.split(b"\n"):
        line = line[:-1] if line.endswith(b"\r") else line
        if line:
            out.setdefault(line, None)
    return list(out)


def match_password(master_key: bytes, candidates: Iterable[bytes]) -> bytes | None:
    """The password whose master key is ``master_key``: the empty password first, then ``candidates``
    in order; None when none is."""
    for p in (EMPTY_PASSWORD, *candidates):
        if key_of(p) == master_key:
            return p
    return None
