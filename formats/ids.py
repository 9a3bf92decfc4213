"""128-bit ledger ids (BP-35): a scope id and a ledger id, their qualified name and UUID split."""
from __future__ import annotations

import uuid
from typing import NamedTuple

from bkdisk.formats.errors import FormatError, shown

U64 = (1 << 64) - 1


class LedgerId(NamedTuple):
    """A ledger's full identity: ``scope`` is the most significant 64 bits, ``ledger`` the least.

    Both are unsigned 64-bit integers. Scope 0 holds every ledger written before BP-35, so a plain
    BookKeeper ledger id ``n`` is ``LedgerId(0, n)``.
    """

    scope: int
    ledger: int

    @classmethod
    def of(cls, scope: int, ledger: int) -> LedgerId:
        for name, v in (("scope id", scope), ("ledger id", ledger)):
            if not 0 <= v <= U64:
                raise FormatError(f"{name} in 0..2^64-1", str(v))
        return cls(scope, ledger)

    @property
    def value(self) -> int:
        """The 128-bit integer."""
        return (self.scope << 64) | self.ledger

    @property
    def qualified_name(self) -> str:
        """BP-35's ledgerQualifiedName: the 128-bit id as 32 lowercase hex digits."""
        return f"{self.value:032x}"

    @staticmethod
    def qualified_digits(text: str) -> str:
        """What a qualified name's digits are read from: ``text`` without surrounding blanks, lowercase,
        without a leading ``0x`` or the dashes of the UUID form (not checked to be hex digits)."""
        return text.strip().lower().removeprefix("0x").replace("-", "")

    @classmethod
    def from_qualified_name(cls, text: str) -> LedgerId:
        """Parse a qualified name: up to 32 hex digits, an optional ``0x``; dashes (UUID form) allowed."""
        s = cls.qualified_digits(text)
        if not s or len(s) > 32 or any(c not in "0123456789abcdef" for c in s):
            raise FormatError("a ledger qualified name of 1 to 32 hex digits", shown(text))
        v = int(s, 16)
        return cls(v >> 64, v & U64)

    def to_uuid(self) -> uuid.UUID:
        """UUID with msb = scope and lsb = ledger (BookKeeper's etcd key form for scope 0)."""
        return uuid.UUID(int=self.value)

    @classmethod
    def from_uuid(cls, u: uuid.UUID | str) -> LedgerId:
        """Split a UUID into (scope = its most significant 64 bits, ledger = its least)."""
        if isinstance(u, str):
            try:
                u = uuid.UUID(u)
            except ValueError:
                raise FormatError("a UUID", shown(u)) from None
        return cls(u.int >> 64, u.int & U64)

    def __str__(self) -> str:
        return str(self.ledger) if self.scope == 0 else self.qualified_name


def to_signed64(v: int) -> int:
    """Reinterpret an unsigned 64-bit value as a Java ``long``."""
    return v - (1 << 64) if v >= 1 << 63 else v


def to_unsigned64(v: int) -> int:
    """Reinterpret a Java ``long`` as unsigned 64 bits."""
    return v & U64
