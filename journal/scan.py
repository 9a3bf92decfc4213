"""Jitted journal scanner: every record (data, ledger key, fence, force, explicit LAC, padding) and the end.

``scan_journal`` returns the same JournalArrays as ``journal.arrays.scan_journal_reference`` (its
pure-Python twin; tests compare them), walking the file in windows (``map_window``) with the
position carried across windows. The end of the journal is classified like the reference reader:
clean (a zero length then zeros), end of file, torn tail, invalid record, or garbage after a zero
length. The one piece of text not built from numbers, the reason a record body does not classify,
is taken from the reference ``classify_body`` for that single body.

Compiled kernels are cached (see diskio/kernels.py for NUMBA_CACHE_DIR / BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

from diskio import kernels as K  # first: sets NUMBA_CACHE_DIR before numba is imported

import os
from contextlib import nullcontext

import numpy as np
from numba import njit

from diskio.kernels import JIT, be_i32, be_i64, be_u64, first_nonzero, ld_u64le
from diskio.mapped import DiskError, map_window, open_regular
from formats import journal as fj
from formats.errors import FormatError
from formats.journal import RecordKind
from formats.paths import parse_journal_name
from journal.arrays import JOURNAL_DTYPE, JournalArrays
from journal.reader import EndKind

DEFAULT_WINDOW = 64 << 20
MIN_WINDOW = 4096

_MODE, _POS, _ORIGIN, _NR, _END_KIND, _END_OFF, _AUX, _DETAIL, _NEED = range(9)
_NSTATE = 9
_WALK, _ZERO, _DONE = 0, 1, 2
_ST_DONE, _ST_MORE, _ST_FULL = 0, 1, 2
# why the walk stopped (turned into the reference reader's text by _detail)
(_D_EOF, _D_CLEAN, _D_GARBAGE, _D_PAD_SHORT, _D_PAD_LEN, _D_NEGATIVE, _D_TORN, _D_ZERO_BODY, _D_CLASSIFY,
 _D_VERSION) = range(10)

_K_DATA, _K_KEY, _K_FENCE, _K_FORCE, _K_LAC, _K_PAD, _K_UNKNOWN = (int(k) for k in (
    RecordKind.DATA, RecordKind.LEDGER_KEY, RecordKind.FENCE, RecordKind.FORCE_LEDGER, RecordKind.EXPLICIT_LAC,
    RecordKind.PADDING, RecordKind.UNKNOWN_META))
_CLEAN, _EOF, _TORN, _INVALID, _GARBAGE = (int(k) for k in (EndKind.CLEAN, EndKind.EOF, EndKind.TORN,
                                                            EndKind.INVALID, EndKind.GARBAGE))


@njit(**JIT)
def _classify(buf, i, length, version):
    """Decode a body of ``length`` bytes at buf[i]: (ok, kind, scope, ledger, entry); ok=0 malformed,
    ok=-1 a meta record the journal version may not hold."""
    z = np.uint64(0)
    bs = i
    blen = length
    scope = z
    if buf[bs] >= 0x80:  # scoped: flags 0xA0 on meta records, 0xA1..0xA4 (the digest type) on data
        if blen < 9:
            return 0, 0, z, z, 0
        flags = buf[bs]
        scope = be_u64(buf, bs + 1)
        bs += 9
        blen -= 9
        is_meta = blen >= 16 and be_i64(buf, bs + 8) < 0
        if is_meta and flags != 0xA0:
            return 0, 0, z, z, 0
        if not is_meta and (flags < 0xA1 or flags > 0xA4):
            return 0, 0, z, z, 0
    if blen < 16:
        return 0, 0, z, z, 0
    ledger = be_u64(buf, bs)
    entry = be_i64(buf, bs + 8)
    if entry >= 0:
        if blen < 32:
            return 0, 0, z, z, 0
        return 1, _K_DATA, scope, ledger, entry
    kind = _K_UNKNOWN
    if entry == -0x1000:
        kind = _K_KEY
        if blen < 20:
            return 0, 0, z, z, 0
        kl = np.int64(be_i32(buf, bs + 16))
        if kl < 0 or kl > 65536 or blen < 20 + kl:
            return 0, 0, z, z, 0
        if version < 3:
            return -1, kind, scope, ledger, entry
    elif entry == -0x8000:
        kind = _K_LAC
        if blen < 20:
            return 0, 0, z, z, 0
        ll = np.int64(be_i32(buf, bs + 16))
        if ll < 16 or ll > 65536 or blen < 20 + ll:
            return 0, 0, z, z, 0
        if version < 6:
            return -1, kind, scope, ledger, entry
    elif entry == -0x2000:
        kind = _K_FENCE
        if version < 4:
            return -1, kind, scope, ledger, entry
    elif entry == -0x4000:
        kind = _K_FORCE
    return 1, kind, scope, ledger, entry


@njit(**JIT)
def _jwalk(buf, base, n, version, st, r_off, r_kind, r_scope, r_led, r_ent, r_size):
    """Walk journal records from the state in ``st`` through ``buf`` (file bytes [base, base + buf.size))."""
    buf_end = base + buf.size
    mode = st[_MODE]
    pos = st[_POS]
    origin = st[_ORIGIN]
    nr = st[_NR]
    status = _ST_DONE
    end_kind = -1
    detail = 0
    aux = 0
    z = np.uint64(0)
    while True:
        if mode == _ZERO:
            nz = first_nonzero(buf, pos - base) if pos < buf_end else -1
            if nz >= 0:
                end_kind, detail, aux = _GARBAGE, _D_GARBAGE, base + nz
                pos = origin
                break
            if buf_end >= n:
                end_kind, detail = _CLEAN, _D_CLEAN
                pos = origin
                break
            pos = buf_end
            st[_NEED] = 8
            status = _ST_MORE
            break
        if pos + 4 > n:
            end_kind, detail = _EOF, _D_EOF
            break
        if pos + 4 > buf_end:
            st[_NEED] = 8
            status = _ST_MORE
            break
        length = np.int64(be_i32(buf, pos - base))
        if length == 0:
            mode = _ZERO
            origin = pos
            continue
        if length == -0x100 and version >= 5:
            if pos + 8 > n:
                end_kind, detail = _TORN, _D_PAD_SHORT
                break
            if pos + 8 > buf_end:
                st[_NEED] = 8
                status = _ST_MORE
                break
            plen = np.int64(be_i32(buf, pos + 4 - base))
            if plen < 0 or pos + 8 + plen > n:
                end_kind, detail, aux = (_TORN if plen >= 0 else _INVALID), _D_PAD_LEN, plen
                break
            if nr >= r_off.size:
                status = _ST_FULL
                break
            r_off[nr], r_kind[nr], r_scope[nr], r_led[nr], r_ent[nr], r_size[nr] = pos, _K_PAD, z, z, 0, plen
            nr += 1
            pos += 8 + plen
            continue
        if length < 0:
            end_kind, detail, aux = _INVALID, _D_NEGATIVE, length
            break
        if pos + 4 + length > n:
            end_kind, detail, aux = _TORN, _D_TORN, length
            break
        if pos + 4 + length > buf_end:
            st[_NEED] = 4 + length
            status = _ST_MORE
            break
        i = pos + 4 - base
        j = i
        while j + 8 <= i + length and ld_u64le(buf, j) == 0:
            j += 8
        while j < i + length and buf[j] == 0:
            j += 1
        if j == i + length:
            end_kind, detail, aux = _TORN, _D_ZERO_BODY, length
            break
        ok, kind, scope, led, ent = _classify(buf, i, length, version)
        if ok == 0:
            end_kind, detail = _INVALID, _D_CLASSIFY
            break
        if ok < 0:
            end_kind, detail, aux = _INVALID, _D_VERSION, kind
            break
        if nr >= r_off.size:
            status = _ST_FULL
            break
        r_off[nr], r_kind[nr], r_scope[nr], r_led[nr], r_ent[nr], r_size[nr] = pos, kind, scope, led, ent, length
        nr += 1
        pos += 4 + length
    if end_kind >= 0:
        mode = _DONE
        st[_END_KIND] = end_kind
        st[_END_OFF] = pos
        st[_DETAIL] = detail
        st[_AUX] = aux
    st[_MODE] = mode
    st[_POS] = pos
    st[_ORIGIN] = origin
    st[_NR] = nr
    return status


def _detail(st, n: int, body: bytes | None, version: int, path: str) -> str:
    d, pos, aux = int(st[_DETAIL]), int(st[_END_OFF]), int(st[_AUX])
    if d == _D_EOF:
        return "end of file"
    if d == _D_CLEAN:
        return "zero length, zero-filled tail"
    if d == _D_GARBAGE:
        return f"zero length, but non-zero byte at offset {aux}"
    if d == _D_PAD_SHORT:
        return "padding record cut short"
    if d == _D_PAD_LEN:
        return f"padding length {aux} with {n - pos - 8} bytes left"
    if d == _D_NEGATIVE:
        return f"negative record length {aux}"
    if d == _D_TORN:
        return f"record length {aux} with {n - pos - 4} bytes left"
    if d == _D_ZERO_BODY:
        return f"record length {aux} over an all-zero body"
    if d == _D_VERSION:
        return f"{RecordKind(aux).name} record in a version {version} journal"
    try:
        fj.classify_body(body, offset=pos, path=path)
    except FormatError as e:
        return f"{e.expected}, found {e.found}"
    raise AssertionError(f"{path}: record at {pos}: jitted and reference classification disagree")


def scan_journal(path: str | os.PathLike, start: int | None = None, *, window: int = DEFAULT_WINDOW,
                 data=None) -> JournalArrays:
    """Scan a journal from its first record (or byte offset ``start``, e.g. a lastMark) to its end.

    Equal to ``scan_journal_reference(path, data, start)``. ``data`` scans in-memory bytes instead.
    A journal version outside 1..6 raises FormatError, as the reference does.
    """
    p = os.fspath(path)
    window = max(int(window), MIN_WINDOW)
    if data is not None:
        arr = K.as_bytes_array(data)
        n = arr.size
        win = lambda o, l: nullcontext(arr[o:o + l])  # noqa: E731
        head = arr[:8].tobytes()
    else:
        fd, fst = open_regular(p, "cannot read")   # DiskError for a FIFO or device: never blocks
        try:
            n = fst.st_size
            head = os.pread(fd, 8, 0)
        except OSError as e:
            raise DiskError(p, f"cannot read ({e.strerror})") from None
        finally:
            os.close(fd)
        win = lambda o, l: map_window(p, o, l)  # noqa: E731
    version = fj.parse_header(head, path=p)
    hs = fj.header_size(version)
    pos = hs if start is None else int(start)
    if pos < 0:
        raise ValueError(f"journal scan start {pos} is negative")
    st = np.zeros(_NSTATE, np.int64)
    st[_MODE], st[_POS] = _WALK, pos
    cap = 1024
    cols = [np.zeros(cap, t) for t in (np.int64, np.uint8, np.uint64, np.uint64, np.int64, np.int64)]
    body = None
    while st[_MODE] != _DONE:
        wstart = int(st[_POS])
        length = max(0, min(n - wstart, max(window, int(st[_NEED]) + 8)))
        st[_NEED] = 0
        with win(wstart, length) as w:
            buf = K.readonly(w)
            while True:
                status = _jwalk(buf, wstart, n, version, st, *cols)
                if status != _ST_FULL:
                    break
                cols = [np.concatenate([a, np.zeros(len(a), a.dtype)]) for a in cols]
            if st[_MODE] == _DONE and st[_DETAIL] == _D_CLASSIFY:
                o = int(st[_END_OFF]) + 4 - wstart
                body = buf[o:o + int(_be_i32(buf, o - 4))].tobytes()
            del buf, w  # let map_window unmap before the next window
    nr = int(st[_NR])
    recs = np.zeros(nr, JOURNAL_DTYPE)
    for name, a in zip(("offset", "kind", "scope", "ledger", "entry", "size"), cols):
        recs[name] = a[:nr]
    return JournalArrays(p, parse_journal_name(os.path.basename(p)), version, hs, n, recs,
                         EndKind(int(st[_END_KIND])), int(st[_END_OFF]), _detail(st, n, body, version, p))


def _be_i32(buf: np.ndarray, i: int) -> int:
    return int.from_bytes(buf[i:i + 4].tobytes(), "big", signed=True)
