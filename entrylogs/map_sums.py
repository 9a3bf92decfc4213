"""An entry log's entries summed per ledger into the rows of its ledgers map: one hash lookup per entry.

Summing by sorting the entries by ledger costs a sort of nearly every entry where the logs interleave
ledgers, as a busy bookie's do (each run of one ledger is an entry or two). The map names every ledger
of the log it closes, so the entries are counted into its rows instead, through an open-addressing
table of the map's rows. An entry whose ledger the map lacks is reported (the caller then compares
the two sides by sorting, which names it).

A scan may count its entries as it hands them over (``MapCounter``, as the comparison does reading them):
a log whose entries were spilled is then not read back for its map.
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


@kernel(any_layout=("m_scope", "m_ledger", "e_scope", "e_ledger", "e_size"))
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
    """Entries counted into the rows of a log's ledgers map (``map_rows``: distinct ledgers, in order), a
    part at a time: by a scan as it hands them over, so that nothing is read back to compare the map
    with them, or by the comparison reading them. Gives up (``counts()`` None) when two rows are one
    ledger or an entry's ledger is not a row: the comparison then sorts both sides."""

    def __init__(self, scope: np.ndarray, ledger: np.ndarray, size: np.ndarray):
        scope, ledger = np.ascontiguousarray(scope, np.uint64), np.ascontiguousarray(ledger, np.uint64)
        table = empty_table(len(scope))
        self.table: np.ndarray | None = table if place_rows(scope, ledger, table) else None
        self.rows: MapCounts = scope, ledger, size, np.zeros(len(scope), np.int64), np.zeros(len(scope), np.int64)

    @classmethod
    def of_map(cls, ledgers_map) -> MapCounter | None:
        """A counter of the map's rows; None for a map whose sizes pass 64 bits (compared as Python ints)."""
        try:
            return cls(*map_rows(ledgers_map))
        except (OverflowError, ValueError):
            return None

    def add(self, e: np.ndarray) -> None:
        """Entry rows (``scope``, ``ledger``, ``size`` fields) after those added so far."""
        if self.table is None or len(e) == 0:
            return
        scope, ledger, _size, sums, counts = self.rows
        if add_entries(scope, ledger, self.table, e["scope"], e["ledger"], e["size"], sums, counts) >= 0:
            self.table = None

    def add_parts(self, scan: EntryLogArrays) -> MapCounter:
        """The scan's entries added, read a part at a time (none after it gave up)."""
        for _lo, e in entry_parts(scan):
            if self.table is None:
                break
            self.add(e)
        return self

    def counts(self) -> MapCounts | None:
        return None if self.table is None else self.rows
