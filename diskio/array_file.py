"""One array spilled whole to a file of the spill folder and mapped back a range of rows at a time."""
from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

from bkdisk.diskio.spill import SpillFolder, np_contiguous

if TYPE_CHECKING:
    import numpy as np


class ArrayFile:
    """One array written whole to the spill folder. ``load`` gives rows ``lo:hi`` as a private map of the
    file's pages: the page cache's pages, not fresh memory; a write to it copies only the pages written
    and never reaches the file."""

    def __init__(self, folder: SpillFolder, arr: np.ndarray, name: str):
        self.dtype, self.shape = arr.dtype, arr.shape
        fd, self.path = tempfile.mkstemp(prefix=f"{name}-", suffix=".bin", dir=folder.get())
        with os.fdopen(fd, "wb") as f:
            f.write(memoryview(np_contiguous(arr)).cast("B"))

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def load(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        import numpy as np
        n, per_row = max(0, min(len(self) if hi is None else hi, len(self)) - lo), int(np.prod(self.shape[1:]))
        if n * per_row == 0:
            return np.zeros((n, *self.shape[1:]), self.dtype)
        mapped = np.memmap(self.path, self.dtype, "c", offset=lo * per_row * self.dtype.itemsize,
                           shape=(n, *self.shape[1:]))
        return mapped.view(np.ndarray)

    def store(self, arr: np.ndarray) -> None:
        """Replace the content (same dtype and length)."""
        with open(self.path, "r+b") as f:
            f.write(memoryview(np_contiguous(arr)).cast("B"))
