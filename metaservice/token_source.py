"""Where a command finds a token of the metadata service: its option, a file, or the environment.
A token on a command line shows in ``ps``; a file or the environment does not. Nothing here loads
gRPC, so a command's ``--help`` stays cheap."""
from __future__ import annotations

import os

from bkdisk.formats.errors import BkdiskError

TOKEN_ENV = "BKDISK_METADATA_TOKEN"             # the full token, for the service and every client
READ_TOKEN_ENV = "BKDISK_METADATA_READ_TOKEN"   # the service's read-only token
UNPROTECTED = 0o027   # mode bits of a token file refused: any for others, writing for the group


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be a token, or None. gRPC carries a call's metadata values as printable
    ASCII only (a space or a control character, or a letter outside ASCII, fails every call), and a
    space at either end would not survive a token file. The token itself is never quoted."""
    if not token:
        return "an empty token"
    bad = next((i for i, c in enumerate(token) if not " " <= c <= "~"), None)
    if bad is not None:
        what = "a control character" if ord(token[bad]) < 0x80 else "a character outside ASCII"
        return f"{what} at position {bad + 1}"
    if token != token.strip(" "):
        return "a space at its start or end"
    return None


def checked_token(token: str | None, where: str) -> str | None:
    """``token`` when it can be sent (``token_problem``); a one-line BkdiskError naming ``where`` it
    came from (an option, a file, the environment) otherwise."""
    if token is None:
        return None
    why = token_problem(token)
    if why is not None:
        raise BkdiskError(f"{where}: expected a token of printable ASCII characters, found {why}")
    return token


def env_token() -> str | None:
    """The token the environment gives the thin clients (bookie-fsck, space, audit), None if unset."""
    return checked_token(os.environ.get(TOKEN_ENV) or None, f"env {TOKEN_ENV}")


def token_from_file(path: str) -> str:
    """The token a file holds (one line; the trailing newline is not part of it). A file others can read,
    or others or its group can change, is refused: the token is every ledger's password."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
            mode = os.fstat(f.fileno()).st_mode & 0o777
    except OSError as exc:
        raise BkdiskError(f"{path}: cannot read the token: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BkdiskError(f"{path}: cannot read the token: not UTF-8 text") from None
    token = text.rstrip("\r\n")
    if not token or "\n" in token or token != token.strip():
        raise BkdiskError(f"{path}: expected one line holding the token, without surrounding spaces")
    token = checked_token(token, path) or token
    if mode & UNPROTECTED:   # (as ssh refuses a private key others can read)
        raise BkdiskError(f"{path}: expected a token file only its owner (and group) can read, found mode "
                          f"{mode:04o}: others can read or change the token; chmod 600 {path}")
    return token
