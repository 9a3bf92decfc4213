"""Entry ids said as ranges ("0-4, 9, 12-13"), and a set of (ledger, entry) pairs said per ledger."""
from __future__ import annotations

from collections.abc import Iterable

from formats.ids import LedgerId

LEDGERS_NAMED = 10   # in one line; the rest are counted


def ranges(ids: Iterable[int]) -> str:
    out, start, prev = [], None, None
    for e in sorted(set(ids)):
        if start is not None and e == prev + 1:
            prev = e
            continue
        if start is not None:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = e
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def per_ledger(pairs: Iterable[tuple[LedgerId, int]]) -> str:
    """``ledger 0 entries 9-13; ledger 1 entry 8`` (the first LEDGERS_NAMED ledgers, then a count)."""
    by: dict[LedgerId, set[int]] = {}
    for lid, e in pairs:
        by.setdefault(lid, set()).add(e)
    parts = [f"ledger {lid} {'entry' if len(es) == 1 else 'entries'} {ranges(es)}"
             for lid, es in sorted(by.items())[:LEDGERS_NAMED]]
    if len(by) > LEDGERS_NAMED:
        parts.append(f"and {len(by) - LEDGERS_NAMED} more ledgers")
    return "; ".join(parts)
