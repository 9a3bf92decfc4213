"""Jitted index-file scanning: one ``.idx`` file's locations, and a walk over whole index hierarchies.

``walk_index_dirs`` returns the same IndexInventory as ``indexfiles.arrays.walk_index_dirs_reference``
(its pure-Python twin; tests compare them). Python's work per file is listing, open + read into a
shared batch buffer, and building the header object; the header checks and the location slots of a
whole batch of files are decoded by one jitted kernel. Files larger than the batch are mapped
(``map_file``) and decoded on their own.

Compiled kernels are cached (see diskio/kernels.py for NUMBA_CACHE_DIR / BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

from diskio import kernels as K  # first: sets NUMBA_CACHE_DIR before numba is imported

import os
from dataclasses import dataclass

import numpy as np
from numba import njit

from diskio.kernels import (DIRENT_NAME_OFFSET, DIRENT_TYPE_OFFSET, DT_DIR, DT_UNKNOWN, JIT, S_IFMT, S_IFREG,
                             STATX_MODE_OFFSET, STATX_SIZE, be_i32, be_u32, be_u64, c_close, c_closedir, c_errno,
                             c_open, c_opendir, c_peek, c_read, c_readdir, c_statx_fd, ld_u16)
from diskio.mapped import NOT_REGULAR, OPEN_FLAGS, DiskError, map_file, open_regular
from formats import index as fi
from formats.errors import FormatError
from formats.paths import CURRENT_DIR, parse_index_name
from indexfiles.arrays import INDEX_FILE_DTYPE, LOCATION_DTYPE, IndexInventory, list_index_candidates

DEFAULT_BATCH = 32 << 20
_MAGIC = int.from_bytes(fi.INDEX_MAGIC, "big")
_HDR = fi.HEADER_SIZE
# per-file kernel output columns
_OK, _VERSION, _MKLEN, _STATE, _LACLEN, _PRESENT, _LAST, _TRAILING = range(8)


@njit(**JIT)
def _header_check(buf, o, n):
    """FileInfo header checks of formats.index.INDEX_HEADER: (ok, version, mk len, state, lac len)."""
    if n < 1024:
        return 0, -1, 0, 0, 0
    if be_u32(buf, o) != _MAGIC:
        return 0, -1, 0, 0, 0
    version = np.int64(be_i32(buf, o + 4))
    if version != 0 and version != 1:
        return 0, -1, 0, 0, 0
    mk = np.int64(be_i32(buf, o + 8))
    if mk < 0 or mk > 1024 - (16 if version == 0 else 20):  # the fields around the key fit the block
        return 0, -1, 0, 0, 0
    state = np.int64(be_u32(buf, o + 12 + mk))
    lac = 0
    if version >= 1:
        lac = np.int64(be_i32(buf, o + 16 + mk))
        if lac != 0 and (lac < 16 or lac > 1024 - 20 - mk):
            return 0, -1, 0, 0, 0
    return 1, version, mk, state, lac


@njit(**JIT)
def _decode_batch(buf, f_off, f_len, info):
    """Header checks and location slots of every file in ``buf``; returns (file, entry, location) arrays."""
    nf = f_off.size
    total = 0
    for f in range(nf):
        o = f_off[f]
        n = f_len[f]
        ok, version, mk, state, lac = _header_check(buf, o, n)
        info[f, 0] = ok
        info[f, 1] = version
        info[f, 2] = mk
        info[f, 3] = state
        info[f, 4] = lac
        info[f, 5] = 0
        info[f, 6] = -1
        info[f, 7] = 0
        if ok == 0:
            continue
        slots = (n - 1024) // 8
        cnt = 0
        last = -1
        for k in range(slots):
            if be_u64(buf, o + 1024 + 8 * k) != 0:
                cnt += 1
                last = k
        info[f, 5] = cnt
        info[f, 6] = last
        info[f, 7] = (n - 1024) % 8
        total += cnt
    l_file = np.empty(total, np.int32)
    l_entry = np.empty(total, np.int64)
    l_loc = np.empty(total, np.uint64)
    j = 0
    for f in range(nf):
        if info[f, 0] == 0 or info[f, 5] == 0:
            continue
        o = f_off[f]
        for k in range(info[f, 6] + 1):
            v = be_u64(buf, o + 1024 + 8 * k)
            if v != 0:
                l_file[j] = f
                l_entry[j] = k
                l_loc[j] = v
                j += 1
    return l_file, l_entry, l_loc


@dataclass
class IndexLocations:
    """One ``.idx`` file: header, every present entry location, counts."""

    path: str
    size: int
    header: fi.IndexHeader | None
    header_error: FormatError | None
    locations: np.ndarray      # LOCATION_DTYPE with file = 0
    present: int               # slots that hold a location
    last_entry: int            # -1 when none
    trailing_bytes: int

    @property
    def fenced(self) -> bool | None:
        return None if self.header is None else self.header.fenced


def _header_object(buf: np.ndarray, o: int, row) -> fi.IndexHeader:
    version, mk, state, lac = int(row[_VERSION]), int(row[_MKLEN]), int(row[_STATE]), int(row[_LACLEN])
    key = buf[o + 12:o + 12 + mk].tobytes()
    body = buf[o + 20 + mk:o + 20 + mk + lac].tobytes() if version >= 1 and lac else None
    return fi.IndexHeader(version, key, state, body)


def _locations(l_file, l_entry, l_loc, file_base: int) -> np.ndarray:
    out = np.empty(len(l_file), LOCATION_DTYPE)
    out["file"] = l_file + file_base
    out["entry"] = l_entry
    out["log"] = (l_loc >> np.uint64(32)).astype(np.uint32)
    out["pos"] = (l_loc & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return out


def read_index_locations(path: str | os.PathLike, data=None) -> IndexLocations:
    """Decode one ``.idx`` file (or its bytes): header state and every entry -> (entry log id, offset)."""
    p = os.fspath(path)
    if data is None:
        with map_file(p) as m:
            return _read_one(p, K.readonly(m))
    return _read_one(p, K.as_bytes_array(data))


def _read_one(p: str, buf: np.ndarray) -> IndexLocations:
    info = np.zeros((1, 8), np.int64)
    lf, le, ll = _decode_batch(buf, np.zeros(1, np.int64), np.array([buf.size], np.int64), info)
    row = info[0]
    if not row[_OK]:
        try:
            fi.parse_header(buf[:_HDR].tobytes() if buf.size >= _HDR else buf.tobytes(), path=p)
        except FormatError as e:
            return IndexLocations(p, int(buf.size), None, e, np.zeros(0, LOCATION_DTYPE), 0, -1, 0)
        raise AssertionError(f"{p}: jitted and reference index header checks disagree")
    return IndexLocations(p, int(buf.size), _header_object(buf, 0, row), None, _locations(lf, le, ll, 0),
                          int(row[_PRESENT]), int(row[_LAST]), int(row[_TRAILING]))


def _ledger_of_name(name: str) -> tuple[int, int, bool]:
    """formats.paths.parse_index_name as (scope, ledger, named)."""
    lid = parse_index_name(name)
    return (0, 0, False) if lid is None else (lid.scope, lid.ledger, True)


# --- native listing (Linux): opendir/readdir and open/read from one kernel ------------------------
_SFX_IDX = np.frombuffer(b".idx", np.uint8)
_SFX_RLOC = np.frombuffer(b".idx.rloc", np.uint8)
_N_LEDGERS = np.frombuffer(b"ledgers", np.uint8)
_N_LOCATIONS = np.frombuffer(b"locations", np.uint8)
_FOUND, _STRAY_RLOC, _STRAY_OTHER, _CANNOT_LIST = 0, 1, 2, 3
_OK_, _OVERFLOW, _NON_ASCII = 0, 1, 2
_READ_DONE, _READ_FULL, _READ_BIG = 0, 1, 2
_EINTR = 4
_ERR_NOT_REGULAR = -1   # f_err of a file that opened but is not a regular file (a FIFO, a device)


@njit(**JIT)
def _name_less(nb, ao, al, bo, bl):
    m = min(al, bl)
    for k in range(m):
        x = nb[ao + k]
        y = nb[bo + k]
        if x != y:
            return x < y
    return al < bl


@njit(**JIT)
def _sort_names(order, tmp, nb, no, nl, n):
    """Stable merge sort of order[:n] by the byte strings nb[no[i]:no[i]+nl[i]]."""
    width = 1
    while width < n:
        i = 0
        while i < n:
            mid = min(i + width, n)
            hi = min(i + 2 * width, n)
            a, b, k = i, mid, i
            while a < mid and b < hi:
                if _name_less(nb, no[order[b]], nl[order[b]], no[order[a]], nl[order[a]]):
                    tmp[k] = order[b]
                    b += 1
                else:
                    tmp[k] = order[a]
                    a += 1
                k += 1
            while a < mid:
                tmp[k] = order[a]
                a += 1
                k += 1
            while b < hi:
                tmp[k] = order[b]
                b += 1
                k += 1
            i += 2 * width
        for k in range(n):
            order[k] = tmp[k]
        width *= 2


@njit(**JIT)
def _ends_with(b, o, ln, sfx):
    if ln < sfx.size:
        return False
    for k in range(sfx.size):
        if b[o + ln - sfx.size + k] != sfx[k]:
            return False
    return True


@njit(**JIT)
def _hex_value(b, o, ln):
    """The value of ``ln`` hex digits (either case) at ``b[o:]``; ``ln`` <= 16."""
    v = np.uint64(0)
    for k in range(ln):
        c = b[o + k]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return False, v
        v = (v << np.uint64(4)) | np.uint64(d)
    return True, v


@njit(**JIT)
def _hex_name_value(b, o, ln):
    """formats.paths' hex name rule: 1+ hex digits, leading zeros allowed, a value below 2^64."""
    if ln < 1:
        return False, np.uint64(0)
    z = 0
    while z < ln and b[o + z] == 48:
        z += 1
    if ln - z > 16:
        return False, np.uint64(0)
    return _hex_value(b, o + z, ln - z)


@njit(**JIT)
def _list_tree(root, dir_probe_flags, path, stk_b, stk_o, stk_l, stk_d, nm_b, nm_o, nm_l, nm_t, order, tmp,
               out_b, out_o, out_l, out_k, out_e, out_scope, out_led, out_named, out_depth, res):
    """list_index_candidates for one ``<dir>/current`` (``root``), relative paths into ``out_b``.

    ``res``: [out arena top, status, records written, stack depth (-1: start)]. Status _OK_;
    _OVERFLOW: a buffer is too small, grow them (keeping contents) and call again to resume;
    _NON_ASCII: a name outside ASCII, let Python list this dir (its sort order is Python's).
    """
    rl = root.size
    for k in range(rl):
        path[k] = root[k]
    nout = res[2]
    nstk = res[3]
    if nstk < 0:
        nstk = 1
        stk_o[0] = 0
        stk_l[0] = 0
        stk_d[0] = 0
    res[1] = _OK_
    while nstk > 0:
        nstk -= 1
        ro, rlen, depth = stk_o[nstk], stk_l[nstk], stk_d[nstk]
        nstk0, nout0, top0 = nstk, nout, res[0]
        if rl + 1 + rlen + 258 > path.size:
            res[1] = _OVERFLOW
            nstk += 1
            break
        plen = rl
        if rlen > 0:  # the folder's path: root + "/" + rel
            path[rl] = 47
            for k in range(rlen):
                path[rl + 1 + k] = stk_b[ro + k]
            plen = rl + 1 + rlen
        path[plen] = 0
        ovf = False
        d = c_opendir(path, 0)
        if d == 0:
            if nout >= out_o.size or res[0] + rlen > out_b.size:
                ovf = True
            else:
                out_o[nout] = res[0]
                out_l[nout] = rlen
                for k in range(rlen):
                    out_b[res[0] + k] = path[rl + 1 + k]
                res[0] += rlen
                out_k[nout] = _CANNOT_LIST
                out_e[nout] = c_errno()
                out_depth[nout] = depth
                nout += 1
        else:
            n = 0
            nbu = 0
            non_ascii = False
            while True:
                e = c_readdir(d)
                if e == 0:
                    break
                ln = 0
                while c_peek(e, DIRENT_NAME_OFFSET + ln) != 0:
                    ln += 1
                if c_peek(e, DIRENT_NAME_OFFSET) == 46 and (
                        ln == 1 or (ln == 2 and c_peek(e, DIRENT_NAME_OFFSET + 1) == 46)):
                    continue
                if n >= nm_o.size or nbu + ln > nm_b.size:
                    ovf = True
                    break
                for k in range(ln):
                    c = c_peek(e, DIRENT_NAME_OFFSET + k)
                    if c >= 0x80:
                        non_ascii = True
                    nm_b[nbu + k] = c
                nm_o[n] = nbu
                nm_l[n] = ln
                nm_t[n] = c_peek(e, DIRENT_TYPE_OFFSET)
                nbu += ln
                n += 1
            c_closedir(d)
            if non_ascii and not ovf:
                res[1] = _NON_ASCII
                return
            if not ovf:
                for i in range(n):
                    order[i] = i
                    if nm_t[i] == DT_UNKNOWN:  # no d_type here: a directory (and not a symlink)?
                        path[plen] = 47
                        for k in range(nm_l[i]):
                            path[plen + 1 + k] = nm_b[nm_o[i] + k]
                        path[plen + 1 + nm_l[i]] = 0
                        fd = c_open(path, 0, dir_probe_flags)
                        if fd >= 0:
                            c_close(fd)
                            nm_t[i] = DT_DIR
                        else:
                            nm_t[i] = 255
                        path[plen] = 0
                _sort_names(order, tmp, nm_b, nm_o, nm_l, n)
            top = ro  # the popped folder was the arena's top; its rel is now in path[rl + 1:plen]
            j = 0
            while j < n and not ovf:
                i = order[j]
                j += 1
                no, nl = nm_o[i], nm_l[i]
                clen = (rlen + 1 + nl) if rlen > 0 else nl
                if nm_t[i] == DT_DIR:
                    if depth == 0 and ((nl == 7 and _ends_with(nm_b, no, nl, _N_LEDGERS))
                                       or (nl == 9 and _ends_with(nm_b, no, nl, _N_LOCATIONS))):
                        continue
                    if nstk >= stk_o.size or top + clen > stk_b.size:
                        ovf = True
                        break
                    w = top
                    if rlen > 0:
                        for k in range(rlen):
                            stk_b[w + k] = path[rl + 1 + k]
                        stk_b[w + rlen] = 47
                        w += rlen + 1
                    for k in range(nl):
                        stk_b[w + k] = nm_b[no + k]
                    stk_o[nstk] = top
                    stk_l[nstk] = clen
                    stk_d[nstk] = depth + 1
                    nstk += 1
                    top += clen
                    continue
                kind = -1
                if _ends_with(nm_b, no, nl, _SFX_IDX):
                    kind = _FOUND
                elif depth > 0:
                    kind = _STRAY_RLOC if _ends_with(nm_b, no, nl, _SFX_RLOC) else _STRAY_OTHER
                if kind < 0:
                    continue
                if nout >= out_o.size or res[0] + clen > out_b.size:
                    ovf = True
                    break
                w = res[0]
                if rlen > 0:
                    for k in range(rlen):
                        out_b[w + k] = path[rl + 1 + k]
                    out_b[w + rlen] = 47
                    w += rlen + 1
                for k in range(nl):
                    out_b[w + k] = nm_b[no + k]
                out_o[nout] = res[0]
                out_l[nout] = clen
                out_k[nout] = kind
                out_e[nout] = 0
                out_depth[nout] = depth
                out_named[nout] = False
                out_scope[nout] = 0
                out_led[nout] = 0
                if kind == _FOUND:  # formats.paths.parse_index_name
                    sl = nl - 4
                    scoped = False
                    if sl == 32:
                        ok1, hi = _hex_value(nm_b, no, 16)
                        ok2, lo = _hex_value(nm_b, no + 16, 16)
                        if ok1 and ok2 and hi != 0:
                            out_scope[nout] = hi
                            out_led[nout] = lo
                            out_named[nout] = True
                            scoped = True
                    if not scoped:
                        ok1, v = _hex_name_value(nm_b, no, sl)
                        if ok1:
                            out_led[nout] = v
                            out_named[nout] = True
                res[0] += clen
                nout += 1
        if ovf:  # undo this folder and put it back on the stack, to be redone after growing
            nout = nout0
            res[0] = top0
            for k in range(rlen):
                stk_b[ro + k] = path[rl + 1 + k]
            stk_o[nstk0] = ro
            stk_l[nstk0] = rlen
            stk_d[nstk0] = depth
            nstk = nstk0 + 1
            res[1] = _OVERFLOW
            break
    res[2] = nout
    res[3] = nstk


def _grown(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, a.dtype)
    out[:len(a)] = a
    return out


class _NativeListing:
    """One dir's listing from _list_tree, with Python strings built from its ASCII arena."""

    def __init__(self, cur: str):
        self.cur = cur
        root = np.frombuffer(os.fsencode(cur), np.uint8)
        cap, names, outs = 1 << 16, 1 << 12, 1 << 14
        path = np.zeros(len(root) + 4096, np.uint8)
        stk = [np.zeros(cap, np.uint8), np.zeros(names, np.int64), np.zeros(names, np.int64), np.zeros(names, np.int64)]
        nm = [np.zeros(cap, np.uint8), np.zeros(names, np.int64), np.zeros(names, np.int64), np.zeros(names, np.uint8),
              np.zeros(names, np.int64), np.zeros(names, np.int64)]
        out = [np.zeros(outs * 64, np.uint8), np.zeros(outs, np.int64), np.zeros(outs, np.int64),
               np.zeros(outs, np.uint8), np.zeros(outs, np.int32), np.zeros(outs, np.uint64), np.zeros(outs, np.uint64),
               np.zeros(outs, np.bool_), np.zeros(outs, np.int32)]
        res = np.array([0, 0, 0, -1], np.int64)
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        while True:
            _list_tree(root, flags, path, *stk, *nm, *out, res)
            if res[1] != _OVERFLOW:
                break
            path = _grown(path, 2 * len(path))
            stk = [_grown(a, 2 * len(a)) for a in stk]
            nm = [_grown(a, 2 * len(a)) for a in nm]
            out = [_grown(a, 2 * len(a)) for a in out]
        self.ok = res[1] == _OK_
        if not self.ok:
            return
        n = int(res[2])
        b, o, ln, kind, err, scope, led, named, depth = out
        text = b[:int(res[0])].tobytes().decode("ascii")
        offs, lens = o[:n].tolist(), ln[:n].tolist()
        rels = [text[a:a + m] for a, m in zip(offs, lens)]
        kinds = kind[:n]
        f = np.flatnonzero(kinds == _FOUND)
        self.rel = [rels[i] for i in f.tolist()]
        self.arena = b[:int(res[0])].copy()
        self.rel_off, self.rel_len = o[f], ln[f]
        self.scope, self.ledger, self.named, self.depth = scope[f], led[f], named[f], depth[f]
        self.strays = []
        sep = os.sep
        for i in np.flatnonzero(kinds != _FOUND).tolist():
            r = rels[i]
            full = cur + sep + r if r else cur
            k = int(kinds[i])
            if k == _CANNOT_LIST:
                self.strays.append((full, f"cannot list ({os.strerror(int(err[i]))})"))
            else:
                self.strays.append((full, "leftover of an index relocation" if k == _STRAY_RLOC
                                    else "not an index file"))


@njit(**JIT)
def _read_files(roots, root_off, root_len, file_root, arena, offs, lens, start, pathbuf, oflags, buf, f_off, f_len,
                f_err, stx, res):
    """open/read/close file k (from ``start``), whose path is its root then ``arena[offs[k]:offs[k]+lens[k]]``,
    into ``buf``.

    res[0]: the next file to read; res[1]: _READ_DONE, _READ_FULL (decode the batch, call again) or
    _READ_BIG (file res[0] alone fills ``buf``: map it). A file that cannot be opened or read gets
    f_len = -1 and its errno in f_err; one that is not a regular file (``oflags`` has O_NONBLOCK, so
    a FIFO opens at once) gets f_err = _ERR_NOT_REGULAR and is not read. A short read of a regular
    file is its end (POSIX), so a file that fits costs open + statx + read + close.
    """
    cap = buf.size
    used = 0
    for k in range(start, offs.size):
        r = file_root[k]
        ro, rl = root_off[r], root_len[r]
        for j in range(rl):
            pathbuf[j] = roots[ro + j]
        ln = lens[k]
        for j in range(ln):
            pathbuf[rl + j] = arena[offs[k] + j]
        pathbuf[rl + ln] = 0
        fd = c_open(pathbuf, 0, oflags)
        if fd < 0:
            f_err[k] = c_errno()
            f_len[k] = -1
            continue
        if c_statx_fd(fd, pathbuf, rl + ln, stx, 0) != 0:  # pathbuf[rl + ln] is 0: the empty path
            f_err[k] = c_errno()
            f_len[k] = -1
            c_close(fd)
            continue
        if (np.int64(ld_u16(stx, STATX_MODE_OFFSET)) & S_IFMT) != S_IFREG:
            f_err[k] = _ERR_NOT_REGULAR
            f_len[k] = -1
            c_close(fd)
            continue
        got = 0
        err = 0
        while used + got < cap:
            want = cap - used - got
            n = c_read(fd, buf, used + got, want)
            if n < 0:
                e = c_errno()
                if e == _EINTR:
                    continue
                err = e
                break
            got += n
            if n < want:
                break
        c_close(fd)
        if err != 0:
            f_err[k] = err
            f_len[k] = -1
            continue
        if used + got >= cap:
            res[0] = k
            res[1] = _READ_BIG if used == 0 else _READ_FULL
            return
        f_off[k] = used
        f_len[k] = got
        f_err[k] = 0
        used += got
    res[0] = offs.size
    res[1] = _READ_DONE


# --- the walk --------------------------------------------------------------------------------
def walk_index_dirs(dirs: list[str], *, batch_bytes: int = DEFAULT_BATCH, native: bool | None = None) -> IndexInventory:
    """Every ``.idx`` below each ``<dir>/current`` (2-level and 4-level): one row per file, every location.

    Equal to ``walk_index_dirs_reference(dirs)``. On Linux the listing and the reads are done by
    jitted kernels calling libc (``native``); elsewhere, or for names outside ASCII, by Python.
    """
    native = K.NATIVE_FS if native is None else native
    inv = IndexInventory(list(dirs))
    di_l, scope_l, led_l, named_l, depth_l = [], [], [], [], []
    arenas: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # per dir: rel path bytes, offsets, lengths
    roots: list[bytes] = []
    for di, d in enumerate(inv.dirs):
        cur = os.path.join(d, CURRENT_DIR)
        lst = _NativeListing(cur) if native else None
        if lst is not None and lst.ok:
            order = sorted(range(len(lst.rel)), key=lst.rel.__getitem__)
            oa = np.array(order, np.int64)
            rels = [lst.rel[i] for i in order]
            scope_l.append(lst.scope[oa]), led_l.append(lst.ledger[oa]), named_l.append(lst.named[oa])
            depth_l.append(lst.depth[oa].astype(np.int64))
            inv.strays.extend(lst.strays)
            arenas.append((lst.arena, lst.rel_off[oa], lst.rel_len[oa]))
        else:
            found, strays = list_index_candidates([d])
            rels = [r for _, _, r in found]
            names = [_ledger_of_name(p[p.rfind(os.sep) + 1:]) for _, p, _ in found]
            scope_l.append(np.array([x[0] for x in names], np.uint64))
            led_l.append(np.array([x[1] for x in names], np.uint64))
            named_l.append(np.array([x[2] for x in names], np.bool_))
            depth_l.append(np.array([r.count(os.sep) for r in rels], np.int64))
            inv.strays.extend(strays)
            enc = [os.fsencode(r) for r in rels]
            lens = np.array([len(x) for x in enc], np.int64)
            arenas.append((np.frombuffer(b"".join(enc), np.uint8), np.cumsum(lens) - lens, lens))
        roots.append(os.fsencode(cur + os.sep))
        sep = cur + os.sep
        inv.paths.extend([sep + r for r in rels])
        inv.relpaths.extend(rels)
        di_l.append(np.full(len(rels), di, np.int64))
    nfiles = len(inv.paths)
    rows = np.zeros(nfiles, INDEX_FILE_DTYPE)
    if nfiles:
        rows["dir"] = np.concatenate(di_l)
        rows["scope"] = np.concatenate(scope_l)
        rows["ledger"] = np.concatenate(led_l)
        rows["named"] = np.concatenate(named_l)
        rows["depth"] = np.concatenate(depth_l)
    inv.headers = [None] * nfiles
    inv.errors = [None] * nfiles
    if native:
        size, info, locs = _NativeReader(inv, batch_bytes).run(roots, arenas, np.concatenate(di_l) if di_l else
                                                               np.zeros(0, np.int64))
    else:
        size, info, locs = _PythonReader(inv, batch_bytes).run()
    ok = info[:, _OK].astype(bool)
    rows["size"] = size
    rows["header_ok"] = ok
    rows["version"] = np.where(ok, info[:, _VERSION], -1)
    rows["state_bits"] = np.where(ok, info[:, _STATE], 0)
    rows["present"] = np.where(ok, info[:, _PRESENT], 0)
    rows["last_entry"] = np.where(ok, info[:, _LAST], -1)
    rows["trailing"] = np.where(ok, info[:, _TRAILING], 0)
    inv.files = rows
    inv.locations = locs
    return inv


class _Reader:
    """Reads every listed file in batches and decodes each batch with _decode_batch."""

    def __init__(self, inv: IndexInventory, batch_bytes: int):
        self.inv = inv
        n = len(inv.paths)
        self.size = np.full(n, -1, np.int64)
        self.info = np.zeros((n, 8), np.int64)
        self.parts: list[np.ndarray] = []
        self.buf = np.empty(max(batch_bytes, 4096), np.uint8)

    def failed(self, r: int, err: DiskError) -> None:
        path = self.inv.paths[r]
        self.inv.errors[r] = err
        self.size[r] = os.path.getsize(path) if os.access(path, os.F_OK) else -1

    def decode(self, b: np.ndarray, rws: np.ndarray, at: np.ndarray, lens: np.ndarray) -> None:
        if len(rws) == 0:
            return
        inf = np.zeros((len(rws), 8), np.int64)
        lf, le, ll = _decode_batch(b, at, lens, inf)
        self.size[rws] = lens
        self.info[rws] = inf
        if len(lf):
            self.parts.append(_locations(rws[lf], le, ll, 0))
        mvb = memoryview(b)
        inv = self.inv
        headers = inv.headers
        ok = inf[:, _OK] != 0
        cols = [c.tolist() for c in (rws[ok], at[ok], inf[ok, _VERSION], inf[ok, _MKLEN], inf[ok, _STATE],
                                     inf[ok, _LACLEN])]
        new, cls = object.__new__, fi.IndexHeader
        for r, o, version, mk, state, lac in zip(*cols):
            # IndexHeader(...) without the frozen dataclass's __init__ (the same fields, a third of the cost)
            h = headers[r] = new(cls)
            h.__dict__.update(version=version, master_key=mvb[o + 12:o + 12 + mk].tobytes(), state_bits=state,
                              explicit_lac_body=mvb[o + 20 + mk:o + 20 + mk + lac].tobytes() if version and lac
                              else None)
        for r, o, n in zip(rws[~ok].tolist(), at[~ok].tolist(), lens[~ok].tolist()):
            try:
                fi.parse_header(mvb[o:o + min(n, _HDR)].tobytes(), path=inv.paths[r])
            except FormatError as e:
                inv.errors[r] = e
            else:
                raise AssertionError(f"{inv.paths[r]}: jitted and reference index header checks disagree")

    def decode_mapped(self, r: int) -> None:
        with map_file(self.inv.paths[r]) as m:
            self.decode(K.readonly(m), np.array([r]), np.zeros(1, np.int64), np.array([m.size], np.int64))

    def result(self):
        locs = np.concatenate(self.parts) if self.parts else np.zeros(0, LOCATION_DTYPE)
        return self.size, self.info, locs


class _NativeReader(_Reader):
    def run(self, roots: list[bytes], arenas, file_root: np.ndarray):
        n = len(self.inv.paths)
        root_len = np.array([len(r) for r in roots], np.int64)
        root_off = np.cumsum(root_len) - root_len
        root_arena = np.frombuffer(b"".join(roots), np.uint8) if roots else np.zeros(0, np.uint8)
        shift = np.cumsum([0] + [len(a) for a, _, _ in arenas[:-1]])
        arena = np.concatenate([a for a, _, _ in arenas]) if arenas else np.zeros(0, np.uint8)
        offs = np.concatenate([o + sh for (_, o, _), sh in zip(arenas, shift)]) if arenas else np.zeros(0, np.int64)
        lens = np.concatenate([ln for _, _, ln in arenas]) if arenas else np.zeros(0, np.int64)
        offs, lens = offs.astype(np.int64), lens.astype(np.int64)
        pathbuf = np.zeros(int(root_len.max(initial=0) + lens.max(initial=0)) + 1, np.uint8)
        f_off = np.zeros(n, np.int64)
        f_len = np.zeros(n, np.int64)
        f_err = np.zeros(n, np.int32)
        stx = np.zeros(STATX_SIZE, np.uint8)
        res = np.zeros(2, np.int64)
        start = 0
        while start < n:
            _read_files(root_arena, root_off, root_len, file_root, arena, offs, lens, start, pathbuf,
                        OPEN_FLAGS, self.buf, f_off, f_len, f_err, stx, res)
            stop = int(res[0])
            rows = np.arange(start, stop)
            good = rows[f_len[rows] >= 0]
            for r in rows[f_len[rows] < 0].tolist():
                e = int(f_err[r])
                self.failed(r, DiskError(self.inv.paths[r], NOT_REGULAR if e == _ERR_NOT_REGULAR
                                         else f"cannot read ({os.strerror(e)})"))
            self.decode(self.buf, good, f_off[good], f_len[good])
            if res[1] == _READ_BIG:
                self.decode_mapped(stop)
                stop += 1
            start = stop
        return self.result()


class _PythonReader(_Reader):
    def run(self):
        buf, view, cap = self.buf, memoryview(self.buf), len(self.buf)
        rws, at, lens = [], [], []
        used = 0
        for r, path in enumerate(self.inv.paths):
            try:
                fd, _st = open_regular(path, "cannot read")   # as read_bytes: no FIFO, no device
            except DiskError as e:
                self.failed(r, e)
                continue
            try:
                got = os.readv(fd, [view[used:]])
                if used + got >= cap:   # may not have fit: decode what is there, retry alone
                    self.decode(buf, np.array(rws, np.int64), np.array(at, np.int64), np.array(lens, np.int64))
                    rws, at, lens, used = [], [], [], 0
                    got = os.preadv(fd, [view], 0)
                    if got >= cap:
                        os.close(fd)
                        fd = -1
                        self.decode_mapped(r)
                        continue
            except OSError as e:
                self.failed(r, DiskError(path, f"cannot read ({e.strerror})"))
                continue
            except DiskError as e:   # decode_mapped
                self.failed(r, e)
                continue
            finally:
                if fd >= 0:
                    os.close(fd)
            rws.append(r)
            at.append(used)
            lens.append(got)
            used += got
        self.decode(buf, np.array(rws, np.int64), np.array(at, np.int64), np.array(lens, np.int64))
        return self.result()
