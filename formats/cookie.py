"""Bookie cookies (``current/VERSION``, layout versions 3, 4 and 5): parse and byte-exact serialize."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bkdisk.formats.errors import FormatError, shown
from bkdisk.formats.proto import CookieFormat, java_text_format, parse_text_format

# specs/cookie.md; BookKeeper: bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/Cookie.java
# (toString, toStringVersion3, parse, encodeDirPaths) and DataFormats.proto (CookieFormat).

LAYOUT_VERSIONS = (3, 4, 5)
CURRENT_LAYOUT_VERSION = 5
JOURNAL_DIR_SEPARATOR = ","
DIR_SEPARATOR = "\t"
MAX_VERSION_LINE = 12

_COUNT = re.compile(r"0|[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class Cookie:
    """One cookie, as stored.

    ``journal_dirs`` is the ``journalDir`` string split on ','; ``ledger_dirs``/``index_dirs`` are
    the dirs of the ``"<count>\\t<dir>..."`` strings. ``instance_id``/``index_dirs`` are ``None``
    when absent (an empty ``instanceId`` is kept as ``""``; BookKeeper reads it as absent).
    Layout 3 carries neither. Bookie ids are not validated here (see formats/bookieid.py).
    """

    layout_version: int
    bookie_id: str
    journal_dirs: tuple[str, ...]
    ledger_dirs: tuple[str, ...]
    instance_id: str | None = None
    index_dirs: tuple[str, ...] | None = None

    @property
    def effective_index_dirs(self) -> tuple[str, ...]:
        """The index dirs BookKeeper compares: ``index_dirs`` if present, else the ledger dirs."""
        return self.ledger_dirs if self.index_dirs is None else self.index_dirs

    @property
    def effective_instance_id(self) -> str | None:
        """The instance id BookKeeper uses: ``None`` for an absent or empty ``instanceId``."""
        return self.instance_id or None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict for machine consumers."""
        return {
            "layout_version": self.layout_version,
            "bookie_id": self.bookie_id,
            "journal_dirs": list(self.journal_dirs),
            "ledger_dirs": list(self.ledger_dirs),
            "instance_id": self.instance_id,
            "index_dirs": None if self.index_dirs is None else list(self.index_dirs),
        }


def encode_dirs(dirs: tuple[str, ...]) -> str:
    """``Cookie.encodeDirPaths``: the count, then TAB before each dir."""
    return str(len(dirs)) + "".join(DIR_SEPARATOR + d for d in dirs)


def decode_dirs(text: str, *, what: str = "dir list", path: str | None = None,
                offset: int | None = None) -> tuple[str, ...]:
    """Inverse of ``encode_dirs``; the count must be decimal and equal the number of dirs."""
    parts = text.split(DIR_SEPARATOR)
    if _COUNT.fullmatch(parts[0]) is None:
        raise FormatError(f"{what} '<count>\\t<dir>...'", shown(text, 80), path=path, offset=offset)
    if int(parts[0]) != len(parts) - 1:
        raise FormatError(f"{what} with {parts[0]} dirs", f"{len(parts) - 1} dirs", path=path, offset=offset)
    return tuple(parts[1:])


def parse_cookie(data: bytes, path: str | None = None) -> Cookie:
    """Parse a cookie file. Raises FormatError (and nothing else) on any deviation.

    Line 1 is the layout version (3, 4 or 5) ended by LF. Layout 3 then has exactly three LF-ended
    lines (bookie id, journal dirs, encoded ledger dirs); 4 and 5 have CookieFormat TextFormat.
    """
    data = bytes(data)
    end = data.find(b"\n", 0, MAX_VERSION_LINE)
    if end < 0:
        raise FormatError("cookie layout version line ended by LF", shown(data[:MAX_VERSION_LINE]),
                          path=path, offset=0)
    first = data[:end]
    if first not in (b"3", b"4", b"5"):
        raise FormatError("cookie layout version 3, 4 or 5", shown(first), path=path, offset=0)
    version = int(first)
    body_offset = end + 1
    body = data[body_offset:]
    if version == 3:
        return _parse_v3(body, path, body_offset)
    msg: Any = parse_text_format(body, CookieFormat(), what="CookieFormat TextFormat", path=path,
                                 offset=body_offset)
    return Cookie(
        layout_version=version,
        bookie_id=msg.bookieHost,
        journal_dirs=tuple(msg.journalDir.split(JOURNAL_DIR_SEPARATOR)),
        ledger_dirs=decode_dirs(msg.ledgerDirs, what="ledgerDirs", path=path, offset=body_offset),
        instance_id=msg.instanceId if msg.HasField("instanceId") else None,
        # BookKeeper reads an empty indexDirs as absent (then the ledger dirs hold the index).
        index_dirs=(decode_dirs(msg.indexDirs, what="indexDirs", path=path, offset=body_offset)
                    if msg.HasField("indexDirs") and msg.indexDirs != "" else None),
    )


def _parse_v3(body: bytes, path: str | None, base: int) -> Cookie:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError("UTF-8 layout 3 cookie", f"byte 0x{body[exc.start]:02x} that is not UTF-8",
                          path=path, offset=base + exc.start) from None
    if "\r" in text:
        pos = len(text[: text.index("\r")].encode("utf-8"))
        raise FormatError("layout 3 cookie lines ended by LF only", "CR", path=path, offset=base + pos)
    lines = text.split("\n")
    if len(lines) != 4 or lines[3] != "":
        found = "end of data" if len(lines) < 4 else "more data after the third line"
        raise FormatError("layout 3 cookie: bookie id, journal dirs, ledger dirs lines, each ended by LF",
                          found, path=path, offset=base + len(body))
    ledger_offset = base + len((lines[0] + lines[1]).encode("utf-8")) + 2
    return Cookie(
        layout_version=3,
        bookie_id=lines[0],
        journal_dirs=tuple(lines[1].split(JOURNAL_DIR_SEPARATOR)),
        ledger_dirs=decode_dirs(lines[2], what="ledger dirs line", path=path, offset=ledger_offset),
    )


def serialize_cookie(c: Cookie) -> bytes:
    """The exact file bytes for ``c`` (layout 3 as plain lines, 4/5 as version line + TextFormat).

    Raises FormatError when ``c`` holds something its layout cannot carry unambiguously.
    """
    _check(c)
    journal = JOURNAL_DIR_SEPARATOR.join(c.journal_dirs)
    if c.layout_version == 3:
        text = f"3\n{c.bookie_id}\n{journal}\n{encode_dirs(c.ledger_dirs)}\n"
        return text.encode("utf-8")
    msg: Any = CookieFormat()
    msg.bookieHost = c.bookie_id
    msg.journalDir = journal
    msg.ledgerDirs = encode_dirs(c.ledger_dirs)
    if c.instance_id is not None:
        msg.instanceId = c.instance_id
    if c.index_dirs is not None:
        msg.indexDirs = encode_dirs(c.index_dirs)
    return (f"{c.layout_version}\n" + java_text_format(msg)).encode("utf-8")


def _unfit(what: str, found: object) -> FormatError:
    return FormatError(f"serializable cookie: {what}", repr(found)[:200])


def _check_text(value: object, name: str, forbidden: str) -> None:
    if not isinstance(value, str):
        raise _unfit(f"{name} a str", value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _unfit(f"{name} encodable as UTF-8", value) from None
    if any(ch in value for ch in forbidden):
        raise _unfit(f"{name} without {forbidden!r}", value)


def _check(c: Cookie) -> None:
    if c.layout_version not in LAYOUT_VERSIONS:
        raise _unfit("layout_version 3, 4 or 5", c.layout_version)
    lines = "\n\r" if c.layout_version == 3 else ""
    _check_text(c.bookie_id, "bookie_id", lines)
    for name, dirs, forbidden in (("journal_dirs", c.journal_dirs, JOURNAL_DIR_SEPARATOR + lines),
                                  ("ledger_dirs", c.ledger_dirs, DIR_SEPARATOR + lines),
                                  ("index_dirs", c.index_dirs, DIR_SEPARATOR + lines)):
        if dirs is None and name == "index_dirs":
            continue
        if not isinstance(dirs, tuple):
            raise _unfit(f"{name} a tuple of str", dirs)
        for d in dirs:
            _check_text(d, name, forbidden)
    if not c.journal_dirs:
        raise _unfit("at least one journal dir (an empty journalDir string reads back as ('',))", c.journal_dirs)
    if c.instance_id is not None:
        _check_text(c.instance_id, "instance_id", "")
    if c.layout_version == 3 and (c.instance_id is not None or c.index_dirs is not None):
        raise _unfit("layout 3 carries no instance_id or index_dirs", c)
