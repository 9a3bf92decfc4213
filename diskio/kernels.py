"""Shared jit helpers for the scanners: big-endian loads and CRC32/CRC32C (table, PCLMUL, VPCLMUL).

Every kernel here is ``nopython``, ``nogil`` and ``cache=True`` (``diskio.config.kernel``). Compiled
code is cached by numba: by default in ``__pycache__`` next to each source file, falling back to a
per-user cache folder when that is not writable. For read-only installs (or to share one cache
between processes) point ``NUMBA_CACHE_DIR`` at a writable folder; ``BKDISK_NUMBA_CACHE_DIR``, when
set, takes precedence (diskio/config.py applies it before the first kernel is decorated, whatever
was imported first). The cache is keyed by CPU name and features, so a cache built on one CPU is
never loaded on another.

CRC implementations (``crc_update``, selected at run time by ``variant``):

* ``CRC_TABLE`` (0): slicing-by-8 tables, portable.
* ``CRC_PCLMUL`` (1): carry-less multiplication folding of 4 x 128 bits (Intel's "Fast CRC
  Computation for Generic Polynomials Using PCLMULQDQ").
* ``CRC_VPCLMUL`` (2): the same folding with 256-bit VPCLMULQDQ.

The folds reduce to 16 bytes that the table path finishes, so the only polynomial-specific
constants are x^(512±32) and x^(128±32) mod P, computed below. ``diskio.config.crc_variant()`` is
the best variant the compile target supports, or a lower one forced by ``BKDISK_CRC``. The kernels'
pure-Python twins are ``zlib.crc32`` and ``crc32c.crc32c`` (tests compare them); bench/scan_bench.py
measures the whole scan with each (the jitted folds win by the margin it prints).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic

from bkdisk.diskio import config
from bkdisk.diskio.config import (  # noqa: F401
    CRC_PCLMUL,
    CRC_TABLE,
    CRC_VARIANT_NAMES,
    CRC_VPCLMUL,
    best_crc_variant,
    kernel,
    supported_crc_variants,
)

POLY_CRC32, POLY_CRC32C = 0, 1          # rows of CRC_TABLES / CRC_FOLD
_POLYS = (0x104C11DB7, 0x11EDC6F41)     # x^32 + ... (zlib CRC-32, Castagnoli CRC-32C)


# --- intrinsics ------------------------------------------------------------------------------
_I8, _I32, _I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_V2, _V4 = ir.VectorType(_I64, 2), ir.VectorType(_I64, 4)


def _byte_ptr(context, builder, aryty, ary, idxty, idx):
    a = context.make_array(aryty)(context, builder, ary)
    i = context.cast(builder, idx, idxty, types.intp)
    return builder.gep(a.data, [i])


def _bswap(builder, v, width):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(width), [ir.IntType(width)]),
                                        f"llvm.bswap.i{width}")
    return builder.call(fn, [v])


def _make_load(width: int, big_endian: bool, result):
    @intrinsic
    def _load(typingctx, arr, idx):
        if not isinstance(arr, types.Array) or arr.dtype != types.uint8 or not isinstance(idx, types.Integer):
            return None
        sig = result(arr, idx)

        def codegen(context, builder, signature, args):
            p = _byte_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1])
            v = builder.load(builder.bitcast(p, ir.IntType(width).as_pointer()), align=1)
            return _bswap(builder, v, width) if big_endian else v

        return sig, codegen

    return _load


ld_u64le = _make_load(64, False, types.uint64)   # unaligned little-endian uint64 at a byte index
ld_u16 = _make_load(16, False, types.uint16)     # a native-endian uint16 (a field of a C struct)
be_u64 = _make_load(64, True, types.uint64)
be_i64 = _make_load(64, True, types.int64)
be_u32 = _make_load(32, True, types.uint32)
be_i32 = _make_load(32, True, types.int32)


@intrinsic
def _prefetch(typingctx, arr, idx):
    """A hint to fetch the cache line of ``arr[idx]`` (never faults: an unmapped address is ignored)."""
    if not isinstance(arr, types.Array) or arr.dtype != types.uint8 or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        p = _byte_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [_I8.as_pointer(), _I32,
                                                                                            _I32, _I32]),
                                            "llvm.prefetch.p0i8")
        # (read, keep in all cache levels, data cache)
        builder.call(fn, [p, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def _vec(builder, vty, xs):
    v = ir.Constant(vty, ir.Undefined)
    for j, x in enumerate(xs):
        v = builder.insert_element(v, x, ir.Constant(_I32, j))
    return v


def _clmul_fn(builder, vty):
    name = "llvm.x86.pclmulqdq" if vty is _V2 else "llvm.x86.pclmulqdq.256"
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(vty, [vty, vty, _I8]), name)


@intrinsic
def _fold128(typingctx, a0, a1, k0, k1, d0, d1):
    """(a * x^distance folded) ^ d for one 128-bit lane: clmul(a.lo, k0) ^ clmul(a.hi, k1) ^ d."""
    u = types.uint64
    sig = types.UniTuple(u, 2)(u, u, u, u, u, u)

    def codegen(context, builder, signature, args):
        if not config.has_pclmul():  # never selected on such targets; keep the module compilable
            return context.make_tuple(builder, signature.return_type, [args[4], args[5]])
        fn = _clmul_fn(builder, _V2)
        a, k, d = _vec(builder, _V2, args[0:2]), _vec(builder, _V2, args[2:4]), _vec(builder, _V2, args[4:6])
        r = builder.xor(builder.xor(builder.call(fn, [a, k, ir.Constant(_I8, 0x00)]),
                                    builder.call(fn, [a, k, ir.Constant(_I8, 0x11)])), d)
        return context.make_tuple(builder, signature.return_type,
                                  [builder.extract_element(r, ir.Constant(_I32, j)) for j in range(2)])

    return sig, codegen


def _make_fold_loop(vty, supported):
    lanes = vty.count  # u64 per vector: 2 (xmm) or 4 (ymm)
    nvec = 8 // lanes  # 64 bytes per iteration either way

    @intrinsic
    def _fold_loop(typingctx, arr, p, nblk, state, k0, k1):
        """Fold ``nblk`` 64-byte blocks at ``p`` into ``state`` (8 x u64 = 512 bits, 4 x 128-bit lanes)."""
        if not (isinstance(state, types.UniTuple) and state.count == 8):
            return None
        sig = state(arr, p, nblk, state, k0, k1)

        def codegen(context, builder, signature, args):
            acc = cgutils.unpack_tuple(builder, args[3], 8)
            if not supported():  # never selected on such targets; keep the module compilable
                return context.make_tuple(builder, signature.return_type, acc)
            base = _byte_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1])
            n = context.cast(builder, args[2], signature.args[2], types.intp)
            fn = _clmul_fn(builder, vty)
            k = _vec(builder, vty, [args[4], args[5]] * (lanes // 2))
            slots = []
            for i in range(nvec):
                s = cgutils.alloca_once(builder, vty)
                builder.store(_vec(builder, vty, acc[lanes * i:lanes * (i + 1)]), s)
                slots.append(s)
            with cgutils.for_range(builder, n) as loop:
                blk = builder.gep(base, [builder.mul(loop.index, ir.Constant(loop.index.type, 64))])
                for i in range(nvec):
                    ptr = builder.bitcast(builder.gep(blk, [ir.Constant(_I64, 8 * lanes * i)]), vty.as_pointer())
                    d = builder.load(ptr, align=1)
                    a = builder.load(slots[i])
                    r = builder.xor(builder.xor(builder.call(fn, [a, k, ir.Constant(_I8, 0x00)]),
                                                builder.call(fn, [a, k, ir.Constant(_I8, 0x11)])), d)
                    builder.store(r, slots[i])
            outs = []
            for i in range(nvec):
                v = builder.load(slots[i])
                outs += [builder.extract_element(v, ir.Constant(_I32, j)) for j in range(lanes)]
            return context.make_tuple(builder, signature.return_type, outs)

        return sig, codegen

    return _fold_loop


_fold512_xmm = _make_fold_loop(_V2, config.has_pclmul)
_fold512_ymm = _make_fold_loop(_V4, config.has_vpclmul)


# --- CRC constants ---------------------------------------------------------------------------
def _xpow_mod(n: int, poly: int) -> int:
    r = 1
    for _ in range(n):
        r <<= 1
        if r & (1 << 32):
            r ^= poly
    return r


def _reflect32(v: int) -> int:
    return int(f"{v:032b}"[::-1], 2)


def _tables(poly: int) -> np.ndarray:
    rp = _reflect32(poly & 0xFFFFFFFF)
    t = np.zeros((8, 256), np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (rp if c & 1 else 0)
        t[0, i] = c
    for k in range(1, 8):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


def _fold_constants(poly: int) -> np.ndarray:
    """Bit-reflected x^(512+32), x^(512-32), x^(128+32), x^(128-32) mod P, shifted left by one."""
    return np.array([_reflect32(_xpow_mod(n, poly)) << 1 for n in (544, 480, 160, 96)], dtype=np.uint64)


CRC_TABLES = np.stack([_tables(p) for p in _POLYS])         # (poly, 8, 256) uint32
CRC_FOLD = np.stack([_fold_constants(p) for p in _POLYS])   # (poly, 4) uint64


# --- CRC kernels -----------------------------------------------------------------------------
@kernel
def _slice8(T, v):
    return np.uint64(T[7, v & 0xFF] ^ T[6, (v >> 8) & 0xFF] ^ T[5, (v >> 16) & 0xFF] ^ T[4, (v >> 24) & 0xFF]
                     ^ T[3, (v >> 32) & 0xFF] ^ T[2, (v >> 40) & 0xFF] ^ T[1, (v >> 48) & 0xFF] ^ T[0, v >> 56])


@kernel
def _crc_table(crc, buf, p, n, T):
    crc = np.uint64(crc)
    end = p + n
    while p + 8 <= end:
        crc = _slice8(T, ld_u64le(buf, p) ^ crc)
        p += 8
    while p < end:
        crc = np.uint64(T[0, (crc ^ buf[p]) & 0xFF]) ^ (crc >> np.uint64(8))
        p += 1
    return crc


@kernel
def crc_update(crc, buf, p, n, poly, variant):
    """Continue a reflected CRC register (no pre/post inversion) over ``buf[p:p+n]``.

    ``poly``: POLY_CRC32 or POLY_CRC32C; ``variant``: CRC_TABLE, CRC_PCLMUL or CRC_VPCLMUL.
    No bounds checks: the caller guarantees ``0 <= p`` and ``p + n <= buf.size``.
    """
    T = CRC_TABLES[poly]
    if variant == 0 or n < 64:
        return _crc_table(crc, buf, p, n, T)
    K = CRC_FOLD[poly]
    lanes = (ld_u64le(buf, p) ^ np.uint64(crc), ld_u64le(buf, p + 8), ld_u64le(buf, p + 16), ld_u64le(buf, p + 24),
             ld_u64le(buf, p + 32), ld_u64le(buf, p + 40), ld_u64le(buf, p + 48), ld_u64le(buf, p + 56))
    p += 64
    n -= 64
    nb = n // 64
    if variant == 2:
        lanes = _fold512_ymm(buf, p, nb, lanes, K[0], K[1])
    else:
        lanes = _fold512_xmm(buf, p, nb, lanes, K[0], K[1])
    p += nb * 64
    n -= nb * 64
    a0, a1 = _fold128(lanes[0], lanes[1], K[2], K[3], lanes[2], lanes[3])
    a0, a1 = _fold128(a0, a1, K[2], K[3], lanes[4], lanes[5])
    a0, a1 = _fold128(a0, a1, K[2], K[3], lanes[6], lanes[7])
    while n >= 16:
        a0, a1 = _fold128(a0, a1, K[2], K[3], ld_u64le(buf, p), ld_u64le(buf, p + 8))
        p += 16
        n -= 16
    # The folded 128 bits stand for the data so far: their CRC from a zero register, then the tail.
    c = _slice8(T, a0)
    c = _slice8(T, a1 ^ c)
    return _crc_table(c, buf, p, n, T)


@kernel
def crc32_of(buf, p, n, poly, variant):
    """The standard CRC (init ~0, final xor ~0) of ``buf[p:p+n]``, as an int."""
    m = np.uint64(0xFFFFFFFF)
    return np.int64(crc_update(m, buf, p, n, poly, variant) ^ m)


@kernel
def crc_many(buf, offs, lens, poly, variant, out):
    """CRC of each ``buf[offs[i]:offs[i]+lens[i]]`` into ``out`` (bench and tests)."""
    m = np.uint64(0xFFFFFFFF)
    for i in range(offs.size):
        out[i] = np.uint32(crc_update(m, buf, offs[i], lens[i], poly, variant) ^ m)


# --- walks -----------------------------------------------------------------------------------
PREFETCH_SPAN = 4096   # bytes asked for ahead of a walk at a time


@kernel
def prefetch_ahead(buf, i, ahead):
    """Ask for the cache lines of the next PREFETCH_SPAN bytes of ``buf`` once a walk at index ``i``
    nears ``ahead`` (how far it asked so far); returns the new ``ahead``. A walk from record to record
    waits on each header it reads (the next position is in it): asked for together, the lines of a
    span arrive at once instead of one miss after another."""
    if i + 64 <= ahead or ahead >= buf.size:
        return ahead
    start = max(ahead, i)
    stop = min(buf.size, start + PREFETCH_SPAN)
    for k in range(start, stop, 64):
        _prefetch(buf, k)
    return stop


# --- sorted keys --------------------------------------------------------------------------------
@kernel
def first_at_least(keys, k, lo, hi):
    """The first index in [lo, hi) of sorted ``keys`` whose key is at least ``k`` (``hi`` when none).
    (numba's np.searchsorted gives the same, but a kernel using it is slow to load from the cache
    and takes far more memory doing so.)"""
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < k:
            lo = mid + 1
        else:
            hi = mid
    return lo


# --- zero tests ------------------------------------------------------------------------------
@kernel
def last_nonzero(buf):
    """Index of the last non-zero byte of ``buf``, or -1."""
    i = buf.size
    while i >= 8 and ld_u64le(buf, i - 8) == 0:
        i -= 8
    while i > 0:
        i -= 1
        if buf[i] != 0:
            return i
    return -1


@kernel
def first_nonzero(buf, start):
    """Index of the first non-zero byte of ``buf`` at or after ``start``, or -1."""
    i = start
    n = buf.size
    while i + 8 <= n and ld_u64le(buf, i) == 0:
        i += 8
    while i < n:
        if buf[i] != 0:
            return i
        i += 1
    return -1


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only uint8 view, so every kernel sees one array type (one compiled signature)."""
    v = np.asarray(a, dtype=np.uint8).view()
    if v.ndim != 1:
        v = v.reshape(-1)
    v.flags.writeable = False
    return v


def as_bytes_array(data) -> np.ndarray:
    """Bytes-like input (bytes, bytearray, memoryview, numpy) as a read-only uint8 array."""
    if isinstance(data, np.ndarray):
        return readonly(data)
    return readonly(np.frombuffer(data, dtype=np.uint8))


def be_i32_at(arr: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Big-endian signed 32-bit values at byte offsets ``at`` of ``arr`` (numpy, no loop)."""
    idx = np.asarray(at, dtype=np.int64)[:, None] + np.arange(4)
    return np.ascontiguousarray(np.asarray(arr)[idx]).view(">i4").reshape(-1).astype(np.int64)


def be_i64_at(arr: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Big-endian signed 64-bit values at byte offsets ``at`` of ``arr`` (numpy, no loop)."""
    idx = np.asarray(at, dtype=np.int64)[:, None] + np.arange(8)
    return np.ascontiguousarray(np.asarray(arr)[idx]).view(">i8").reshape(-1).astype(np.int64)


# --- partitions ------------------------------------------------------------------------------
@kernel
def stable_partition(part_of, parts, order, cuts):
    """The rows' order grouped by part (``part_of``, values 0..parts-1), each part's rows in their
    order (a stable counting sort): ``order`` gets the row numbers, part i is
    ``order[cuts[i]:cuts[i + 1]]``."""
    cuts[:] = 0
    for i in range(part_of.size):
        cuts[part_of[i] + 1] += 1
    for p in range(parts):
        cuts[p + 1] += cuts[p]
    at = cuts[:parts].copy()
    for i in range(part_of.size):
        p = part_of[i]
        order[at[p]] = i
        at[p] += 1
