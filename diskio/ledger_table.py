"""An open-addressing table of rows keyed by (scope, ledger): one hash lookup per entry where sorting
the entries by ledger would cost a sort of nearly every entry (a busy bookie's logs interleave ledgers,
so each run of one ledger is an entry or two).

The table holds row numbers (-1: a free slot), at most half full; the rows' own columns hold the keys.
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel

_SCOPE_MIX = np.uint64(0xBF58476D1CE4E5B9)
_MIX = np.uint64(0x9E3779B97F4A7C15)


def empty_table(rows: int) -> np.ndarray:
    """A table for ``rows`` rows: a power of two of free slots, more than twice the rows."""
    return np.full(1 << max(4, (2 * rows).bit_length()), -1, np.int64)


@inline_kernel
def slot_of(scope, ledger, mask):
    """The first slot of ``(scope, ledger)`` in a table of ``mask + 1`` slots."""
    h = (np.uint64(ledger) ^ (np.uint64(scope) * _SCOPE_MIX)) * _MIX
    return np.int64(h ^ (h >> np.uint64(29))) & mask


@kernel
def place_rows(scope, ledger, table):
    """Each row i of (``scope``, ``ledger``) into the first free slot from its own in ``table``
    (empty_table's). Returns False when two rows are one ledger (nothing is placed after it)."""
    mask = np.int64(table.size - 1)
    for i in range(scope.size):
        h = slot_of(scope[i], ledger[i], mask)
        while table[h] >= 0:
            r = table[h]
            if ledger[r] == ledger[i] and scope[r] == scope[i]:
                return False
            h = (h + 1) & mask
        table[h] = i
    return True


@inline_kernel
def row_of(t_scope, t_ledger, table, scope, ledger):
    """The row of ``(scope, ledger)`` placed in ``table`` (whose rows are ``t_scope``, ``t_ledger``), or -1."""
    mask = np.int64(table.size - 1)
    h = slot_of(scope, ledger, mask)
    while True:
        r = table[h]
        if r < 0 or (t_ledger[r] == ledger and t_scope[r] == scope):
            return r
        h = (h + 1) & mask
