"""CRC32 and CRC32C kernels: slicing-by-8 tables, PCLMULQDQ folding and SSE4.2's ``crc32`` instruction.

Implementations (``crc_update``, selected at run time by ``variant``):

* ``CRC_TABLE`` (0): slicing-by-8 tables, portable.
* ``CRC_PCLMUL`` (1): carry-less multiplication folding of 4 x 128 bits (Intel's "Fast CRC
  Computation for Generic Polynomials Using PCLMULQDQ").
* ``CRC_VPCLMUL`` (2): the same folding with 256-bit VPCLMULQDQ.
* ``CRC_SSE42`` (3): CRC32C through the ``crc32`` instruction, whose polynomial is Castagnoli's:
  three independent streams for a run of 96 bytes to 1 KiB (the instruction's latency is three times
  its issue rate), joined by shifting a stream's register with one carry-less multiplication; longer
  runs fold as above and end on the instruction. CRC32 (zlib's polynomial) folds as the best of 1-2.

The folds reduce to 16 bytes that the table path (or the instruction) finishes, so the only
polynomial-specific constants are x^(512±32) and x^(128±32) mod P, and for the streams x^(64w-33)
mod P, computed below. ``diskio.config.crc_variant()`` is the best variant the compile target
supports, or another forced by ``BKDISK_CRC``. The kernels' pure-Python twins are ``zlib.crc32`` and
``crc32c.crc32c`` (tests compare them); bench/crc_compare.py times each variant.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils

from bkdisk.diskio import config
from bkdisk.diskio.config import CRC_PCLMUL, CRC_SSE42, CRC_TABLE, CRC_VPCLMUL, inline_kernel, intrinsic, kernel
from bkdisk.diskio.kernels import byte_ptr, ld_u16, ld_u32le, ld_u64le, unowned

POLY_CRC32, POLY_CRC32C = 0, 1          # rows of CRC_TABLES / CRC_FOLD
_POLYS = (0x104C11DB7, 0x11EDC6F41)     # x^32 + ... (zlib CRC-32, Castagnoli CRC-32C)

# --- intrinsics ------------------------------------------------------------------------------
_I8, _I16, _I32, _I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_V2, _V4 = ir.VectorType(_I64, 2), ir.VectorType(_I64, 4)


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
            base = byte_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1])
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


def _make_crc32c_step(width: int, data):
    """SSE4.2's ``crc32`` over a ``width``-bit value: the CRC32C register moved past its bytes."""
    name = "llvm.x86.sse42.crc32.64.64" if width == 64 else f"llvm.x86.sse42.crc32.32.{width}"
    reg = _I64 if width == 64 else _I32

    @intrinsic
    def _step(typingctx, crc, v):
        sig = types.uint64(types.uint64, data)

        def codegen(context, builder, signature, args):
            if not config.has_crc32_instruction():  # never selected on such targets; keep the module compilable
                return args[0]
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(reg, [reg, ir.IntType(width)]), name)
            c = args[0] if width == 64 else builder.trunc(args[0], _I32)
            v = context.cast(builder, args[1], signature.args[1], data)
            r = builder.call(fn, [c, v])
            return r if width == 64 else builder.zext(r, _I64)

        return sig, codegen

    return _step


_crc32c_u64 = _make_crc32c_step(64, types.uint64)
_crc32c_u32 = _make_crc32c_step(32, types.uint32)
_crc32c_u16 = _make_crc32c_step(16, types.uint16)
_crc32c_u8 = _make_crc32c_step(8, types.uint8)


@intrinsic
def _clmul_lo(typingctx, a, b):
    """The low 64 bits of the carry-less product of two 64-bit values."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        if not config.has_pclmul():  # never selected on such targets; keep the module compilable
            return args[0]
        va, vb = _vec(builder, _V2, [args[0], args[0]]), _vec(builder, _V2, [args[1], args[1]])
        return builder.extract_element(builder.call(_clmul_fn(builder, _V2), [va, vb, ir.Constant(_I8, 0)]),
                                       ir.Constant(_I32, 0))

    return sig, codegen


# --- CRC constants ---------------------------------------------------------------------------
def _times_xpow(r: int, n: int, poly: int) -> int:
    """``r`` times x^n mod P (polynomials over GF(2) as ints, unreflected)."""
    for _ in range(n):
        r <<= 1
        if r & (1 << 32):
            r ^= poly
    return r


def _xpow_mod(n: int, poly: int) -> int:
    return _times_xpow(1, n, poly)


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


# Runs of CRC32C from this many bytes go as three streams, and from FOLD_FROM bytes fold; measured on
# this project's entries (100 B to 30 KB) with bench/crc_compare.py.
STREAMS_FROM, FOLD_FROM = 96, 1024
_MAX_WORDS = FOLD_FROM // 24 + 1       # the longest stream in 8-byte words


def _stream_shifts(poly: int) -> np.ndarray:
    """Bit-reflected x^(64w-33) mod P for a stream of w words: a 32-bit register times it, carry-less,
    is a 64-bit value that ``crc32`` from a zero register turns into the register times x^(64w)."""
    out = np.zeros(_MAX_WORDS + 1, dtype=np.uint64)
    r = _xpow_mod(31, poly)
    for w in range(1, _MAX_WORDS + 1):
        out[w] = _reflect32(r)
        r = _times_xpow(r, 64, poly)
    return out


CRC32C_SHIFTS = _stream_shifts(_POLYS[POLY_CRC32C])
_WIDE_FOLD = config.has_vpclmul()      # (a module constant: numba compiles it in)
_BEST_FOLD = CRC_VPCLMUL if _WIDE_FOLD else CRC_PCLMUL


# --- CRC kernels -----------------------------------------------------------------------------
@inline_kernel
def _slice8(T, v):
    return np.uint64(T[7, v & 0xFF] ^ T[6, (v >> 8) & 0xFF] ^ T[5, (v >> 16) & 0xFF] ^ T[4, (v >> 24) & 0xFF]
                     ^ T[3, (v >> 32) & 0xFF] ^ T[2, (v >> 40) & 0xFF] ^ T[1, (v >> 48) & 0xFF] ^ T[0, v >> 56])


@inline_kernel
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


@inline_kernel
def _folded(crc, buf, p, n, K, wide):
    """Fold ``buf[p:p+n]`` (n >= 64) after register ``crc`` into 128 bits; returns them and the
    position and length of the tail (under 16 bytes) left after them."""
    lanes = (ld_u64le(buf, p) ^ np.uint64(crc), ld_u64le(buf, p + 8), ld_u64le(buf, p + 16), ld_u64le(buf, p + 24),
             ld_u64le(buf, p + 32), ld_u64le(buf, p + 40), ld_u64le(buf, p + 48), ld_u64le(buf, p + 56))
    p += 64
    n -= 64
    nb = n // 64
    if wide:
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
    return a0, a1, p, n


@inline_kernel
def _crc32c_serial(crc, buf, p, n):
    end = p + n
    while p + 8 <= end:
        crc = _crc32c_u64(crc, ld_u64le(buf, p))
        p += 8
    if p + 4 <= end:
        crc = _crc32c_u32(crc, ld_u32le(buf, p))
        p += 4
    if p + 2 <= end:
        crc = _crc32c_u16(crc, ld_u16(buf, p))
        p += 2
    if p < end:
        crc = _crc32c_u8(crc, buf[p])
    return crc


@inline_kernel
def _crc32c_hw(crc, buf, p, n):
    crc = np.uint64(crc)
    if n >= FOLD_FROM:
        a0, a1, p, n = _folded(crc, buf, p, n, CRC_FOLD[POLY_CRC32C], _WIDE_FOLD)
        crc = _crc32c_u64(_crc32c_u64(np.uint64(0), a0), a1)   # the 128 bits' CRC from a zero register
    elif n >= STREAMS_FROM:
        w = n // 24
        span = w * 8
        a, b, c = crc, np.uint64(0), np.uint64(0)
        q = p
        for _ in range(w):
            a = _crc32c_u64(a, ld_u64le(buf, q))
            b = _crc32c_u64(b, ld_u64le(buf, q + span))
            c = _crc32c_u64(c, ld_u64le(buf, q + 2 * span))
            q += 8
        k = CRC32C_SHIFTS[w]
        a = _crc32c_u64(np.uint64(0), _clmul_lo(a, k)) ^ b        # a moved past b's span, then b
        crc = _crc32c_u64(np.uint64(0), _clmul_lo(a, k)) ^ c      # ... past c's span, then c
        p += 3 * span
        n -= 3 * span
    return _crc32c_serial(crc, buf, p, n)


@inline_kernel
def crc_update(crc, buf, p, n, poly, variant):
    """Continue a reflected CRC register (no pre/post inversion) over ``buf[p:p+n]``.

    ``poly``: POLY_CRC32 or POLY_CRC32C; ``variant``: one of ``supported_crc_variants()``.
    No bounds checks: the caller guarantees ``0 <= p`` and ``p + n <= buf.size``.
    """
    if variant == CRC_SSE42:
        if poly == POLY_CRC32C:
            return _crc32c_hw(crc, buf, p, n)
        variant = _BEST_FOLD
    T = CRC_TABLES[poly]
    if variant == CRC_TABLE or n < 64:
        return _crc_table(crc, buf, p, n, T)
    a0, a1, p, n = _folded(crc, buf, p, n, CRC_FOLD[poly], variant == CRC_VPCLMUL)
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
    buf = unowned(buf)
    m = np.uint64(0xFFFFFFFF)
    for i in range(offs.size):
        out[i] = np.uint32(crc_update(m, buf, offs[i], lens[i], poly, variant) ^ m)
