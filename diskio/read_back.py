"""Spilled rows read back into memory the process used before, not into fresh pages.

Reading a spill file part by part into a new array each time makes the kernel hand the process new
pages for every part (blocks of 8 MiB and more go back to the system when freed, which bounds a
check's peak: diskio.config.large_blocks_returned): a page fault and a page cleared per 4 KiB read
back. A check of a large bookie reads gigabytes back, and on a virtual machine a page the guest has
not touched lately costs several times more than one it has.
``ReadBuffers`` (one per spill folder, keeping at most a tenth of its memory limit) keeps a few blocks
and gives a part one that nobody refers to any longer: a numpy view keeps its block referenced, so a
block is free again once every array read into it is gone.
"""
from __future__ import annotations

import io
import os
import sys
import threading
from typing import TYPE_CHECKING

from bkdisk.diskio.spill_files import SpillError

if TYPE_CHECKING:
    import numpy as np

KEPT_BLOCKS = 6              # blocks kept for reuse (a reader holds one or two parts; the joins read ahead)
_UNUSED = 2                  # getrefcount of a block only the pool's list refers to (and the call's argument)


class ReadBuffers:
    """Blocks of bytes that parts read back from spill files go into, each reused once no array refers
    to it. ``read`` (and ``diskio.spill.joined_range_rows``, filling one block from several files) is
    how the spill files are read back."""

    def __init__(self, kept_bytes: int, kept_blocks: int = KEPT_BLOCKS):
        self.kept_blocks, self.kept_bytes = kept_blocks, kept_bytes
        self._blocks: list[np.ndarray] = []
        self._lock = threading.Lock()

    def block(self, nbytes: int) -> np.ndarray:
        """A block of at least ``nbytes`` no array refers to (uint8), kept for the next part when it fits."""
        import numpy as np
        with self._lock:
            blocks = self._blocks
            free = [i for i in range(len(blocks)) if sys.getrefcount(blocks[i]) <= _UNUSED]
            fits = [i for i in free if len(blocks[i]) >= nbytes]
            if fits:
                return blocks[min(fits, key=lambda i: len(blocks[i]))]
            new = np.empty(-(-nbytes // 4096) * 4096, np.uint8)   # (whole pages: a row count's bytes rarely are)
            if free:   # the largest free block is too small: the new one takes its place
                del blocks[max(free, key=lambda i: len(blocks[i]))]
            if len(blocks) < self.kept_blocks and sum(len(b) for b in blocks) + len(new) <= self.kept_bytes:
                blocks.append(new)
            return new

    def read(self, f: io.RawIOBase, path: str, dtype: np.dtype, n: int, offset: int | None = None) -> np.ndarray:
        """``n`` rows of ``dtype`` from the open spill file ``f`` (at byte ``offset``, else where it is)."""
        nbytes = n * dtype.itemsize
        out = self.block(nbytes)[:nbytes]
        read_into(f, path, out, offset)
        return out.view(dtype)

    def read_rows(self, path: str, dtype: np.dtype, n: int | None = None, offset: int = 0) -> np.ndarray:
        """``n`` rows of ``dtype`` of the spill file ``path`` from byte ``offset`` (all of it: ``n`` None)."""
        with open(path, "rb", buffering=0) as f:
            if n is None:
                n = (os.fstat(f.fileno()).st_size - offset) // dtype.itemsize
            return self.read(f, path, dtype, n, offset)

    def clear(self) -> None:
        """Drop the blocks kept (the arrays still read into them keep theirs)."""
        with self._lock:
            self._blocks = []


def read_into(f: io.RawIOBase, path: str, out: np.ndarray, offset: int | None = None) -> None:
    """Fill ``out`` (a contiguous array) with the next bytes of the open spill file ``f`` (from byte
    ``offset``, else from where it is)."""
    import numpy as np
    nbytes = out.nbytes
    start = f.seek(offset) if offset is not None else f.tell()
    view, got = out.view(np.uint8).data, 0
    while got < nbytes:   # (one read returns at most 2 GiB)
        step = f.readinto(view[got:])
        if not step:
            raise SpillError(f"{path}: spill file ends early: {nbytes} bytes wanted at offset {start}, "
                             f"{got} read (was it changed while the command ran?)")
        got += step
