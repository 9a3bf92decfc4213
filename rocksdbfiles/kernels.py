"""Jitted decoding of SST data blocks into arrays: the hot loop of a full iteration.

``decode_entries`` walks a block's entries (varint lengths, shared-prefix keys) twice over a uint8
array: once to count entries and key bytes, once to fill a key arena and (offset, length) columns.
Its pure-Python twin is rocksdbfiles.block.Block.entries (tests/test_rocksdb_reader.py compares them
on golden and written tables). Every read is bounds-checked: damage is an error offset, never a crash.
"""
from __future__ import annotations

import numpy as np

from diskio.config import kernel
from formats import rocksdb as rf
from formats.errors import FormatError

MAX32 = rf.VARINT32_MAX_BYTES


@kernel
def _varint32(buf, p, limit):
    """(value, next position); next = -1 when the varint runs past ``limit`` or over 5 bytes."""
    v = np.int64(0)
    shift = 0
    for k in range(MAX32):
        if p + k >= limit:
            return v, -1
        b = np.int64(buf[p + k])
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, p + k + 1
        shift += 7
    return v, -1


@kernel
def _walk(buf, limit, fill, arena, key_off, key_len, val_off, val_len):
    """Count (``fill`` False) or fill the columns; returns (entries, arena bytes, error offset or -1)."""
    p = 0
    n = 0
    used = 0
    prev_off = 0
    prev_len = 0
    while p < limit:
        at = p          # a bad length is reported at its entry, a bad varint at itself (as the twin does)
        shared, p = _varint32(buf, at, limit)
        if p < 0:
            return n, used, at
        q = p
        own, p = _varint32(buf, q, limit)
        if p < 0:
            return n, used, q
        q = p
        vlen, p = _varint32(buf, q, limit)
        if p < 0:
            return n, used, q
        if shared > prev_len or own > limit - p:
            return n, used, at
        if vlen > limit - p - own:
            return n, used, at
        if fill:
            for k in range(shared):
                arena[used + k] = arena[prev_off + k]
            for k in range(own):
                arena[used + shared + k] = buf[p + k]
            key_off[n] = used
            key_len[n] = shared + own
            val_off[n] = p + own
            val_len[n] = vlen
        prev_off = used
        prev_len = shared + own
        used += shared + own
        p += own + vlen
        n += 1
    return n, used, -1


def decode_entries(buf: np.ndarray, limit: int, *, path: str | None = None, base: int = 0):
    """(arena, key offsets, key lengths, value offsets, value lengths) of the entries in ``buf[:limit]``."""
    empty = np.zeros(0, np.int64)
    n, used, err = _walk(buf, limit, False, np.zeros(0, np.uint8), empty, empty, empty, empty)
    if err >= 0:
        raise FormatError("an entry (shared, own and value lengths, key bytes, value) inside the block",
                          "lengths past its entries", path=path, offset=base + err)
    arena = np.empty(used, np.uint8)
    cols = [np.empty(n, np.int64) for _ in range(4)]
    _walk(buf, limit, True, arena, *cols)
    return (arena, *cols)
