"""What every `bkdisk dump` subcommand shares: UTF-8 byte output, the common options, file reading."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from bkdisk.diskio.mapped import DiskError, read_bytes
from bkdisk.dump import shell_format as sf
from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.ids import LedgerId


class DumpError(BkdiskError):
    """The file to dump could not be chosen (no such ledger index under a root, no cookie, ...)."""


# --------------------------------------------------------------------------------------------
# output


class Out:
    """Text and JSON lines to stdout as UTF-8 bytes (payloads may hold any character)."""

    def __init__(self) -> None:
        sys.stdout.flush()  # keep order with anything already written through the text layer
        self._s = getattr(sys.stdout, "buffer", None) or TextAsBytes(sys.stdout)

    def text(self, s: str) -> None:
        self._s.write(s.encode("utf-8", "surrogateescape"))   # (a file name's bytes as they are)

    def raw(self, b: bytes | memoryview) -> None:
        """Bytes already encoded (lines a kernel wrote)."""
        self._s.write(b)

    def obj(self, o: dict[str, Any]) -> None:
        self._s.write((json.dumps(o) + "\n").encode("utf-8"))

    def flush(self) -> None:
        self._s.flush()


class TextAsBytes:
    """A stdout without a byte layer (rare: some embedding hosts); payload bytes go through as text."""

    def __init__(self, stream) -> None:
        self._t = stream

    def write(self, b: bytes | memoryview) -> None:
        self._t.write(bytes(b).decode("utf-8"))

    def flush(self) -> None:
        self._t.flush()


def json_option(fn: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="One JSON object per record, one per line.")(fn)


def msg_options(fn: Callable) -> Callable:
    fn = click.option("--entry-format", type=click.Choice(sf.ENTRY_FORMATS), default="string", show_default=True,
                      help="How --msg prints payloads: BookKeeper's StringEntryFormatter or HexDumpEntryFormatter.")(fn)
    return click.option("--msg", "-m", "msg", is_flag=True,
                        help="Print each entry's data (digest and payload) like the shell's -msg.")(fn)


def regular_path(path: str) -> str:
    """``path`` when it names an existing file, or a one-line DiskError."""
    if not os.path.exists(path):
        raise DiskError(path, "no such file or directory")
    if os.path.isdir(path):
        raise DiskError(path, "is a directory, expected a file")
    return path


def regular_file(path: str) -> tuple[str, bytes]:
    """The bytes of a regular file, or a one-line DiskError."""
    return regular_path(path), read_bytes(path)


def matches(ledger: LedgerId | None, scope: int, lid: int) -> bool:
    return ledger is None or (ledger.scope, ledger.ledger) == (scope, lid)


class BodyReader:
    """Positioned reads of one file (a record body at a time), for dumps that must not load the file."""

    def __init__(self, path: str):
        self.path = path
        self.fd = -1

    def __enter__(self) -> BodyReader:
        try:
            self.fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:
            raise DiskError(self.path, f"cannot read ({e.strerror})") from None
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)

    def __call__(self, offset: int, n: int) -> bytes:
        try:
            return os.pread(self.fd, n, offset)
        except OSError as e:
            raise DiskError(self.path, f"cannot read at offset {offset} ({e.strerror})") from None
