"""Where a scanner puts its per-record output as it scans: columns held in memory while a shared share
of ``--memory-limit`` has room, the rest written to the spill folder part by part.

A scanner (entry logs, journals) fills a table of bounded size window by window and hands it to its
sink's columns when it has grown past ``ScanSink.part_bytes``; it then fills the same table again from
its first row. So no file's per-record output is ever held whole: a scan holds at most one table
beyond what its columns keep, and the columns keep within the share they draw on (``Room``), whatever
the number of records. Columns are read back a range of rows at a time, in the order they were written.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from bkdisk.diskio.spill import ChunkedArray, SpillFolder, np_contiguous

if TYPE_CHECKING:
    import numpy as np

PART_BYTES = 8 << 20   # a scanner's table is handed over past this (and a window's records)
PART_ROWS = 1 << 17    # rows a reader takes at once (below glibc's mmap threshold: its memory is reused)


class Room:
    """Bytes of a share of the memory limit that the columns of several scans draw on at once."""

    def __init__(self, limit: int):
        self.limit, self.used = int(limit), 0
        self.lock = threading.Lock()
        self.spilled = 0   # columns that went to the spill folder

    def take(self, n: int) -> bool:
        """Whether ``n`` more bytes fit; if so they are counted as held."""
        with self.lock:
            if self.used + n <= self.limit:
                self.used += n
                return True
            return False

    def give(self, n: int) -> None:
        with self.lock:
            self.used -= n


class ScanColumn(ChunkedArray):
    """One per-record column of a scan: parts held while its room allows, then every part (those held
    so far first, their room given back) in a file of the spill folder, in order."""

    def __init__(self, dtype, room: Room, folder: SpillFolder, name: str = "column"):
        super().__init__(dtype, 0, folder, name)
        self.room = room

    def append(self, arr: np.ndarray, *, copy: bool = True) -> None:
        """Rows after the ones so far; ``copy``: ``arr`` is a table the caller fills again (held rows
        are copied out of it; rows written to the file need no copy)."""
        if len(arr) == 0:
            return
        if self._path is None and self.room.take(arr.nbytes):
            self._held.append(arr.copy() if copy else arr)
            self._held_bytes += arr.nbytes
            self._rows += len(arr)
            return
        if self._path is None:
            with self.room.lock:
                self.room.spilled += 1
        freed = self._held_bytes
        self._held.append(arr)
        self._held_bytes += arr.nbytes
        self._rows += len(arr)
        self._flush()
        if freed:
            self.room.give(freed)

    @property
    def held_bytes(self) -> int:
        return self._held_bytes

    def bounds(self, rows: int | None = None) -> Iterator[tuple[int, int]]:
        """(lo, hi) of parts of at most ``rows`` rows covering the column in order, none across the edge
        of a held part (whose rows ``part`` then gives as a view, not a copy)."""
        yield from parts(self._on_disk, rows)
        at = self._on_disk
        for a in self._held:
            yield from ((at + lo, at + hi) for lo, hi in parts(len(a), rows))
            at += len(a)

    def part(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo:hi``: a view of a held part when they lie in one, else read (from the file)."""
        return self[lo:hi]

    def put(self, lo: int, rows: np.ndarray) -> None:
        """Rows ``lo:lo + len(rows)`` replaced by ``rows`` (in the file, or in the held parts)."""
        hi = lo + len(rows)
        if self._path is not None and lo < self._on_disk:
            n = min(hi, self._on_disk) - lo
            with open(self._path, "r+b") as f:
                f.seek(lo * self.dtype.itemsize)
                f.write(memoryview(np_contiguous(rows[:n])).cast("B"))
        at = self._on_disk
        for a in self._held:
            a_lo, a_hi = max(lo, at), min(hi, at + len(a))
            if a_lo < a_hi:
                a[a_lo - at:a_hi - at] = rows[a_lo - lo:a_hi - lo]
            at += len(a)

    def close(self) -> None:
        """Drop the rows (the held ones' room given back) and the file."""
        if self._held_bytes:
            self.room.give(self._held_bytes)
        self._held, self._held_bytes = [], 0
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass


class ScanSink:
    """The columns of one scan, drawing on ``room``, spilling to ``folder``."""

    part_bytes = PART_BYTES

    def __init__(self, room: Room, folder: SpillFolder):
        self.room, self.folder = room, folder
        self.columns: dict[str, ScanColumn] = {}

    def column(self, name: str, dtype) -> ScanColumn:
        col = self.columns[name] = ScanColumn(dtype, self.room, self.folder, name)
        return col

    def take(self, n: int) -> None:
        """Count ``n`` bytes the scan keeps beside its columns (its per-ledger tables), whether they fit
        or not: the columns spill sooner."""
        with self.room.lock:
            self.room.used += n

    @property
    def spilled(self) -> bool:
        return any(c.spilled for c in self.columns.values())

    def close(self) -> None:
        """Drop every column (a scan that failed)."""
        for c in self.columns.values():
            c.close()


def parts(n: int, rows: int | None = None) -> Iterator[tuple[int, int]]:
    """(lo, hi) of ``n`` rows cut into parts of at most ``rows`` (default ``PART_ROWS``)."""
    rows = max(1, PART_ROWS if rows is None else rows)
    for lo in range(0, n, rows):
        yield lo, min(n, lo + rows)
