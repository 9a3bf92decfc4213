"""Where a command finds a token of the metadata service: its option, a file, or the environment.
A token on a command line shows in ``ps``; a file or the environment does not. Nothing here loads
gRPC, so a command's ``--help`` stays cheap."""
from __future__ import annotations

import os

from bkdisk.formats.errors import BkdiskError

TOKEN_ENV = "BKDISK_METADATA_TOKEN"             # the full token, for the service and every client
READ_TOKEN_ENV = "BKDISK_METADATA_READ_TOKEN"   # the service's read-only token


def env_token() -> str | None:
    """The token the environment gives the thin clients (bookie-fsck, space, audit), None if unset."""
    return os.environ.get(TOKEN_ENV) or None


def token_from_file(path: str) -> str:
    """The token a file holds (one line; the trailing newline is not part of it)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise BkdiskError(f"{path}: cannot read the token: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BkdiskError(f"{path}: cannot read the token: not UTF-8 text") from None
    token = text.rstrip("\r\n")
    if not token or "\n" in token or token != token.strip():
        raise BkdiskError(f"{path}: expected one line holding the token, without surrounding spaces")
    return token
