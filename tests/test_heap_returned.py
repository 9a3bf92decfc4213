"""Memory a finished step freed inside malloc's heaps goes back to the system when fsck moves on to
its next pass, instead of staying resident under the next pass's peak."""
from __future__ import annotations

import platform

import numpy as np

from bkdisk.diskio.config import free_heap_returned, large_blocks_returned


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_blocks_freed_between_live_ones_are_given_back():
    assert platform.libc_ver()[0] == "glibc"   # (the machines fsck runs on; malloc_trim is glibc's)
    large_blocks_returned()   # the thresholds fsck runs with: 1 MiB blocks come from the heap
    blocks = [np.ones(1 << 20, np.uint8) for _ in range(96)]   # touched: resident
    held = blocks[1::2]
    del blocks                # 48 MiB freed between the 48 blocks still held
    before = _rss()
    free_heap_returned()
    assert before - _rss() >= 32 << 20
    assert all(int(b[0]) == 1 for b in held)
