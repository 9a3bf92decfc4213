"""Many keys looked up in a sorted column at once, in ascending order.

``np.searchsorted`` with the wanted keys in the order they come (ledger ids over the 64-bit range,
locations in the order of their database) does a binary search each with a cache miss at nearly every
step once the column is larger than the caches. Searched in ascending order, each search starts where
the one before ended, in pages it just read: on 1.8 M keys in a column of 1.8 M, 0.64 s against 0.24 s
with the sort that orders them (and 1.85 s where the column is a field of a table, not contiguous)."""
from __future__ import annotations

from typing import Literal

import numpy as np

SORTED_FROM = 1 << 14   # keys looked up at once from which sorting them first pays


def searched_in_order(column: np.ndarray, wanted: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
    """``np.searchsorted(column, wanted, side)``; ``column`` sorted (made contiguous here if it is not)."""
    column = np.ascontiguousarray(column)
    if len(wanted) < SORTED_FROM:
        return np.searchsorted(column, wanted, side)
    order = np.argsort(wanted)
    out = np.empty(len(wanted), np.int64)
    out[order] = np.searchsorted(column, wanted[order], side)
    return out


def pair_row(scopes: np.ndarray, ledgers: np.ndarray, scope: int, ledger: int) -> int:
    """The row of (``scope``, ``ledger``) in columns sorted by (scope, ledger) (uint64), or -1: the scope's
    run found first, then the ledger within it. The two are ints of 64 bits."""
    s = np.uint64(scope)
    lo, hi = int(np.searchsorted(scopes, s, "left")), int(np.searchsorted(scopes, s, "right"))
    at = lo + int(np.searchsorted(ledgers[lo:hi], np.uint64(ledger)))
    return at if at < hi and int(ledgers[at]) == ledger else -1
