"""Listed index files read by a jitted loop: a run of small regular files opened, read and closed by
libc's calls (diskio.libc_calls) straight into a reader's batch buffer, one kernel call for many files,
without the GIL and without a Python call per file. On a bookie of many ledgers the ``.idx`` files are
a page or two each and a walk's time is these calls: made from Python, each gives the GIL up and takes
it back, and beside the check's other threads each of those waits.

The kernel takes only what it is sure of: a file it cannot open or read, or that fills HEAD_BYTES (it
may be larger), stops it, and the reader reads that file as it reads any (reading.Reader.read), so
what is said of it is the same.
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import kernel
from bkdisk.diskio.libc_calls import AT_FDCWD
from bkdisk.diskio.libc_calls import close as libc_close
from bkdisk.diskio.libc_calls import openat as libc_openat
from bkdisk.diskio.libc_calls import read as libc_read
from bkdisk.formats import index as fi

HEAD_BYTES = 256 << 10  # read of one file: the .idx of a ledger of up to about 32,000 entries is whole in it
WORD = fi.SLOT_SIZE      # each file starts on a word of the buffer (its slots are read as words)


@kernel
def read_small_files(names, starts, regular, k, end, flags, buf, pos, pack, at, lens):
    """Files ``k`` .. ``end`` of a block (``names``/``starts``: diskio.libc_calls.c_strings; ``regular``: the
    listing saw a regular file) read into ``buf`` from ``pos`` on while ``pos`` is under ``pack`` (``buf`` holds
    ``pack`` + HEAD_BYTES at least): file i's bytes at ``at[i - k]``, ``lens[i - k]`` of them. Stops at the
    first file it leaves to the reader (not regular, not opened or read, HEAD_BYTES or more). Returns
    (the first file not read, the position after the last, whether the buffer reached ``pack``)."""
    base = np.int64(names.ctypes.data)
    addr = np.int64(buf.ctypes.data)
    i = k
    while i < end:
        if pos >= pack:
            return i, pos, True
        if not regular[i]:
            return i, pos, False
        fd = libc_openat(np.int32(AT_FDCWD), base + starts[i], np.int32(flags))
        if fd < 0:
            return i, pos, False
        n = libc_read(fd, addr + pos, np.uint64(HEAD_BYTES))
        libc_close(fd)
        if n < 0 or n >= HEAD_BYTES:
            return i, pos, False
        at[i - k] = pos
        lens[i - k] = n
        pos = (pos + n + WORD - 1) // WORD * WORD
        i += 1
    return i, pos, pos >= pack
