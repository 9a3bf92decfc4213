"""Where a scanner puts its per-record output as it scans: each column held in memory while a share of
``--memory-limit`` (drawn on by several scans at once) has room for it, else written to the spill
folder part by part.

A scanner (entry logs, journals) fills a table window by window. While its column holds the table's
rows within the room (``ScanColumn.holds``), the table stays where it is and becomes the column's part
at the end: a scan that fits costs no copy. Once the room has none, the column spills and the scanner
hands its table over each time it passes ``ScanSink.part_bytes``, then fills it again from its first
row. So no file's per-record output is ever held whole beyond the share: a scan holds at most one
table of a part and a window beyond what its columns keep, and the columns keep within the share they
draw on (``Room``), whatever the number of records. Columns are read back a range of rows at a time,
in the order they were written.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from bkdisk.diskio.spill import SpillFolder
from bkdisk.diskio.spill_files import spill_file, write_rows

if TYPE_CHECKING:
    import numpy as np

PART_BYTES = 8 << 20   # a spilling scanner's table is handed over past this (at a window's end)
PART_ROWS = 1 << 17    # rows a reader takes at once (below glibc's mmap threshold: its memory is reused)


class RowTap(Protocol):
    """What a column gives its rows to as they come: ``add(first row, rows)``, in order."""

    def add(self, first: int, rows: np.ndarray) -> None: ...


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

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)


class ScanColumn:
    """One per-record column of a scan: its parts held while its room allows; from the first part that
    does not fit on, every part (those held so far first, their room given back) in a file of the
    spill folder, in order. Read back a range of rows at a time."""

    def __init__(self, dtype, room: Room, folder: SpillFolder, name: str = "column",
                 look: Callable[[np.ndarray], np.ndarray] | None = None, tap: RowTap | None = None):
        import numpy as np
        self.dtype, self.room, self.folder, self.name = np.dtype(dtype), room, folder, name
        self.tap = tap   # given every row once, in order, as it is appended (held or spilled)
        # ``look``: which rows a reader must see (the rest it would pass over); per appended array its
        # rows and how many of them it must see, so ``any_to_look`` answers without reading the rows.
        self.look = look
        self._looks: list[list[int]] = []   # [first row, end row, rows to look at]
        self._held: list[np.ndarray] = []   # while the room holds it
        self._held_rows = self._held_bytes = 0
        self._path: str | None = None       # past that
        self._on_disk = 0
        self._table = 0                     # bytes of a scanner's table taken from the room (``holds``)

    def __len__(self) -> int:
        return self._held_rows + self._on_disk

    @property
    def spilled(self) -> bool:
        return self._path is not None

    def append(self, arr: np.ndarray, *, copy: bool = True) -> None:
        """Rows after the ones so far; ``copy``: ``arr`` is a table the caller fills again (held rows
        are copied out of it; rows written to the file need no copy)."""
        if self._table:
            self.room.give(self._table)   # (the table's rows come now, as ``arr``)
            self._table = 0
        if len(arr) == 0:
            return
        if self.tap is not None:
            self.tap.add(len(self), arr)
        if self.look is not None:
            n = len(self)
            self._looks.append([n, n + len(arr), int(self.look(arr).sum())])
        if self._path is None and self.room.take(arr.nbytes):
            self._held.append(arr.copy() if copy else arr)
            self._held_rows += len(arr)
            self._held_bytes += arr.nbytes
            return
        self._spill()
        assert self._path is not None
        write_rows(self._path, [arr])
        self._on_disk += len(arr)

    def _spill(self) -> None:
        """From now on the rows are in the file: the parts held so far go first (a column that does not
        fit is read from its file, and the room it held is left to the scans that fit whole, and to the
        passes after the scans)."""
        if self._path is not None:
            return
        self._path = spill_file(self.folder, self.name)
        with self.room.lock:
            self.room.spilled += 1
        held, freed = self._held, self._held_bytes
        self._held, self._held_rows, self._held_bytes = [], 0, 0
        write_rows(self._path, held)
        self._on_disk += sum(len(a) for a in held)
        if freed:
            self.room.give(freed)

    def holds(self, table: np.ndarray) -> bool:
        """Whether the column may leave ``table`` (the first rows of a scanner's table, which it goes on
        filling) where it is, in memory, as rows to come: their bytes are taken from the room. False
        once the room has none for them: the column then spills (the parts held so far written to its
        file first), and the scanner hands its table's rows over and fills it again."""
        if self._path is not None:
            return False
        more = table.nbytes - self._table
        if more <= 0 or self.room.take(more):
            self._table += max(more, 0)
            return True
        self.room.give(self._table)
        self._table = 0
        self._spill()
        return False

    def rows_to_hold(self, used: int) -> int | None:
        """The rows a scanner's table may be grown to while this column holds it: ``used`` and what the
        room has left (None: the column spilled, and the table holds a part)."""
        return None if self._path is not None else used + self.room.left // self.dtype.itemsize

    def join_held(self) -> None:
        """The parts held, as one array (one copy): its readers then take views of it."""
        if len(self._held) > 1:
            from bkdisk.diskio.windowed import concat_rows
            self._held = [concat_rows(self._held, self.dtype)]

    def bounds(self, rows: int | None = None) -> Iterator[tuple[int, int]]:
        """(lo, hi) of parts of at most ``rows`` rows covering the column in order, none across the edge
        of a held part (whose rows ``part`` then gives as a view, not a copy)."""
        at = 0
        for a in self._held:
            yield from ((at + lo, at + hi) for lo, hi in parts(len(a), rows))
            at += len(a)
        yield from ((at + lo, at + hi) for lo, hi in parts(self._on_disk, rows))

    def part(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo:hi``: a view of a held part when they lie in one, else read (the file's from it)."""
        lo, hi = max(0, lo), min(hi, len(self))
        got, at = [], 0
        for a in self._held:
            a_lo, a_hi = max(lo, at), min(hi, at + len(a))
            if a_lo < a_hi:
                got.append(a[a_lo - at:a_hi - at])
            at += len(a)
        if hi > at and self._path is not None:
            f_lo = max(lo, at) - at
            n, at_byte = hi - at - f_lo, f_lo * self.dtype.itemsize
            got.append(self.folder.read_back.read_rows(self._path, self.dtype, n, at_byte))
        if len(got) == 1:
            return got[0]
        from bkdisk.diskio.windowed import concat_rows
        return concat_rows(got, self.dtype)

    def row(self, i: int) -> np.void:
        """Row ``i`` (counted from the end when negative)."""
        i += len(self) if i < 0 else 0
        return self.part(i, i + 1)[0]

    def array(self) -> np.ndarray:
        return self.part(0, len(self))

    def any_to_look(self, lo: int, hi: int) -> bool:
        """Whether rows ``lo:hi`` hold one that ``look`` picks (always, without a ``look``)."""
        return self.look is None or any(n and a < hi and b > lo for a, b, n in self._looks)

    def put(self, lo: int, rows: np.ndarray) -> None:
        """Rows ``lo:lo + len(rows)`` replaced by ``rows`` (in the held parts, or in the file)."""
        hi, at = lo + len(rows), 0
        if self.look is not None and len(rows):
            # Counted against the rows they replace (read back from the file). Held rows a caller changed
            # in place before putting them back count as they did: an upper bound, never too low, and a
            # held part is read again without any I/O.
            now, before = self.look(rows), self.look(self.part(lo, hi))
            for mark in self._looks:
                m_lo, m_hi = max(lo, mark[0]) - lo, min(hi, mark[1]) - lo
                if m_lo < m_hi:
                    mark[2] += int(now[m_lo:m_hi].sum()) - int(before[m_lo:m_hi].sum())
        for a in self._held:
            a_lo, a_hi = max(lo, at), min(hi, at + len(a))
            if a_lo < a_hi:
                a[a_lo - at:a_hi - at] = rows[a_lo - lo:a_hi - lo]
            at += len(a)
        if hi > at and self._path is not None:
            write_rows(self._path, [rows[max(lo, at) - lo:]], at=(max(lo, at) - at) * self.dtype.itemsize)

    def close(self) -> None:
        """Drop the rows (the held ones' room given back) and the file."""
        if self._held_bytes or self._table:
            self.room.give(self._held_bytes + self._table)
        self._held, self._held_rows, self._held_bytes, self._table = [], 0, 0, 0
        self._looks = []
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
            self._path, self._on_disk = None, 0


class ScanSink:
    """The columns of one scan, drawing on ``room``, spilling to ``folder``."""

    part_bytes = PART_BYTES

    def __init__(self, room: Room, folder: SpillFolder):
        self.room, self.folder = room, folder
        self.columns: dict[str, ScanColumn] = {}
        self.taps: dict[str, RowTap] = {}   # by column name: set before the scan makes its columns
        self.taken = 0

    def column(self, name: str, dtype, look: Callable[[np.ndarray], np.ndarray] | None = None) -> ScanColumn:
        col = self.columns[name] = ScanColumn(dtype, self.room, self.folder, name, look, self.taps.get(name))
        return col

    def tap(self, name: str, tap: RowTap) -> ScanSink:
        """Give ``tap`` every row of the column ``name`` as the scan appends it: a step that reads the
        rows once, in order, takes them then, and never reads back a spilled column for them."""
        self.taps[name] = tap
        return self

    def take(self, n: int) -> None:
        """Count ``n`` bytes the scan keeps beside its columns (its per-ledger tables), whether they fit
        or not: the columns spill sooner."""
        with self.room.lock:
            self.room.used += n
        self.taken += n

    @property
    def spilled(self) -> bool:
        return any(c.spilled for c in self.columns.values())

    def close(self) -> None:
        """Drop every column and give back what the scan took (a scan that failed, or one read to its end)."""
        for c in self.columns.values():
            c.close()
        self.room.give(self.taken)
        self.taken = 0


class SinkKept:
    """A scan whose per-record arrays are its sink's columns (mixed into the scan's own class)."""

    columns: dict[str, ScanColumn]
    sink: ScanSink

    @classmethod
    def kept(cls, scan, sink: ScanSink, per_record: tuple[str, ...]):
        """``scan`` (its per-record fields, ``per_record``, left out) over ``sink``'s columns."""
        out = object.__new__(cls)
        out.__dict__.update({k: v for k, v in vars(scan).items() if k not in per_record})
        out.columns, out.sink = dict(sink.columns), sink
        return out

    @property
    def spilled(self) -> bool:
        return any(c.spilled for c in self.columns.values())

    def close(self) -> None:
        """Drop the columns and give back what the scan took of its room."""
        self.sink.close()


def parts(n: int, rows: int | None = None) -> Iterator[tuple[int, int]]:
    """(lo, hi) of ``n`` rows cut into parts of at most ``rows`` (default ``PART_ROWS``)."""
    rows = max(1, PART_ROWS if rows is None else rows)
    for lo in range(0, n, rows):
        yield lo, min(n, lo + rows)
