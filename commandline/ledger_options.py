"""BP-35's CLI options naming a ledger: --ledger-id, --ledger-scope-id, --ledger-qualified-name.

One parser for every command that takes them (bookie-fsck, bkdisk dump, inventory and metadata), so
that each says a bad value the same way, naming the option.
"""
from __future__ import annotations

import functools
import re

import click

from bkdisk.formats.ids import LedgerId

# What BookKeeper's shell reads (Long.parseLong) and hex as the metadata files name ledgers, with
# 0x: ASCII digits only, so that ' 7', '+7', '1_000' or a non-ASCII digit (which int() takes) is
# refused rather than read as some ledger.
_DECIMAL = re.compile(r"[0-9]+")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_NEGATIVE = re.compile(r"-[0-9]+")
QNAME_HELP = "The 128-bit id as exactly 32 hex digits: 16 of the scope id, then 16 of the ledger id."


def parse_id(text: str, option: str, what: str = "scope id") -> int:
    """A scope or ledger id as given on the command line: decimal, or hex with 0x; 0..2^64-1."""
    if _DECIMAL.fullmatch(text) or _NEGATIVE.fullmatch(text):
        v = int(text, 10)
    elif _HEX.fullmatch(text):
        v = int(text[2:], 16)
    else:
        raise click.BadParameter(f"expected a {what} in decimal, or in hex with 0x, found {text!r}",
                                 param_hint=option)
    if not 0 <= v < 1 << 64:
        raise click.BadParameter(f"expected a {what} in 0..2^64-1, found {text}", param_hint=option)
    return v


def ledger_options(fn):
    """Add the three options; the command receives ``ledger: LedgerId | None``."""

    @click.option("--ledger-id", "ledger_id", default=None, help="Ledger id (decimal, or hex with 0x).")
    @click.option("--ledger-scope-id", "ledger_scope_id", default=None, help="Ledger scope id (BP-35), default 0.")
    @click.option("--ledger-qualified-name", "ledger_qname", default=None, help=QNAME_HELP)
    @functools.wraps(fn)
    def wrapper(*a, ledger_id=None, ledger_scope_id=None, ledger_qname=None, **kw):
        kw["ledger"] = resolve_ledger(ledger_id, ledger_scope_id, ledger_qname)
        return fn(*a, **kw)

    return wrapper


def parse_qualified_name(text: str) -> LedgerId:
    """BP-35's qualified name as given on the command line: all 32 hex digits (an optional 0x, a UUID's
    dashes). Any other length is refused: padded, '1234' would name ledger 0x1234, not ledger 1234, and
    16 digits would be read as a ledger id where the scope id was meant."""
    digits = LedgerId.qualified_digits(text)
    hex_only = all(c in "0123456789abcdef" for c in digits)
    if len(digits) != 32 or not hex_only:
        counted = f" ({len(digits)} digits)" if hex_only else ""   # (31 or 33 of them is hard to see)
        raise click.BadParameter(f"expected exactly 32 hex digits (16 of the scope id, then 16 of the ledger "
                                 f"id), found {text!r}{counted}", param_hint="--ledger-qualified-name")
    return LedgerId.from_qualified_name(digits)


def resolve_ledger(ledger_id: str | None, scope_id: str | None, qname: str | None) -> LedgerId | None:
    if qname is not None:
        if ledger_id is not None or scope_id is not None:
            raise click.UsageError("--ledger-qualified-name excludes --ledger-id and --ledger-scope-id")
        return parse_qualified_name(qname)
    if ledger_id is None:
        if scope_id is not None:
            raise click.UsageError("--ledger-scope-id needs --ledger-id")
        return None
    scope = parse_id(scope_id, "--ledger-scope-id") if scope_id is not None else 0
    return LedgerId.of(scope, parse_id(ledger_id, "--ledger-id", "ledger id"))
