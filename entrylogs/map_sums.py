"""An entry log's entries summed per ledger into the rows of its ledgers map: one hash lookup per entry.

Summing by sorting the entries by ledger costs a sort of nearly every entry where the logs interleave
ledgers, as a busy bookie's do (each run of one ledger is an entry or two). The map names every ledger
of the log it closes, so the entries are counted into its rows instead, through an open-addressing
table of the map's rows. An entry whose ledger the map lacks is reported (the caller then compares
the two sides by sorting, which names it).
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.scan_parts import entry_parts
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

_SCOPE_MIX = np.uint64(0xBF58476D1CE4E5B9)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@inline_kernel
def _slot(scope, ledger, mask):
    """The first slot of ``(scope, ledger)`` in a table of ``mask + 1`` slots."""
    h = (np.uint64(ledger) ^ (np.uint64(scope) * _SCOPE_MIX)) * _MIX
    return np.int64(h ^ (h >> np.uint64(29))) & mask


@kernel
def place_rows(scope, ledger, table):
    """Each row i of the map (``scope``, ``ledger``) into the first free slot (-1) from its own in
    ``table`` (a power of two of slots, more than the rows). Returns False when two rows are one
    ledger (nothing is placed after it)."""
    mask = np.int64(table.size - 1)
    for i in range(scope.size):
        h = _slot(scope[i], ledger[i], mask)
        while table[h] >= 0:
            r = table[h]
            if ledger[r] == ledger[i] and scope[r] == scope[i]:
                return False
            h = (h + 1) & mask
        table[h] = i
    return True


@kernel
def add_entries(m_scope, m_ledger, table, e_scope, e_ledger, e_size, sums, counts):
    """Each entry's size, with its size prefix, added to its ledger's row of ``sums`` (and one to
    ``counts``). Returns the index of the first entry whose ledger no row holds (the entries before
    it added), or -1."""
    mask = np.int64(table.size - 1)
    for i in range(e_scope.size):
        s, l = e_scope[i], e_ledger[i]
        h = _slot(s, l, mask)
        while True:
            r = table[h]
            if r < 0:
                return i
            if m_ledger[r] == l and m_scope[r] == s:
                break
            h = (h + 1) & mask
        sums[r] += np.int64(e_size[i]) + SIZE_PREFIX_SIZE
        counts[r] += 1
    return -1


def sums_by_map_rows(scan: EntryLogArrays, scope: np.ndarray,
                     ledger: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per row of the map's columns ``scope``, ``ledger`` (distinct ledgers): the sum of its entries'
    sizes with their size prefixes, and how many there are; None when some entry's ledger is not a row
    (or two rows are one ledger). The scan's entries are read a part at a time."""
    n = len(scope)
    scope, ledger = np.ascontiguousarray(scope, np.uint64), np.ascontiguousarray(ledger, np.uint64)
    table = np.full(1 << max(4, (2 * n).bit_length()), -1, np.int64)   # at most half full
    if not place_rows(scope, ledger, table):
        return None
    sums, counts = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for _lo, e in entry_parts(scan):
        if len(e) and add_entries(scope, ledger, table, e["scope"], e["ledger"], e["size"], sums, counts) >= 0:
            return None
    return sums, counts
