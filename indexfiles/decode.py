"""Jitted decoding of ``.idx`` bytes: header checks and present location slots, for many files at once.

Kernels, flat loops over a uint8 buffer holding whole files back to back:

* ``check_header``: the checks of formats.index.INDEX_HEADER (magic, version, key and explicit-LAC
  lengths that fit the header block). Its pure-Python twin is formats.index.parse_header.
* ``decode_files``: per file, the header check and the count of non-zero 8-byte slots after the
  header; ``write_locations`` then writes those slots as location rows. Their pure-Python twin is
  indexfiles.reference_reader.read_index (tests/test_index_scan.py compares them).

Offsets and sizes are the constants of formats/index.py. Compiled code is cached by numba
(diskio/config.py applies BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.kernels import unowned
from bkdisk.formats import index as fi

# Constants the kernels read, all from the declaration.
HEADER_SIZE = fi.HEADER_SIZE
SLOT_SIZE = fi.SLOT_SIZE
MAGIC = fi.MAGIC_VALUE
VERSION_AT, KEY_LENGTH_AT, KEY_AT = fi.VERSION_OFFSET, fi.KEY_LENGTH_OFFSET, fi.KEY_OFFSET
V0, V1 = fi.HEADER_V0, fi.HEADER_V1
V0_FIXED, V1_FIXED = fi.HEADER_FIXED_SIZE[fi.HEADER_V0], fi.HEADER_FIXED_SIZE[fi.HEADER_V1]
LAC_BODY_MIN = fi.LAC_BODY_MIN
POSITION_BITS, POSITION_MASK = np.uint64(fi.POSITION_BITS), np.uint64(fi.POSITION_MASK)

# Columns of the per-file ``info`` table that decode_files fills.
OK, VERSION, KEY_LENGTH, STATE, LAC_LENGTH, PRESENT, LAST_ENTRY, TRAILING = range(8)
INFO_COLUMNS = 8


@inline_kernel
def _u32(buf, o):
    return (np.uint32(buf[o]) << 24) | (np.uint32(buf[o + 1]) << 16) | (np.uint32(buf[o + 2]) << 8) | \
        np.uint32(buf[o + 3])


@inline_kernel
def _i32(buf, o):
    return np.int64(np.int32(_u32(buf, o)))


@inline_kernel
def _slot(buf, o):
    """The big-endian 8-byte slot at ``buf[o:]``."""
    v = np.uint64(0)
    for k in range(SLOT_SIZE):
        v = (v << np.uint64(8)) | np.uint64(buf[o + k])
    return v


@inline_kernel
def check_header(buf, o, n):
    """The header of the file ``buf[o:o+n]``: (ok, version, key length, state bits, explicit-LAC length)."""
    bad = (0, np.int64(-1), np.int64(0), np.int64(0), np.int64(0))
    if n < HEADER_SIZE or _u32(buf, o) != MAGIC:
        return bad
    version = _i32(buf, o + VERSION_AT)
    if version != V0 and version != V1:
        return bad
    key = _i32(buf, o + KEY_LENGTH_AT)
    if key < 0 or key > HEADER_SIZE - (V0_FIXED if version == V0 else V1_FIXED):
        return bad
    state = np.int64(_u32(buf, o + KEY_AT + key))
    lac = np.int64(0)
    if version >= V1:
        lac = _i32(buf, o + V0_FIXED + key)   # the explicit-LAC length follows the V0 fields
        if lac != 0 and (lac < LAC_BODY_MIN or lac > HEADER_SIZE - V1_FIXED - key):
            return bad
    return 1, version, key, state, lac


@inline_kernel
def _count_slots(words, first, n):
    """(present, last) of the ``n`` 8-byte slots ``words[first:first+n]``; blocks of zeros cost one test."""
    present, last = 0, -1
    k = 0
    while k + 8 <= n:
        w = first + k
        if (words[w] | words[w + 1] | words[w + 2] | words[w + 3] | words[w + 4] | words[w + 5] | words[w + 6]
                | words[w + 7]) != 0:
            for j in range(8):
                if words[w + j] != 0:
                    present += 1
                    last = k + j
        k += 8
    while k < n:
        if words[first + k] != 0:
            present += 1
            last = k
        k += 1
    return present, last


@kernel
def decode_files(buf, words, f_off, f_len, info):
    """Header and present-slot counts of each file ``buf[f_off[i]:f_off[i]+f_len[i]]``; ``info[i]`` gets
    its columns (OK .. TRAILING). Returns how many slots of them all hold a location (write_locations
    then writes them).

    ``words`` is ``buf`` viewed as uint64 and every ``f_off`` is a multiple of 8, so a slot is one
    word (its zero test does not depend on byte order; present ones are read big-endian).
    """
    buf = unowned(buf)
    words = unowned(words)
    total = 0
    for f in range(f_off.size):
        o, n = f_off[f], f_len[f]
        ok, version, key, state, lac = check_header(buf, o, n)
        info[f, OK], info[f, VERSION], info[f, KEY_LENGTH], info[f, STATE], info[f, LAC_LENGTH] = \
            ok, version, key, state, lac
        info[f, PRESENT], info[f, LAST_ENTRY], info[f, TRAILING] = 0, -1, 0
        if ok == 0:
            continue
        present, last = _count_slots(words, (o + HEADER_SIZE) // SLOT_SIZE, (n - HEADER_SIZE) // SLOT_SIZE)
        info[f, PRESENT], info[f, LAST_ENTRY], info[f, TRAILING] = present, last, (n - HEADER_SIZE) % SLOT_SIZE
        total += present
    return total


@kernel(any_layout=("out_file", "out_entry", "out_log", "out_pos"))   # (columns of one row or more)
def write_locations(buf, words, f_off, rows, info, out_file, out_entry, out_log, out_pos):
    """Every present slot of the files decode_files counted, in file then entry order: file ``f`` as
    row ``rows[f]``, the location split into (log, position) as formats.index splits it."""
    buf = unowned(buf)
    j = 0
    for f in range(f_off.size):
        if info[f, PRESENT] == 0:
            continue
        first = (f_off[f] + HEADER_SIZE) // SLOT_SIZE
        for k in range(info[f, LAST_ENTRY] + 1):
            if words[first + k] != 0:
                v = _slot(buf, (first + k) * SLOT_SIZE)
                out_file[j], out_entry[j] = rows[f], k
                out_log[j], out_pos[j] = v >> POSITION_BITS, v & POSITION_MASK
                j += 1
    return j
