"""An entry log's entries summed per ledger into the rows of its ledgers map: one hash lookup per entry.

Summing by sorting the entries by ledger costs a sort of nearly every entry where the logs interleave
ledgers, as a busy bookie's do (each run of one ledger is an entry or two). The map names every ledger
of the log it closes, so the entries are counted into its rows instead, through an open-addressing
table of the map's rows. An entry whose ledger the map lacks is reported (the caller then compares
the two sides by sorting, which names it).

A scan may count its entries as it hands them over (``MapCounter``): a log whose entries were spilled is
then not read back for its map.
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import kernel
from bkdisk.diskio.ledger_table import empty_table, place_rows, row_of
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.entrylogs.ledgers_map import map_columns
from bkdisk.entrylogs.scan_parts import entry_parts
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

# (scope, ledger, size) of a map's rows in (scope, ledger) order, and each row's entries: their sizes
# with size prefixes summed, and their count.
MapCounts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@kernel
def add_entries(m_scope, m_ledger, table, e_scope, e_ledger, e_size, sums, counts):
    """Each entry's size, with its size prefix, added to its ledger's row of ``sums`` (and one to
    ``counts``). Returns the index of the first entry whose ledger no row holds (the entries before
    it added), or -1."""
    for i in range(e_scope.size):
        r = row_of(m_scope, m_ledger, table, e_scope[i], e_ledger[i])
        if r < 0:
            return i
        sums[r] += np.int64(e_size[i]) + SIZE_PREFIX_SIZE
        counts[r] += 1
    return -1


def map_rows(ledgers_map) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ledgers map's (scope, ledger, size) columns in (scope, ledger) order (OverflowError, ValueError
    for a size past 64 bits)."""
    *ids, sizes = map_columns(ledgers_map)
    order = np.lexsort((ids[1], ids[0]))
    return ids[0][order], ids[1][order], sizes[order]


class MapCounter:
    """A log's entries counted into its ledgers map's rows (``map_rows``) as a scan hands them over,
    so that nothing is read back to compare the map with them. Gives up (``counts()`` None) when the
    map cannot be placed (a size past 64 bits, a ledger twice) or an entry's ledger is not a row:
    the comparison then reads the entries itself."""

    def __init__(self, ledgers_map):
        self.table: np.ndarray | None = None
        self.rows: MapCounts | None = None
        try:
            scope, ledger, size = map_rows(ledgers_map)
        except (OverflowError, ValueError):
            return
        scope, ledger = np.ascontiguousarray(scope, np.uint64), np.ascontiguousarray(ledger, np.uint64)
        table = empty_table(len(scope))
        if place_rows(scope, ledger, table):
            self.table = table
            self.rows = scope, ledger, size, np.zeros(len(scope), np.int64), np.zeros(len(scope), np.int64)

    def add(self, e: np.ndarray) -> None:
        """Entry rows (``scope``, ``ledger``, ``size`` fields) after those added so far."""
        if self.table is None or self.rows is None or len(e) == 0:
            return
        scope, ledger, _size, sums, counts = self.rows
        if add_entries(scope, ledger, self.table, e["scope"], e["ledger"], e["size"], sums, counts) >= 0:
            self.table = None

    def counts(self) -> MapCounts | None:
        return None if self.table is None else self.rows


def sums_by_map_rows(scan: EntryLogArrays, scope: np.ndarray,
                     ledger: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per row of the map's columns ``scope``, ``ledger`` (distinct ledgers): the sum of its entries'
    sizes with their size prefixes, and how many there are; None when some entry's ledger is not a row
    (or two rows are one ledger). The scan's entries are read a part at a time."""
    n = len(scope)
    scope, ledger = np.ascontiguousarray(scope, np.uint64), np.ascontiguousarray(ledger, np.uint64)
    table = empty_table(n)
    if not place_rows(scope, ledger, table):
        return None
    sums, counts = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for _lo, e in entry_parts(scan):
        if len(e) and add_entries(scope, ledger, table, e["scope"], e["ledger"], e["size"], sums, counts) >= 0:
            return None
    return sums, counts
