"""Read-only memory maps of whole files or windows of them, as numpy byte arrays."""
from __future__ import annotations

import mmap
import os
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from formats.errors import BkdiskError


class DiskError(BkdiskError):
    """A file could not be opened or read (permissions, vanished, not a regular file)."""

    def __init__(self, path: str, what: str):
        self.path = path
        self.what = what
        super().__init__(f"{path}: {what}")


_EMPTY = np.zeros(0, dtype=np.uint8)


@contextmanager
def map_file(path: str | os.PathLike) -> Iterator[np.ndarray]:
    """Yield a read-only uint8 view of the whole file (an empty array for a 0-byte file).

    The file is opened O_RDONLY and mapped PROT_READ: nothing reached through this can write.
    """
    with map_window(path, 0, 1 << 62) as arr:
        yield arr


@contextmanager
def map_window(path: str | os.PathLike, offset: int, length: int) -> Iterator[np.ndarray]:
    """Yield a read-only view of ``length`` bytes at ``offset`` (clipped to the file's end)."""
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError as e:
        raise DiskError(p, f"cannot open for reading ({e.strerror})") from None
    try:
        size = os.fstat(fd).st_size
        length = max(0, min(length, size - offset))
        if length == 0:
            yield _EMPTY
            return
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        mm = mmap.mmap(fd, length + (offset - start), access=mmap.ACCESS_READ, offset=start)
        try:
            arr = np.frombuffer(mm, dtype=np.uint8)[offset - start:]
            yield arr
        finally:
            del arr
            try:
                mm.close()
            except BufferError:
                pass
    finally:
        os.close(fd)


def read_bytes(path: str | os.PathLike) -> bytes:
    """The whole file, read-only, with a DiskError naming the file on failure."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError as e:
        raise DiskError(p, f"cannot read ({e.strerror})") from None
