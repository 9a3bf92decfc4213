"""Shared jit helpers for the scanners: unaligned and big-endian loads, prefetch, zero tests, sorted
keys and partitions. (The CRC kernels are in ``digests.crc_kernels``.)

Every kernel here is ``nopython``, ``nogil`` and ``cache=True`` (``diskio.config.kernel``). Compiled
code is cached by numba: by default in ``__pycache__`` next to each source file, falling back to a
per-user cache folder when that is not writable. For read-only installs (or to share one cache
between processes) point ``NUMBA_CACHE_DIR`` at a writable folder; ``BKDISK_NUMBA_CACHE_DIR``, when
set, takes precedence (diskio/config.py applies it before the first kernel is decorated, whatever
was imported first). The cache is keyed by CPU name and features, so a cache built on one CPU is
never loaded on another.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils

from bkdisk.diskio.config import inline_kernel, intrinsic, kernel

# --- intrinsics ------------------------------------------------------------------------------
_I8, _I32 = ir.IntType(8), ir.IntType(32)


def byte_ptr(context, builder, aryty, ary, idxty, idx):
    """An i8* to ``ary[idx]`` (for intrinsics that load or hint at bytes of a uint8 array)."""
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
            p = byte_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1])
            v = builder.load(builder.bitcast(p, ir.IntType(width).as_pointer()), align=1)
            return _bswap(builder, v, width) if big_endian else v

        return sig, codegen

    return _load


ld_u64le = _make_load(64, False, types.uint64)   # unaligned little-endian uint64 at a byte index
ld_u32le = _make_load(32, False, types.uint32)
ld_u16 = _make_load(16, False, types.uint16)     # a native-endian uint16 (a C struct's field; x86: little-endian)
be_u64 = _make_load(64, True, types.uint64)
be_i64 = _make_load(64, True, types.int64)
be_u32 = _make_load(32, True, types.uint32)
be_i32 = _make_load(32, True, types.int32)


@intrinsic
def unowned(typingctx, arr):
    """``arr`` without an owner: the same data, shape and strides, and no reference count.

    numba counts references to an array atomically, and every call that passes an array to a
    helper kernel counts one up and down: tens of nanoseconds an entry in a walk that calls a helper
    or two per entry. A kernel that rebinds its argument (``buf = unowned(buf)``) passes it without
    that count. The caller's own reference keeps the data alive for the call, so the result must
    never leave the kernel (returned, or stored where it outlives the call)."""
    if not isinstance(arr, types.Array):
        return None
    sig = arr(arr)

    def codegen(context, builder, signature, args):
        out = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0])
        out.meminfo = cgutils.get_null_value(out.meminfo.type)
        out.parent = cgutils.get_null_value(out.parent.type)
        return out._getvalue()

    return sig, codegen


def _emit_prefetch(builder, p) -> None:
    """The prefetch of the cache line at byte pointer ``p``: a read, kept in all cache levels, data."""
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [_I8.as_pointer(), _I32, _I32,
                                                                                        _I32]), "llvm.prefetch.p0i8")
    builder.call(fn, [p, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])


@intrinsic
def _prefetch(typingctx, arr, idx):
    """A hint to fetch the cache line of ``arr[idx]`` (never faults: an unmapped address is ignored)."""
    if not isinstance(arr, types.Array) or arr.dtype != types.uint8 or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        p = byte_ptr(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        _emit_prefetch(builder, p)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch_item(typingctx, arr, idx):
    """A hint to fetch the cache line of ``arr[idx]``, an array of any dtype and strides (never faults)."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        a = context.make_array(aryty)(context, builder, args[0])
        i = context.cast(builder, args[1], idxty, types.intp)
        p = builder.bitcast(cgutils.get_item_pointer(context, builder, aryty, a, [i]), _I8.as_pointer())
        _emit_prefetch(builder, p)
        return context.get_dummy_value()

    return sig, codegen


# --- walks -----------------------------------------------------------------------------------
PREFETCH_SPAN = 4096   # bytes asked for ahead of a walk at a time
TOUCH_SPAN = 16384     # bytes a walk of small records loads ahead of itself, at most
TOUCH_BELOW = 4096     # a record smaller than a page (the walk reads the page of each one's header)


@intrinsic
def keep(typingctx, v):
    """Keep integer ``v`` computed, and so the loads that made it, though nothing reads it."""
    if not isinstance(v, types.Integer):
        return None
    sig = types.void(v)

    def codegen(context, builder, signature, args):
        builder.asm(ir.FunctionType(ir.VoidType(), [args[0].type]), "", "r", [args[0]], True)
        return context.get_dummy_value()

    return sig, codegen


@inline_kernel
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


@inline_kernel
def small_run(run, size):
    """The bytes of the run of records smaller than TOUCH_BELOW that a walk is in, after a record of
    ``size`` bytes (``run``: before it; a larger record, or one the walk skips, ends the run)."""
    return run + size if 0 <= size < TOUCH_BELOW else 0


@inline_kernel
def read_ahead(buf, i, ahead, run, streamed):
    """What a walk at index ``i`` of ``buf`` asks for ahead of itself (``ahead``: how far it asked so
    far; returns the new ``ahead``), ``run`` bytes into a run of small records (small_run):
    - ``streamed`` (the walk reads each record's bytes in order, as it does to take digest facts):
      nothing, the hardware streams them to it, and hints would only cost;
    - a run of a page or more: a byte of each line of as many bytes ahead as the run holds (at most
      TOUCH_SPAN), loaded. Loads the core overlaps and the hardware streams, where a prefetch per line
      waits on the core's few line-fill buffers and is dropped for a page not mapped yet (about twice
      the walk's speed on 100-1000-byte entries). The run's own pages were read, so where it ends (a
      large record next) no more pages are read than it had;
    - else prefetch_ahead: hints, which never read a page the walk does not need."""
    if streamed:
        return ahead
    if run < TOUCH_BELOW:
        return prefetch_ahead(buf, i, ahead)
    reach = min(run, TOUCH_SPAN)
    if i + 64 <= ahead - reach // 2 or ahead >= buf.size:
        return ahead
    stop = min(buf.size, i + reach)
    seen = np.uint8(0)
    for k in range(max(ahead, i), stop, 64):
        seen |= buf[k]
    keep(seen)
    return stop


# --- sorted keys --------------------------------------------------------------------------------
@inline_kernel
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


@inline_kernel
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
    for p in range(cuts.size):
        cuts[p] = 0
    for i in range(part_of.size):
        cuts[part_of[i] + 1] += 1
    for p in range(parts):
        cuts[p + 1] += cuts[p]
    # cuts[p] is part p's next place while the rows are placed (it ends at part p + 1's start), then
    # moved back one part: no array of places is made (an allocation would load numba's arrays).
    for i in range(part_of.size):
        p = part_of[i]
        order[cuts[p]] = i
        cuts[p] += 1
    for p in range(parts, 0, -1):
        cuts[p] = cuts[p - 1]
    cuts[0] = 0
