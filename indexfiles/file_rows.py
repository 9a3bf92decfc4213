"""Tables of an index walk that grow as files are met: the file rows (INDEX_FILE_DTYPE) and their
location rows (LOCATION_DTYPE), each one array whose capacity doubles in place (the location rows
first map, in one go, the room their sink lets them hold: LocationRows).

``ndarray.resize`` reallocates the buffer (a large one is moved by the kernel's page remapping, not
copied and held twice), so a walk of millions of files keeps one array of rows, filled by the
listing (the name's columns) and by the reading (the header's and the slots' columns) alike.
"""
from __future__ import annotations

import mmap

import numpy as np

from bkdisk.indexfiles.arrays import INDEX_FILE_DTYPE, LOCATION_DTYPE

FIRST_CAPACITY = 4096
# What a row holds before its file is read (and stays so when it cannot be): the reference walk's row
# of a file without a readable header.
UNREAD = {"size": -1, "version": -1, "last_entry": -1}


def blank_rows(n: int) -> np.ndarray:
    rows = np.zeros(n, INDEX_FILE_DTYPE)
    _unread_from(rows, 0)
    return rows


def _unread_from(rows: np.ndarray, start: int) -> None:
    for name, value in UNREAD.items():
        rows[name][start:] = value


class GrowingArray:
    """An array of ``dtype`` appended to at its end; ``array`` is the live buffer (its first ``n`` rows
    are the rows): read it again after each ``take``, as growing replaces it."""

    def __init__(self, dtype: np.dtype, n: int = 0):
        self.dtype = np.dtype(dtype)
        self.array = self._blank(max(n, 0))
        self.n = n

    def _blank(self, n: int) -> np.ndarray:
        return np.zeros(n, self.dtype)

    def take(self, k: int) -> np.ndarray:
        """A view of ``k`` new rows at the end."""
        need = self.n + k
        if need > len(self.array):
            self._grow(max(need, 2 * len(self.array), FIRST_CAPACITY))
        out = self.array[self.n:need]
        self.n = need
        return out

    def _grow(self, capacity: int) -> None:
        # ``array`` always owns its buffer (made by _blank, only ever resized), so resize cannot refuse;
        # realloc: a large buffer is remapped, not copied.
        old = len(self.array)
        self.array.resize(capacity, refcheck=False)
        self._fill(old)

    def _fill(self, start: int) -> None:
        """Rows from ``start`` on hold their blank value (resize zero-fills them)."""

    def finish(self) -> np.ndarray:
        """The rows, the buffer trimmed to them."""
        if len(self.array) != self.n:
            self.array.resize(self.n, refcheck=False)
        return self.array


class FileRows(GrowingArray):
    """INDEX_FILE_DTYPE rows, each blank (UNREAD) until its columns are filled."""

    def __init__(self, n: int = 0):
        super().__init__(INDEX_FILE_DTYPE, n)

    @classmethod
    def holding(cls, rows: np.ndarray) -> FileRows:
        """``rows`` (INDEX_FILE_DTYPE, a listing's) as the table, every row taken."""
        out = cls()
        out.array, out.n = rows, len(rows)
        return out

    def _blank(self, n: int) -> np.ndarray:
        return blank_rows(n)

    def _fill(self, start: int) -> None:
        _unread_from(self.array, start)

    def add(self, k: int = 1) -> int:
        """``k`` new blank rows; the index of the first."""
        n = self.n
        if n + k > len(self.array):
            self._grow(max(n + k, 2 * n, FIRST_CAPACITY))
        self.n = n + k
        return n


class LocationRows(GrowingArray):
    """LOCATION_DTYPE rows whose first growth maps ``reserve`` rows of anonymous memory, in small pages
    the kernel gives zeroed as rows first reach them: the rows are neither moved nor filled while the
    reserve lasts. (Huge pages, numpy's choice for a large array, gave whole checks more system time,
    the scans' threads mapping and reading beside the walk.) Past the reserve the rows move once into
    an array of their own, which grows as any GrowingArray does."""

    def __init__(self, reserve: int = 0):
        super().__init__(LOCATION_DTYPE)
        self.reserve = reserve
        self.mapped = False   # ``array`` is the reserve's mapping

    def _grow(self, capacity: int) -> None:
        if len(self.array) == 0 and self.reserve > capacity:
            try:
                room = mmap.mmap(-1, self.reserve * self.dtype.itemsize, flags=mmap.MAP_PRIVATE)
            except (OSError, OverflowError):   # no address space to reserve (a ulimit): grown as needed
                self.reserve = 0
            else:
                try:
                    room.madvise(mmap.MADV_NOHUGEPAGE)
                except (AttributeError, OSError):   # (no such advice here: the system's pages)
                    pass
                self.array, self.mapped = np.frombuffer(room, self.dtype), True
                return
        if self.mapped:
            grown = np.zeros(capacity, self.dtype)
            grown[:self.n] = self.array[:self.n]
            self.array, self.mapped = grown, False
            return
        super()._grow(capacity)

    def finish(self) -> np.ndarray:
        """The rows: in the reserve, a view of its first rows (the pages past them were never given)."""
        return self.array[:self.n] if self.mapped else super().finish()


def location_rows(reserve: int = 0) -> LocationRows:
    return LocationRows(reserve)
