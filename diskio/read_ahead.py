"""Asking the kernel for files before they are read: on a cold disk, small files read one after
another wait a device's latency each, while asked together they are read with many requests in
flight. Only advice: a file that cannot be opened or asked for is left to its read, which says why.

Asking costs a few system calls a file, which a warm page cache does not need: ``cached`` tells the
two apart by one read that may not wait (RWF_NOWAIT fails when the page is not in the cache).
"""
from __future__ import annotations

import os
from collections.abc import Iterable

from bkdisk.diskio.mapped import OPEN_FLAGS


def cached(path: str, offset: int = 0) -> bool:
    """Whether the page of ``path`` at ``offset`` is in the page cache; True when the system cannot
    tell (no RWF_NOWAIT) or the file cannot be read here (its read reports that). A miss starts
    reading the page (the kernel's read-ahead of a read that may not wait): ask only of a page that
    is wanted."""
    nowait = getattr(os, "RWF_NOWAIT", None)
    if nowait is None:
        return True
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError:
        return True
    try:
        os.preadv(fd, [bytearray(1)], offset, nowait)
    except BlockingIOError:
        return False
    except OSError:   # EOPNOTSUPP on a file system without it, EISDIR, ...: cannot tell
        return True
    finally:
        os.close(fd)
    return True


def ask_for_files(paths: Iterable[str]) -> None:
    """Ask the kernel to start reading each whole file now (POSIX_FADV_WILLNEED), in the background."""
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
