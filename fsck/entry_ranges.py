"""Entry ids said as ranges ("0-4, 9, 12-13"), and a set of (ledger, entry) pairs said per ledger."""
from __future__ import annotations

from collections.abc import Iterable

from bkdisk.formats.ids import LedgerId

LEDGERS_NAMED = 10   # in one line; the rest are counted


def runs(ids: Iterable[int]) -> list[str]:
    """The distinct ids in order, as runs of consecutive ids: "a-b", or "a" alone."""
    s = sorted(set(ids))
    out: list[str] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(f"{s[i]}" if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return out


def ranges(ids: Iterable[int]) -> str:
    return ", ".join(runs(ids))


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
