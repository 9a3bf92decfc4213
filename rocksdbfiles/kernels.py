"""Jitted decoding of SST data blocks into arrays: the hot loop of a full iteration.

``decode_entries`` walks a block's entries (varint lengths, shared-prefix keys) twice over a uint8
array: once to count entries and key bytes, once to fill a key arena and (offset, length) columns.
Its pure-Python twin is rocksdbfiles.block.Block.entries (tests/test_rocksdb_reader.py compares them
on golden and written tables). Every read is bounds-checked: damage is an error offset, never a crash.
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.formats import rocksdb as rf
from bkdisk.formats.errors import FormatError

MAX32 = rf.VARINT32_MAX_BYTES


@inline_kernel
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


# --- fixed-width entries (DbLedgerStorage's keys and values) ------------------------------------
FOOTER_BYTES = rf.BLOCK_FOOTER.sizeof()
RESTART_BYTES = rf.RESTART.sizeof()
FEATURE_BITS = rf.UNIFORM_KEYS_BIT | rf.SEPARATED_KV_BIT | rf.HASH_INDEX_BIT
MAX_RESTARTS = rf.MAX_NUM_RESTARTS


@inline_kernel
def _le32(buf, p):
    v = np.int64(0)
    for k in range(RESTART_BYTES):
        v |= np.int64(buf[p + k]) << (8 * k)
    return v


@kernel
def block_limit(buf):
    """Where the entries of a block end (its restart array and count after them), or -1 when the block
    needs the reference reader's care: a hash index, other feature bits, or restarts parse_block refuses."""
    n = len(buf)
    if n < FOOTER_BYTES:
        return -1
    packed = _le32(buf, n - FOOTER_BYTES)
    if packed & FEATURE_BITS or packed > MAX_RESTARTS:
        return -1
    end = n - FOOTER_BYTES
    count = packed
    if count == 0 or count > end // RESTART_BYTES:
        return -1
    limit = end - count * RESTART_BYTES
    prev = -1
    for i in range(count):
        r = _le32(buf, limit + RESTART_BYTES * i)
        if (i == 0 and r != 0) or r <= prev:
            return -1
        prev = r
    if prev > max(0, limit - 1):
        return -1
    return limit


@kernel
def decode_fixed(buf, limit, keys, values, vlen, start, padded):
    """Decode the entries of ``buf[:limit]`` into rows ``start..`` of ``keys`` ((cap, K) internal keys),
    ``values`` ((cap, V), zeros where a value is not V bytes long; with ``padded``, a shorter value is
    kept with zeros after it) and ``vlen``.

    Returns (rows written, error offset or -1, bad key length or -1): the error offsets are those of
    ``_walk``; a key of other than K bytes stops the walk at its entry with its length."""
    ik = keys.shape[1]
    vs = values.shape[1]
    p = 0
    row = start
    prev_len = 0
    while p < limit:
        at = p
        shared, p = _varint32(buf, at, limit)
        if p < 0:
            return row - start, at, -1
        q = p
        own, p = _varint32(buf, q, limit)
        if p < 0:
            return row - start, q, -1
        q = p
        vl, p = _varint32(buf, q, limit)
        if p < 0:
            return row - start, q, -1
        if shared > prev_len or own > limit - p:
            return row - start, at, -1
        if vl > limit - p - own:
            return row - start, at, -1
        if shared + own != ik:
            return row - start, at, shared + own
        if row > start:
            for k in range(shared):
                keys[row, k] = keys[row - 1, k]
        for k in range(own):
            keys[row, shared + k] = buf[p + k]
        p += own
        if vl == vs or (padded and vl < vs):
            for k in range(vl):
                values[row, k] = buf[p + k]
            for k in range(vl, vs):
                values[row, k] = 0
        else:
            for k in range(vs):
                values[row, k] = 0
        vlen[row] = vl
        p += vl
        prev_len = ik
        row += 1
    return row - start, -1, -1


@inline_kernel
def _cmp_row(a, i, b, j, n):
    """memcmp of ``a[i, :n]`` and ``b[j, :n]``: -1, 0 or 1 (the bytewise comparator)."""
    for k in range(n):
        x = a[i, k]
        y = b[j, k]
        if x != y:
            return -1 if x < y else 1
    return 0


@kernel
def upper_bound(ikeys, lo, bound):
    """The first row at or after ``lo`` whose user key (its first ``len(bound)`` bytes) is above ``bound``;
    the rows run in key order."""
    ks = len(bound)
    hi = ikeys.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        above = False
        for k in range(ks):
            x = ikeys[mid, k]
            if x != bound[k]:
                above = x > bound[k]
                break
        if above:
            hi = mid
        else:
            lo = mid + 1
    return lo


VALUE_TYPES = (int(rf.ValueType.VALUE), int(rf.ValueType.VALUE_PREFERRED_SEQNO))
FOOTER_SIZE = rf.INTERNAL_KEY_FOOTER_SIZE


@kernel
def live_rows(ikeys, values, vlen, padded, last, state, tb, te, topen, tseq, mark, out_keys, out_values,
              out_vlen):
    """Mark each row of a merged run (key ascending, then newest first): 1 the live value of its key, 2 the
    same but its value is not V bytes (with ``padded``: longer than V), 0 an older version, a deletion,
    or a key a range tombstone fragment with a larger sequence covers; copy the user keys, values and
    value lengths of the rows marked 1 into ``out_keys``/``out_values``/``out_vlen`` and return how many.
    ``last``/``state`` carry the previous key ([has one, fragment cursor]) from run to run. The footer
    is INTERNAL_KEY_FOOTER: a little-endian u64."""
    n, ik = ikeys.shape
    vs = values.shape[1]
    out = 0
    ks = ik - FOOTER_SIZE
    m = tb.shape[0]
    key2 = ikeys
    for r in range(n):
        same = state[0] == 1
        if same:
            for k in range(ks):
                if ikeys[r, k] != last[k]:
                    same = False
                    break
        if not same:
            for k in range(ks):
                last[k] = ikeys[r, k]
            state[0] = 1
        if same:
            mark[r] = 0
            continue
        packed = np.uint64(0)
        for k in range(FOOTER_SIZE):
            packed |= np.uint64(ikeys[r, ks + k]) << np.uint64(8 * k)
        vtype = np.int64(packed & np.uint64(0xFF))
        if vtype != VALUE_TYPES[0] and vtype != VALUE_TYPES[1]:
            mark[r] = 0
            continue
        j = state[1]
        while j < m and not topen[j] and _cmp_row(te, j, key2, r, ks) <= 0:
            j += 1
        state[1] = j
        if j < m and _cmp_row(tb, j, key2, r, ks) <= 0 and (packed >> np.uint64(8)) < tseq[j]:
            mark[r] = 0
            continue
        if vlen[r] > vs or (vlen[r] != vs and not padded):
            mark[r] = 2
            continue
        mark[r] = 1
        for k in range(ks):
            out_keys[out, k] = ikeys[r, k]
        for k in range(vs):
            out_values[out, k] = values[r, k]
        out_vlen[out] = vlen[r]
        out += 1
    return out


# --- the ledgers index's values (formats/proto/dbledger_storage.proto: LedgerData) ----------------------
def _ledger_data_fields() -> tuple[int, ...]:
    from bkdisk.formats.proto.dbledger_storage_pb2 import LedgerData
    f = LedgerData.DESCRIPTOR.fields_by_name
    return tuple(f[n].number for n in ("exists", "fenced", "masterKey", "explicitLac", "limbo"))


EXISTS, FENCED, MASTER_KEY, EXPLICIT_LAC, LIMBO = _ledger_data_fields()
WIRE_VARINT, WIRE_LEN = 0, 2
MAX64 = rf.VARINT64_MAX_BYTES


@inline_kernel
def _varint64_end(buf, r, p, limit):
    """Where the varint at ``buf[r, p:limit]`` ends, -1 past ``limit`` or 10 bytes."""
    for k in range(MAX64):
        if p + k >= limit:
            return -1
        if buf[r, p + k] < 0x80:
            return p + k + 1
    return -1


@kernel
def plain_ledger_data(values, vlen, ok, key_at, key_len):
    """``ok[r]``: row ``r`` of ``values`` (its first ``vlen[r]`` bytes) is a LedgerData message that plainly
    parses: only its five fields with their wire types, well formed, the three required ones present.
    Anything else (unknown fields, other wire types, damage) is left False for the protobuf library.
    Of a row it takes, ``key_at[r]``/``key_len[r]``: where in the row its masterKey's bytes are (the last
    one, as protobuf reads a field given twice); of any other, -1 and 0."""
    for r in range(values.shape[0]):
        limit = vlen[r]
        p = 0
        seen = np.int64(0)
        good = True
        while p < limit:
            e = _varint64_end(values, r, p, limit)
            if e < 0 or e - p > 1:          # every tag of these five fields fits one byte
                good = False
                break
            tag = np.int64(values[r, p])
            field = tag >> 3
            wire = tag & 7
            p = e
            if (field == EXISTS or field == FENCED or field == LIMBO) and wire == WIRE_VARINT:
                p = _varint64_end(values, r, p, limit)
            elif (field == MASTER_KEY or field == EXPLICIT_LAC) and wire == WIRE_LEN:
                n = np.int64(0)
                shift = 0
                q = p
                while True:
                    if q >= limit or q - p >= 5:
                        q = -1
                        break
                    b = np.int64(values[r, q])
                    n |= (b & 0x7F) << shift
                    q += 1
                    if b < 0x80:
                        break
                    shift += 7
                p = q + n if q >= 0 and n <= limit - q else -1
                if p >= 0 and field == MASTER_KEY:
                    key_at[r] = q
                    key_len[r] = n
            else:
                p = -1
            if p < 0:
                good = False
                break
            seen |= 1 << field
        need = (1 << EXISTS) | (1 << FENCED) | (1 << MASTER_KEY)
        ok[r] = good and (seen & need) == need
        if not ok[r]:   # (a key met before what stopped the walk need not be the one protobuf keeps)
            key_at[r] = -1
            key_len[r] = 0
    return 0
