"""BP-35's CLI options naming a ledger: --ledger-id, --ledger-scope-id, --ledger-qualified-name."""
from __future__ import annotations

import functools

import click

from formats.errors import FormatError
from formats.ids import LedgerId


def _int(text: str) -> int:
    t = text.strip().lower()
    return int(t, 16) if t.startswith("0x") else int(t)


def ledger_options(fn):
    """Add the three options; the command receives ``ledger: LedgerId | None``."""

    @click.option("--ledger-id", "ledger_id", default=None, help="Ledger id (decimal, or hex with 0x).")
    @click.option("--ledger-scope-id", "ledger_scope_id", default=None, help="Ledger scope id (BP-35), default 0.")
    @click.option("--ledger-qualified-name", "ledger_qname", default=None,
                  help="The 128-bit id as 32 hex digits (scope then ledger).")
    @functools.wraps(fn)
    def wrapper(*a, ledger_id=None, ledger_scope_id=None, ledger_qname=None, **kw):
        kw["ledger"] = resolve_ledger(ledger_id, ledger_scope_id, ledger_qname)
        return fn(*a, **kw)

    return wrapper


def resolve_ledger(ledger_id: str | None, scope_id: str | None, qname: str | None) -> LedgerId | None:
    if qname is not None:
        if ledger_id is not None or scope_id is not None:
            raise click.UsageError("--ledger-qualified-name excludes --ledger-id and --ledger-scope-id")
        try:
            return LedgerId.from_qualified_name(qname)
        except FormatError as e:
            raise click.BadParameter(str(e), param_hint="--ledger-qualified-name") from None
    if ledger_id is None:
        if scope_id is not None:
            raise click.UsageError("--ledger-scope-id needs --ledger-id")
        return None
    try:
        return LedgerId.of(_int(scope_id) if scope_id is not None else 0, _int(ledger_id))
    except (ValueError, FormatError) as e:
        raise click.BadParameter(str(e), param_hint="--ledger-id/--ledger-scope-id") from None
