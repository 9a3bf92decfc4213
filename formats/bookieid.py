"""BookieId (BP-41): an opaque, validated bookie name; the legacy host:port form is one kind of it."""
from __future__ import annotations

import re
from typing import NamedTuple

from bkdisk.formats.errors import FormatError, shown

# BookKeeper validates with the Java class [a-zA-Z0-9:-_.\-]; inside it ":-_" is the range
# 0x3A..0x5F, so ";<=>?@[\]^" are accepted too. We accept exactly what a real bookie accepts,
# because cookies written by real bookies must validate (specs/bookie-id.md).
_VALID = re.compile(r"[a-zA-Z0-9:-_.\-]+")
# The stricter set BP-41's text describes; reported as a warning by fsck, not an error.
_BP41_STRICT = re.compile(r"[a-zA-Z0-9:.\-]+")
_RESERVED = "readonly"  # sibling znode of registrations under available/


class HostPort(NamedTuple):
    host: str
    port: int


def validate_bookie_id(text: str) -> str:
    """Return ``text`` if it is a valid BookieId, else raise FormatError saying why."""
    if not isinstance(text, str) or not text:
        raise FormatError("a non-empty bookie id", shown(text))
    if _VALID.fullmatch(text) is None:
        bad = next(c for c in text if _VALID.fullmatch(c) is None)
        raise FormatError("a bookie id of [a-zA-Z0-9.:;<=>?@[\\]^_-] characters",
                          f"{shown(text)} (character {shown(bad)})")
    if text.lower() == _RESERVED:
        raise FormatError("a bookie id other than the reserved name 'readonly'", shown(text))
    return text


def is_strict_bp41(text: str) -> bool:
    """True when ``text`` uses only BP-41's documented alphabet (letters, digits, ':', '-', '.')."""
    return _BP41_STRICT.fullmatch(text) is not None


def legacy_address(bookie_id: str) -> HostPort | None:
    """The address a legacy (address-derived) id names, or None for a custom id.

    A legacy id is ``host:port`` with a decimal port; like BookKeeper, IPv6 literals are not parsed.
    """
    parts = bookie_id.split(":")
    if len(parts) != 2 or not parts[0] or not parts[1].isascii() or not parts[1].isdigit():
        return None
    port = int(parts[1])
    if port > 65535:
        return None
    return HostPort(parts[0], port)


class BookieId(str):
    """A validated bookie id; compares and hashes as the plain string."""

    def __new__(cls, text: str) -> BookieId:
        return super().__new__(cls, validate_bookie_id(text))

    @property
    def is_legacy(self) -> bool:
        return legacy_address(self) is not None

    @property
    def address(self) -> HostPort | None:
        return legacy_address(self)
