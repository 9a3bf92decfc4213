"""Read-only memory maps of whole files or windows of them, as numpy byte arrays.

Every file is opened through ``open_regular``: ``O_RDONLY | O_NONBLOCK``, then ``fstat``, and
anything but a regular file (a FIFO, a device, a socket, a directory) is refused with a DiskError
"not a regular file". Opening a FIFO without O_NONBLOCK would block until a writer appears, and
reading a device such as ``/dev/zero`` would never end. Symbolic links are followed (a bookie dir
may well be a link); only what they lead to must be a regular file.
"""
from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from bkdisk.diskio.fault_guard import noting
from bkdisk.formats.errors import BkdiskError

NOT_REGULAR = "not a regular file"
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class DiskError(BkdiskError):
    """A file could not be opened or read (permissions, vanished, not a regular file)."""

    def __init__(self, path: str, what: str, errno: int | None = None):
        self.path = path
        self.what = what
        self.errno = errno   # the OS error, when the system refused (permissions: a rebuild would not help)
        super().__init__(f"{path}: {what}")


_EMPTY = np.zeros(0, dtype=np.uint8)


def open_regular(path: str | os.PathLike, what: str = "cannot open for reading") -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path`` and its fstat; DiskError otherwise.

    ``what`` starts the message when the open itself fails (followed by the system's reason).
    The caller closes the descriptor.
    """
    p = os.fspath(path)
    try:
        fd = os.open(p, OPEN_FLAGS)
    except OSError as e:
        raise DiskError(p, f"{what} ({e.strerror})", e.errno) from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise DiskError(p, f"{what} ({e.strerror})", e.errno) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise DiskError(p, NOT_REGULAR)
    return fd, st


def file_size(path: str | os.PathLike) -> int:
    """The size of the regular file ``path`` (DiskError when it is not one or cannot be opened)."""
    fd, st = open_regular(path, "cannot read")
    os.close(fd)
    return st.st_size


def read_range(path: str | os.PathLike, offset: int, length: int) -> bytes:
    """Up to ``length`` bytes at ``offset`` of the regular file ``path``."""
    p = os.fspath(path)
    fd, _st = open_regular(p, "cannot read")
    try:
        out, at = [], offset
        while length > 0:
            b = os.pread(fd, length, at)
            if not b:
                break
            out.append(b)
            at += len(b)
            length -= len(b)
        return b"".join(out)
    except OSError as e:
        raise DiskError(p, f"cannot read ({e.strerror})", e.errno) from None
    finally:
        os.close(fd)


@contextmanager
def map_file(path: str | os.PathLike) -> Iterator[np.ndarray]:
    """Yield a read-only uint8 view of the whole file (an empty array for a 0-byte file).

    The file is opened O_RDONLY and mapped PROT_READ: nothing reached through this can write.
    """
    with map_window(path, 0, 1 << 62) as arr:
        yield arr


@contextmanager
def map_window(path: str | os.PathLike, offset: int, length: int, *, random_access: bool = False
               ) -> Iterator[np.ndarray]:
    """Yield a read-only view of ``length`` bytes at ``offset`` (clipped to the file's end).
    ``random_access`` (MADV_RANDOM): a page the reader touches is read alone, without the kernel's
    read-around of its neighbours (for a reader that asked for the pages it needs: ``will_need``)."""
    p = os.fspath(path)
    fd, st = open_regular(p)
    try:
        size = st.st_size
        length = max(0, min(length, size - offset))
        if length == 0:
            yield _EMPTY
            return
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        mm = mmap.mmap(fd, length + (offset - start), access=mmap.ACCESS_READ, offset=start)
        if random_access and hasattr(mm, "madvise"):
            mm.madvise(mmap.MADV_RANDOM)
        try:
            arr = np.frombuffer(mm, dtype=np.uint8)[offset - start:]
            with noting(p, offset, length):   # named if a read of it faults (diskio/fault_guard.py)
                yield arr
        finally:
            del arr
            try:
                mm.close()
            except BufferError:
                pass
    finally:
        os.close(fd)


def page_runs(offsets: np.ndarray, span: int, page: int = mmap.PAGESIZE) -> tuple[np.ndarray, np.ndarray]:
    """The pages holding [offset, offset + span) for each of ``offsets`` (sorted here if they are not), as
    runs of adjacent pages: each run's first page and its length in pages (in order, none adjacent to
    the next)."""
    at = np.asarray(offsets, np.int64)
    if len(at) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if (at[1:] < at[:-1]).any():
        at = np.sort(at)
    first, last = at // page, (at + max(int(span), 1) - 1) // page
    # A record's pages run from its first to its last; sorted offsets may still give records whose
    # pages overlap or touch: a run goes on while the next record starts at most a page past its end.
    end = np.maximum.accumulate(last)
    breaks = np.flatnonzero(first[1:] > end[:-1] + 1) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [len(at)]]) - 1
    return first[starts], end[ends] - first[starts] + 1


# The small files read whole (cookies, lastMark, ledger metadata, RocksDB's CURRENT) hold bytes to
# kilobytes: a larger one is damage (or a sparse file of terabytes), refused before it is read.
SMALL_FILE_LIMIT = 64 << 20


def read_bytes(path: str | os.PathLike, limit: int | None = SMALL_FILE_LIMIT) -> bytes:
    """The whole regular file, read-only, with a DiskError naming the file on failure; a file of more
    than ``limit`` bytes is refused (None: no limit, for the reference readers of whole logs)."""
    p = os.fspath(path)
    fd, st = open_regular(p, "cannot read")
    if limit is not None and st.st_size > limit:
        os.close(fd)
        raise DiskError(p, f"expected a small file (at most {limit} bytes), found {st.st_size} bytes")
    # os.read on the descriptor: a buffered file object costs more than the read of a small file.
    try:
        data = os.read(fd, st.st_size + 1)
        if len(data) != st.st_size:   # short of fstat's size, or grown since: read on to the end
            parts = [data]
            while chunk := os.read(fd, max(st.st_size, 65536)):
                parts.append(chunk)
            data = b"".join(parts)
    except OSError as e:
        raise DiskError(p, f"cannot read ({e.strerror})", e.errno) from None
    finally:
        os.close(fd)
    return data


def drop_pages(view, end: int) -> None:
    """Drop the pages of a read-only file map below ``end`` from the process (MADV_DONTNEED): read once,
    they need not stay in its resident set; the page cache keeps them, and a later read maps them again.
    A view not over a map (bytes, a copy) is left alone."""
    obj = view.obj if isinstance(view, memoryview) else view
    while obj is not None and not isinstance(obj, mmap.mmap):
        obj = getattr(obj, "base", None) if not isinstance(obj, memoryview) else obj.obj
    if obj is None or not hasattr(obj, "madvise"):
        return
    end = min(end, len(obj)) // mmap.PAGESIZE * mmap.PAGESIZE
    if end > 0:
        obj.madvise(mmap.MADV_DONTNEED, 0, end)
