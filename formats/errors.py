"""The one error type of the format layer: where in which file, what was expected, what was found."""
from __future__ import annotations


class BkdiskError(Exception):
    """Base of every error bkdisk raises on purpose (each layer derives one type from it)."""


class FormatError(BkdiskError):
    """Bytes that do not follow a declared format.

    Carries the file (or a label such as ``<bytes>``), the byte offset where the problem starts,
    what the format expects there and what was found. ``str()`` is one line, fit for a CLI.
    """

    def __init__(self, expected: str, found: str, *, path: str | None = None, offset: int | None = None):
        self.expected = expected
        self.found = found
        self.path = path
        self.offset = offset
        super().__init__(self.__str__())

    def at(self, path: str | None = None, base_offset: int = 0) -> FormatError:
        """Return this error re-anchored in a file: ``path`` and ``offset`` shifted by ``base_offset``."""
        off = None if self.offset is None else self.offset + base_offset
        return FormatError(self.expected, self.found, path=path or self.path, offset=off)

    def __str__(self) -> str:
        where = self.path or "<bytes>"
        if self.offset is None:   # a problem of the whole file (its size, its absence): no offset to name
            return f"{where}: expected {self.expected}, found {self.found}"
        return f"{where}: offset {self.offset}: expected {self.expected}, found {self.found}"

    def __reduce__(self):
        return (_rebuild_format_error, (self.expected, self.found, self.path, self.offset))


def _rebuild_format_error(expected, found, path, offset):
    return FormatError(expected, found, path=path, offset=offset)


def shown(value: object, limit: int = 16) -> str:
    """Found bytes or text as a one-line message shows them: printable ASCII in quotes, other bytes as hex
    pairs ('2b e5 01 02'), at most ``limit`` of them; never a Python repr."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        more = " …" if len(b) > limit else ""
        b = b[:limit]
        if not b:
            return "no bytes"
        if all(0x20 <= c < 0x7F for c in b):
            return "'" + b.decode("ascii") + "'" + more
        return " ".join(f"{c:02x}" for c in b) + more
    if isinstance(value, str):
        text = value[:limit * 4]
        more = " …" if len(value) > len(text) else ""
        if text.isprintable():
            return "'" + text + "'" + more
        # Control characters in found text: the UTF-8 bytes as hex pairs, as for bytes.
        return " ".join(f"{c:02x}" for c in text.encode("utf-8", "replace")[:limit]) + more
    return str(value)
