"""Entries' ledgers looked up in a sorted table of ids through an open-addressing table: where a busy
bookie's logs interleave ledgers, each entry's ledger differs from the last one's, and a table finds
its row where a search of the sorted ids would walk their tree for every entry. A window's lookups
make a table of the smaller of two sets: every id of the sorted table (``fill_id_slots``, when they
are no more than the window's entries), or the ids the window meets, each searched once
(``remembered_row``): made for every window, a table of every ledger decided would cost each window
as much as the bookie has ledgers. The caller makes the arrays (``id_slots_room``): an allocation in a
kernel would load numba's arrays with it (diskio/config.py)."""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel
from bkdisk.diskio.kernels import first_at_least

_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)   # Fibonacci hashing: a key's slot is the product's top bits


def id_slots_room(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays ``remembered_row`` keeps up to ``n`` distinct ids in: its slots (a power of two at least
    twice ``n``, every slot -1), the ids met and their rows (made by the caller, as above)."""
    return np.full(1 << max(4, (2 * n - 1).bit_length()), -1, np.int32), np.empty(n, np.uint64), \
        np.empty(n, np.int64)


@inline_kernel
def _home(key, bits):
    """The slot a table of 2**bits slots first tries for ``key``."""
    return np.int64((np.uint64(key) * _HASH_MULTIPLIER) >> np.uint64(64 - bits))


@inline_kernel
def fill_id_slots(ids, slots):
    """``slots`` (id_slots_room's) as an open-addressing table of the indices of ``ids`` (distinct); its
    bits (the table holds 2**bits slots)."""
    bits = slot_bits(slots)
    mask = (1 << bits) - 1
    for i in range(ids.size):
        h = _home(ids[i], bits)
        while slots[h] >= 0:
            h = (h + 1) & mask
        slots[h] = i
    return bits


@inline_kernel
def find_slotted(ids, slots, bits, key):
    """The index of ``key`` in ``ids`` through fill_id_slots' table, or -1."""
    mask = (1 << bits) - 1
    h = _home(key, bits)
    while True:
        at = slots[h]
        if at < 0:
            return -1
        if ids[at] == key:
            return np.int64(at)
        h = (h + 1) & mask


@inline_kernel
def slot_bits(slots):
    """The bits of a table of ``slots.size`` (a power of two) slots."""
    bits = 0
    while (1 << bits) < slots.size:
        bits += 1
    return bits


@inline_kernel
def remembered_row(ids, key, slots, bits, met, met_row, m):
    """(the row of ``key`` in the sorted ``ids``, -1 when absent; ``m``, one more when ``key`` was not met
    before): searched in ``ids`` the first time, then found among the ``met[:m]`` ids (their rows in
    ``met_row``) through ``slots``."""
    mask = (1 << bits) - 1
    h = _home(key, bits)
    while True:
        at = slots[h]
        if at < 0:
            lo = first_at_least(ids, key, 0, ids.size)
            row = lo if lo < ids.size and ids[lo] == key else -1
            slots[h], met[m], met_row[m] = m, key, row
            return np.int64(row), m + 1
        if met[at] == key:
            return np.int64(met_row[at]), m
        h = (h + 1) & mask
