"""An append-only array kept within a byte budget: held while it fits, then in a file of the check's
spill folder (diskio.spill), read back a chunk or a slice at a time into the folder's reused blocks."""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from bkdisk.diskio.spill_files import np_contiguous, spill_file, write_rows

if TYPE_CHECKING:
    import numpy as np

    from bkdisk.diskio.spill import SpillFolder


class ChunkedArray:
    """An append-only array of one dtype, held while it fits in ``budget`` bytes and then in a file of
    the spill folder; read back in order a chunk at a time (``chunks``), so a whole pass over it
    holds one chunk. ``array()``: the whole, for the steps that need it at once (small, or damage).

    ``tap``: given the rows as they come (``tap.add(first row, rows)``, ``tap.clear()`` when emptied), for
    a step that would otherwise read them back once they spilled."""

    def __init__(self, dtype, budget: int, folder: SpillFolder, name: str = "column", tap=None):
        import numpy as np
        self.dtype, self.budget, self.folder, self.name = np.dtype(dtype), int(budget), folder, name
        self.tap = tap
        self._held: list[np.ndarray] = []
        self._held_bytes = 0
        self._path: str | None = None
        self._on_disk = 0
        self._rows = 0

    def clear(self) -> None:
        """Empty again: the rows held dropped, the file removed (its room on the spill folder's disk given back)."""
        if self._path is not None:
            try:
                os.unlink(self._path)
            except FileNotFoundError:
                pass
        self._held, self._held_bytes, self._path, self._on_disk, self._rows = [], 0, None, 0, 0
        if self.tap is not None:
            self.tap.clear()

    def __len__(self) -> int:
        return self._rows

    @property
    def spilled(self) -> bool:
        return self._path is not None

    def append(self, arr: np.ndarray) -> None:
        if len(arr) == 0:
            return
        if self.tap is not None:
            self.tap.add(self._rows, arr)
        self._held.append(np_contiguous(arr))
        self._held_bytes += arr.nbytes
        self._rows += len(arr)
        if self._held_bytes > self.budget:
            self._flush()

    def write(self, arr: np.ndarray) -> None:
        """Rows after the ones so far, written to the file now (the rows held first): nothing of ``arr``
        is kept, so its owner may fill it again."""
        self.append(arr)
        if self._held:
            self._flush()

    def _flush(self) -> None:
        if self._path is None:
            self._path = spill_file(self.folder, self.name)
        write_rows(self._path, self._held)
        self._on_disk += sum(len(a) for a in self._held)
        self._held, self._held_bytes = [], 0

    def chunks(self, rows: int = 1 << 20) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows) in order, at most ``rows`` at a time from the file, then the held parts."""
        start = 0
        if self._path is not None:
            with open(self._path, "rb", buffering=0) as f:
                while start < self._on_disk:
                    n = min(rows, self._on_disk - start)
                    yield start, self.folder.read_back.read(f, self._path, self.dtype, n)
                    start += n
        for a in self._held:
            for lo in range(0, len(a), rows):
                yield start, a[lo:lo + rows]
                start += len(a[lo:lo + rows])

    def __getitem__(self, what):
        """Rows ``lo:hi`` (read from the file as far as they are in it), one row, or a whole column by
        name (the whole array: for the steps that look at all of it at once, on damage only)."""
        import numpy as np
        if not isinstance(what, (slice, int, np.integer)):   # a column name, an index array
            return self.array()[what]
        if isinstance(what, (int, np.integer)):
            i = int(what) + (self._rows if what < 0 else 0)
            return self[i:i + 1][0]
        lo, hi, step = what.indices(self._rows)
        if step != 1:
            raise IndexError("ChunkedArray takes contiguous slices")
        parts = []
        if lo < self._on_disk and self._path is not None:
            n = min(hi, self._on_disk) - lo
            parts.append(self.folder.read_back.read_rows(self._path, self.dtype, n, lo * self.dtype.itemsize))
        at = self._on_disk
        for a in self._held:
            a_lo, a_hi = max(lo, at), min(hi, at + len(a))
            if a_lo < a_hi:
                parts.append(a[a_lo - at:a_hi - at])
            at += len(a)
        if not parts:
            return np.zeros(0, self.dtype)
        return parts[0] if len(parts) == 1 else _joined(parts, self.dtype)

    def array(self) -> np.ndarray:
        import numpy as np
        parts = [c for _s, c in self.chunks(1 << 62)]
        if not parts:
            return np.zeros(0, self.dtype)
        return parts[0] if len(parts) == 1 else _joined(parts, self.dtype)


def _joined(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """The rows of ``parts`` in one array, copied as their bytes (numpy joins a packed structured dtype
    field by field, many times slower)."""
    from bkdisk.diskio.windowed import concat_rows
    return concat_rows(parts, dtype)
