"""An open-addressing table of distinct ledger ids, for kernels that look ids up one entry at a time:
where a busy bookie's logs interleave ledgers, each entry's ledger differs from the last one's, and a
table finds its row where a search of the sorted ids would walk their tree for every entry. The caller
makes the table (``id_slots_room``): an allocation in a kernel would load numba's arrays with it
(diskio/config.py)."""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel

_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)   # Fibonacci hashing: a key's slot is the product's top bits


def id_slots_room(n: int) -> np.ndarray:
    """The table fill_id_slots fills for ``n`` ids, every slot -1: a power of two at least twice ``n`` (made
    by the caller: an allocation in a kernel would load numba's arrays with it)."""
    return np.full(1 << max(4, (2 * n - 1).bit_length()), -1, np.int32)


@inline_kernel
def fill_id_slots(ids, slots):
    """``slots`` (id_slots_room's) as an open-addressing table of the indices of ``ids`` (distinct); its
    bits (the table holds 2**bits slots)."""
    bits = 0
    while (1 << bits) < slots.size:
        bits += 1
    mask = (1 << bits) - 1
    for i in range(ids.size):
        h = np.int64((np.uint64(ids[i]) * _HASH_MULTIPLIER) >> np.uint64(64 - bits))
        while slots[h] >= 0:
            h = (h + 1) & mask
        slots[h] = i
    return bits


@inline_kernel
def find_slotted(ids, slots, bits, key):
    """The index of ``key`` in ``ids`` through fill_id_slots' table, or -1."""
    mask = (1 << bits) - 1
    h = np.int64((np.uint64(key) * _HASH_MULTIPLIER) >> np.uint64(64 - bits))
    while True:
        at = slots[h]
        if at < 0:
            return -1
        if ids[at] == key:
            return np.int64(at)
        h = (h + 1) & mask
