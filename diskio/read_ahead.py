"""Asking the kernel for files before they are read: on a cold disk, small files read one after
another wait a device's latency each, while asked together they are read with many requests in
flight. Only advice: a file that cannot be opened or asked for is left to its read, which says why.

Asking costs a few system calls a file, which a warm page cache does not need: ``resident_pages`` tells
the two apart by one mincore of many pages (a warm log's header pages are not asked one by one), and
``cached`` by mincore of one page where Linux answers it, else by one read that may not wait (RWF_NOWAIT
fails when the page is not in the cache, but starts reading it: on a fast device that read may land
before the answer, a cold page then said cached).
"""
from __future__ import annotations

import ctypes
import functools
import mmap
import os
from collections.abc import Iterable

import numpy as np

from bkdisk.diskio.mapped import OPEN_FLAGS, page_runs


def cached(path: str, offset: int = 0) -> bool:
    """Whether the page of ``path`` at ``offset`` is in the page cache; True when the system cannot
    tell or the file cannot be read here (its read reports that). Asked of mincore where it answers
    (nothing read); else of a read that may not wait, whose miss starts reading the page (the kernel's
    read-ahead): ask only of a page that is wanted."""
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError:
        return True
    try:
        page = offset - offset % mmap.PAGESIZE
        pages = resident_pages(fd, 1, page)
        if pages is not None:
            return bool(pages[0])
        nowait = getattr(os, "RWF_NOWAIT", None)
        if nowait is None:
            return True
        try:
            os.preadv(fd, [bytearray(1)], offset, nowait)
        except BlockingIOError:
            return False
        except OSError:   # EOPNOTSUPP on a file system without it, EISDIR, ...: cannot tell
            return True
        return True
    finally:
        os.close(fd)


# The most one POSIX_FADV_WILLNEED starts reading: the kernel cuts a request to its device's read-ahead
# window (read_ahead_kb; 128 KiB unless the system set another), so a longer range is asked a window at a time.
DEFAULT_WINDOW = 128 << 10
_windows: dict[int, int] = {}


def ask_window(fd: int) -> int:
    """Bytes one request for the file of ``fd`` is read to at most: its device's read-ahead window
    (``/sys/dev/block/M:m``, the partition's disk for a partition), else DEFAULT_WINDOW."""
    dev = os.fstat(fd).st_dev
    got = _windows.get(dev)
    if got is None:
        got = DEFAULT_WINDOW
        base = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
        for p in (f"{base}/bdi/read_ahead_kb", f"{base}/../bdi/read_ahead_kb"):
            try:
                with open(p) as f:
                    got = max(int(f.read()) << 10, 4096)
                break
            except (OSError, ValueError):
                continue
        _windows[dev] = got
    return got


def ask_range(fd: int, offset: int, length: int, step: int | None = None) -> None:
    """Ask the kernel to start reading [offset, offset + length) of ``fd`` now, a window at a time
    (``step``: ask_window(fd), when the caller knows it)."""
    step = step or ask_window(fd)
    for at in range(offset, offset + length, step):
        os.posix_fadvise(fd, at, min(step, offset + length - at), os.POSIX_FADV_WILLNEED)


@functools.cache
def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def resident_pages(fd: int, length: int, offset: int = 0) -> np.ndarray | None:
    """Which pages of ``length`` bytes from ``offset`` (a page boundary) of the file of ``fd`` are in the
    page cache, a bool a page (mincore of a map of them: nothing is read, nothing faulted in); None when
    the system cannot tell, or would not (``mincore_answers``)."""
    if length <= 0 or not hasattr(mmap, "MAP_SHARED") or not mincore_answers(fd):
        return None
    try:
        libc = _libc()
    except (OSError, AttributeError):   # no C library, or one without mincore
        return None
    pages = -(-length // mmap.PAGESIZE)
    addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        return None
    try:
        vec = np.zeros(pages, np.uint8)
        if libc.mincore(addr, length, vec.ctypes.data) != 0:
            return None
    finally:
        libc.munmap(addr, length)
    return (vec & 1).astype(np.bool_)


def mincore_answers(fd: int) -> bool:
    """Whether Linux's mincore tells this process which pages of the file of ``fd`` are cached: only
    to the file's owner, to root, or to a process that may write the file; to any other it says every
    page is (so that it learns nothing of others' reads)."""
    euid = os.geteuid()
    try:
        if euid == 0 or os.fstat(fd).st_uid == euid:
            return True
        return os.access(f"/proc/self/fd/{fd}", os.W_OK, effective_ids=True)
    except (OSError, NotImplementedError):
        return False


def missing_runs(first: np.ndarray, pages: np.ndarray, resident: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the runs of pages (each one's first page and length, in order, none touching the next), the
    runs of those pages that are not ``resident`` (one bool a page, from page 0 to the last run's end)."""
    n = len(resident)
    edges = np.zeros(n + 1, np.int32)   # +1 where a run begins, -1 past its end: wanted where the sum is 1
    edges[first] += 1
    edges[first + pages] -= 1
    want = (np.cumsum(edges[:n]) > 0) & ~resident
    change = np.diff(want.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(change == 1), np.flatnonzero(change == -1)
    return starts.astype(np.int64), (ends - starts).astype(np.int64)


def will_need(fd: int, offsets: np.ndarray, span: int) -> int:
    """Ask the kernel to start reading the pages that hold [offset, offset + span) for each of the
    sorted ``offsets`` and are not in the page cache yet (a request per run of adjacent pages, a run
    longer than the device's window asked a window at a time): scattered records' pages read at once,
    in the background, instead of one page fault after another. Returns the bytes asked for."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    try:
        size = os.fstat(fd).st_size
    except OSError:   # only advice: the reads themselves report a file that cannot be read
        return 0
    offsets = offsets[(offsets >= 0) & (offsets < size)]   # (a damaged location's, or past a cut file's end)
    if len(offsets) == 0:
        return 0
    page = mmap.PAGESIZE
    first, pages = page_runs(offsets, span, page)
    resident = resident_pages(fd, int(first[-1] + pages[-1]) * page)
    if resident is not None:
        first, pages = missing_runs(first, pages, resident)
    step = ask_window(fd)
    asked = 0
    for at, n in zip((first * page).tolist(), (pages * page).tolist(), strict=True):
        try:
            ask_range(fd, at, n, step)
        except OSError:   # only advice: the reads themselves report a file that cannot be read
            break
        asked += n
    return asked


def ask_for_files(paths: Iterable[str]) -> None:
    """Ask the kernel to start reading each file now (POSIX_FADV_WILLNEED: its first read-ahead window,
    the whole of an index file of a few pages), in the background."""
    if not hasattr(os, "posix_fadvise"):
        return
    advise, need = os.posix_fadvise, os.POSIX_FADV_WILLNEED
    for p in paths:
        try:
            fd = os.open(p, OPEN_FLAGS)
        except OSError:
            continue
        try:
            advise(fd, 0, 0, need)
        except OSError:
            pass
        finally:
            os.close(fd)
