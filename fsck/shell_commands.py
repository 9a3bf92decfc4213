"""The BookKeeper shell commands a repair plan gives an operator to paste, each ledger id printed in
the form the command parses, and the ledgers such a command cannot address."""
from __future__ import annotations

from bkdisk.formats.ids import LedgerId

# `bin/bookkeeper shell recover -l L` parses L with Java's Long.parseLong: a decimal 64-bit ledger id
# of the scope every pre-BP-35 ledger lives in. BookKeeper's ledger ids are never negative.
JAVA_LONG_MAX = (1 << 63) - 1
AUTORECOVERY = "bin/bookkeeper shell autorecovery -enable"


def shell_ledger_arg(lid: LedgerId) -> str | None:
    """``lid`` as BookKeeper's shell takes it after ``-l``; None when the shell cannot name it."""
    if lid.scope != 0 or lid.ledger > JAVA_LONG_MAX:
        return None
    return str(lid.ledger)


def why_shell_cannot(lid: LedgerId) -> str:
    if lid.scope != 0:
        return (f"ledger {lid.qualified_name} is a scoped (BP-35, 128-bit) ledger: BookKeeper's shell takes "
                f"64-bit ledger ids, so no shell command recovers it; re-replicate it with a client that "
                f"addresses 128-bit ledgers, or copy its entries from the other bookies of its ensemble")
    return (f"ledger {lid.ledger} is above 2^63-1, which BookKeeper's shell cannot parse as a ledger id; "
            f"re-replicate it with autorecovery ({AUTORECOVERY})")


def recover_commands(ledgers: list[LedgerId], bookie_id: str) -> tuple[str | None, list[str]]:
    """(the command that re-replicates ``ledgers`` from the other bookies, or None when the shell can
    name none of them; one explanation per ledger it cannot name)."""
    args = [a for a in (shell_ledger_arg(l) for l in sorted(ledgers)) if a is not None]
    refused = [why_shell_cannot(l) for l in sorted(ledgers) if shell_ledger_arg(l) is None]
    if not args:
        return None, refused
    if len(args) == 1:
        command = f"bin/bookkeeper shell recover -l {args[0]} {bookie_id}"
    else:
        command = f"for L in {' '.join(args)}; do bin/bookkeeper shell recover -l $L {bookie_id}; done"
    return command + f"  (or let autorecovery do it: {AUTORECOVERY})", refused
