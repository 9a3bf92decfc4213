"""Ledger passwords tried against the master keys bookies keep: a candidates file read as text, one
password a line, and the match of a master key against them (the empty password always first).

A bookie stores only the master key SHA-1("ledger" + password) (formats.digests.master_key, as
BookKeeper's DigestManager.generateMasterKey): a password is known when its master key is equal.
"""
from __future__ import annotations

import os
import select
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bkdisk.formats.digests import master_key as key_of
from bkdisk.formats.errors import BkdiskError

EMPTY_PASSWORD = b""
FIFO_WAIT_S = 30.0


class CandidatesError(BkdiskError):
    """A password candidates file that cannot be read as text (the command exits 8)."""


def read_candidates(path: str) -> list[bytes]:
    """The passwords of ``path``, one a line (UTF-8, a leading byte-order mark dropped; ``\\n`` or
    ``\\r\\n``; a line is the password as written, spaces kept; blank lines skipped, the empty password
    being tried always), each once, in file order; ``path`` may be a pipe (``<(vault read ...)``).
    Raises CandidatesError, one line, for a file that cannot be read or is not text."""
    try:
        data = _read_all(path)
    except OSError as e:
        raise CandidatesError(f"{path}: cannot read the password candidates file ({e.strerror})") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise CandidatesError(f"{path}: offset 0: expected a text file of passwords (UTF-8), found a UTF-16 "
                              "byte-order mark (save the file as UTF-8)")
    # Editors that save "UTF-8 with BOM" put EF BB BF before the first password; it is not part of it.
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    data = data[start:]
    nul = data.find(b"\0")
    if nul >= 0:
        raise CandidatesError(f"{path}: offset {start + nul}: expected a text file of passwords, one a line, "
                              "found a NUL byte")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CandidatesError(f"{path}: offset {start + e.start}: expected a text file of passwords (UTF-8), "
                              f"found byte {data[e.start]:02x}") from None
    out: dict[bytes, None] = {}
    for line in data.split(b"\n"):
        line = line[:-1] if line.endswith(b"\r") else line
        if line:
            out.setdefault(line, None)
    return list(out)


def _read_all(path: str) -> bytes:
    """The bytes of ``path``; a named pipe or process substitution is read once its writer has
    written, and a pipe no writer opens within FIFO_WAIT_S is an error rather than a hang."""
    if not stat.S_ISFIFO(os.stat(path).st_mode):
        with open(path, "rb") as f:
            return f.read()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # opening a pipe with no writer would block
    try:
        waiting = select.poll()
        waiting.register(fd, select.POLLIN | select.POLLHUP)
        if not waiting.poll(FIFO_WAIT_S * 1000):
            raise CandidatesError(f"{path}: offset 0: expected passwords from the pipe's writer, none came "
                                  f"within {FIFO_WAIT_S:g} s")
        os.set_blocking(fd, True)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def match_password(master_key: bytes, candidates: Iterable[bytes]) -> bytes | None:
    """The password whose master key is ``master_key``: the empty password first, then ``candidates``
    in order; None when none is."""
    for p in (EMPTY_PASSWORD, *candidates):
        if key_of(p) == master_key:
            return p
    return None


@dataclass(frozen=True)
class KeptKeyMatch:
    """A ledger's password found from the master keys its bookies keep, or why not."""

    password: bytes | None          # only when the one master key kept matched
    master_key: bytes | None        # the one master key kept (None: none, or bookies disagree)
    why: str


def match_kept_keys(kept: Sequence[tuple[str, bytes | None]], candidates: Sequence[bytes],
                    sources: str = ".idx header, ledgers index entry or journal key record") -> KeptKeyMatch:
    """The password of a ledger whose bookies keep the master keys ``kept`` ((bookie, key or None) each):
    every key kept must be one and the same, and match the empty password or a candidate. ``sources``
    names where a key was looked for, for the line that says none was found."""
    found = {k for _b, k in kept if k is not None}
    if not found:
        return KeptKeyMatch(None, None, f"no master key on any readable disk (no {sources})")
    if len(found) > 1:
        shown = ", ".join(sorted(k.hex() for k in found))
        return KeptKeyMatch(None, None, f"the bookies keep different master keys ({shown})")
    key = found.pop()
    pw = match_password(key, candidates)
    if pw is None:
        return KeptKeyMatch(None, key, f"master key {key.hex()} matches neither the empty password nor any of "
                            f"{len(candidates)} candidates: add candidates (--password-candidates)")
    holders = sorted(b for b, k in kept if k == key)
    what = "the empty password" if pw == b"" else "a candidate"
    return KeptKeyMatch(pw, key, f"SHA-1('ledger' + password) of {what} equals the master key {key.hex()} kept by "
                        f"{', '.join(holders)}")
