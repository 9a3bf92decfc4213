"""Jitted entry-log scanner: framing walk with resync, ledgers map, digest verification and sniffing.

``scan_entry_log`` returns the same EntryLogArrays as ``entrylogs.arrays.scan_entry_log_reference``
(its pure-Python twin, which tests compare it to), without Python work per record. The file is read
in windows (``map_window``, default 64 MiB) and the walk position is carried from one window to the
next, so memory stays bounded whatever the file size. A record is emitted only by a window that
holds all of its bytes, which lets the digest pass run on the same window. Two things may look
outside the window, both rare and both only while resyncing after damage: the last non-zero byte
before the end of data (computed once, backwards, when a zero size is met) and the header of a
resync candidate's successor (read from a lazily mapped view of the whole file, touching one page).

Digests (``DigestPlan``): each entry's digest type comes from its V2 flags, from the plan (ledger
metadata), or is sniffed per ledger (CRC32C, then CRC32; HMAC only when the ledger's password is
known): a ledger's entries are tried until one verifies, which decides the type, up to
``max_samples`` of them, after which it is unknown and the result says so. Entries tried before
the decision are re-verified with the decided type, so a corrupt one is BAD, not unknown (within a
call and a file here; across files by ``DigestPlan.recheck``). CRC32/CRC32C are checked by the
jitted kernels of diskio/kernels.py; HMAC-SHA1 by ``hmac`` (one call per HMAC entry).

Compiled kernels are cached (see diskio/kernels.py for NUMBA_CACHE_DIR / BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

from diskio import kernels as K  # first: sets NUMBA_CACHE_DIR before numba is imported

import hashlib
import hmac
import os
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from diskio.kernels import JIT, be_i32, be_i64, be_u32, be_u64, crc_update
from diskio.mapped import file_size, map_file, map_window, read_range
from entrylogs.arrays import ENTRY_DTYPE, PROBLEM_DTYPE, EntryLogArrays
from entrylogs.reader import DIRECT_ALIGNMENT, DIRECT_PADDING_BYTE, MAX_ENTRY_SIZE, SKIP_RECORD, Damage, read_frame
from formats import entrylog as fe
from formats.digests import DigestType, mac_key
from formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE
from formats.errors import FormatError
from formats.paths import parse_entry_log_name

DEFAULT_WINDOW = 64 << 20
MIN_WINDOW = 4096

# Per-entry digest results (DIGEST_DTYPE).
DIGEST_UNKNOWN, DIGEST_OK, DIGEST_BAD = 0, 1, 2
_DIGEST_PENDING_HMAC = 3
SOURCE_NONE, SOURCE_GIVEN, SOURCE_SNIFFED, SOURCE_ENTRY = 0, 1, 2, 3
SOURCE_NAMES = {SOURCE_NONE: None, SOURCE_GIVEN: "metadata", SOURCE_SNIFFED: "sniffed", SOURCE_ENTRY: "entry"}
DIGEST_DTYPE = np.dtype([
    ("type", "u1"),          # DigestType value, 0 = unknown
    ("source", "u1"),        # SOURCE_*: where the type came from
    ("status", "u1"),        # DIGEST_UNKNOWN / DIGEST_OK / DIGEST_BAD
    ("payload_len", "<i8"),  # -1 when the digest length is unknown
])
_DLEN = np.array([-1, 8, 20, 4, 0], dtype=np.int64)  # by DigestType code, 0 = unknown

# Walk kernel state (an int64 array carried across calls and windows).
_MODE, _POS, _ORIGIN, _RCODE, _Q, _NE, _NP, _LNZ, _NEED = range(9)
_NSTATE = 9
_WALK, _RESYNC, _DONE = 0, 1, 2
_ST_DONE, _ST_MORE, _ST_FULL, _ST_LNZ, _ST_PROBE = 0, 1, 2, 3, 4
_LNZ_UNKNOWN = -2
_HEAD = 45  # bytes a header check may read: size(4) + flags(1) + scope(8) + 4 x 8

_ZERO_SIZE, _BAD_SIZE, _BAD_HEADER, _TRUNCATED = (int(Damage.ZERO_SIZE), int(Damage.BAD_SIZE),
                                                  int(Damage.BAD_HEADER), int(Damage.TRUNCATED))
_SKIP_RECORD = SKIP_RECORD
_ALIGN, _PAD_BYTE = DIRECT_ALIGNMENT, DIRECT_PADDING_BYTE


@dataclass
class EntryLogScanArrays(EntryLogArrays):
    """EntryLogArrays plus, when digests were checked, one DIGEST_DTYPE row per entry."""

    digests: np.ndarray | None = None
    payload_hashes: list[str | None] | None = None   # hex, when a payload hash was asked for


# --- kernels ---------------------------------------------------------------------------------
@njit(**JIT)
def _pad_end(buf, base, pos, end):
    """The reference reader's padding_end (0 when none); ``buf`` must hold the bytes up to the boundary."""
    r = pos % _ALIGN
    nxt = pos + _ALIGN - r
    if r == 0 or nxt > end:
        return 0
    for k in range(pos - base, nxt - base):
        if buf[k] != _PAD_BYTE:
            return 0
    return nxt


@njit(**JIT)
def _header_at(buf, base, pos, end):
    """The reference reader's header_at: (damage code or 0, size, format, scope, ledger, entry, lac, length)."""
    z = np.uint64(0)
    if pos + 4 > end:
        return _TRUNCATED, 0, 0, z, z, 0, 0, 0
    i = pos - base
    size = np.int64(be_i32(buf, i))
    if size <= 0:
        return _ZERO_SIZE, size, 0, z, z, 0, 0, 0
    s = i + 4
    if size >= 16 and pos + 4 + size <= end:
        skip = True
        for k in range(8):
            if buf[s + k] != 0xFF:
                skip = False
                break
        if skip:
            return _SKIP_RECORD, size, 0, z, z, 0, 0, 0
    if size < 32 or size > MAX_ENTRY_SIZE or pos + 4 + size > end:
        return _BAD_SIZE, size, 0, z, z, 0, 0, 0
    first = buf[s]
    fmt = 1
    scope = z
    if first >= 0x80:
        nib = first & 0x0F
        if size < 41 or (first & 0xF0) != 0xA0 or nib < 1 or nib > 4:
            return _BAD_HEADER, size, 0, z, z, 0, 0, 0
        fmt = 2
        scope = be_u64(buf, s + 1)
        s += 9
    ledger = be_u64(buf, s)
    entry = be_i64(buf, s + 8)
    lac = be_i64(buf, s + 16)
    length = be_i64(buf, s + 24)
    if entry < 0 or lac < -1 or lac >= entry or length < 0:
        return _BAD_HEADER, size, 0, z, z, 0, 0, 0
    return 0, size, fmt, scope, ledger, entry, lac, length


@njit(**JIT)
def _successor_ok(buf, base, nxt, end):
    """The successor test of the reference plausible_at, zero tail aside: an entry, a skipped
    record or flush padding at ``nxt`` (``buf`` holds its header and any padding)."""
    c2 = _header_at(buf, base, nxt, end)[0]
    if c2 == 0 or c2 == _SKIP_RECORD:
        return True
    return buf[nxt - base] == _PAD_BYTE and _pad_end(buf, base, nxt, end) > 0


@njit(**JIT)
def _walk(buf, base, probe, end, has_map, st, e_off, e_size, e_fmt, e_scope, e_led, e_ent, e_lac, e_len,
          p_off, p_reason, p_resumed):
    """Walk records from the state in ``st`` through ``buf`` (file bytes [base, base + buf.size)).

    Returns a status: done, more (the next window must start at the state's position and hold
    st[_NEED] bytes), full (grow the output arrays), lnz (set st[_LNZ]) or probe (pass the whole file).
    """
    buf_end = base + buf.size
    mode = st[_MODE]
    pos = st[_POS]
    origin = st[_ORIGIN]
    rcode = st[_RCODE]
    q = st[_Q]
    ne = st[_NE]
    npr = st[_NP]
    lnz = st[_LNZ]
    status = _ST_DONE
    while True:
        if mode == _WALK:
            if pos >= end:
                mode = _DONE
                status = _ST_DONE
                break
            if min(pos + _HEAD, end) > buf_end:
                st[_NEED] = _HEAD
                status = _ST_MORE
                break
            if buf[pos - base] == _PAD_BYTE and pos % _ALIGN != 0:
                bnd = pos + _ALIGN - pos % _ALIGN
                if bnd <= end:
                    if bnd > buf_end:  # the padding runs past this window: judge it in the next
                        st[_NEED] = bnd - pos
                        status = _ST_MORE
                        break
                    if _pad_end(buf, base, pos, end) > 0:
                        pos = bnd
                        continue
            code, size, fmt, scope, led, ent, lac, ln = _header_at(buf, base, pos, end)
            if code == 0:
                if pos + 4 + size > buf_end:
                    st[_NEED] = 4 + size
                    status = _ST_MORE
                    break
                if ne >= e_off.size:
                    status = _ST_FULL
                    break
                e_off[ne] = pos
                e_size[ne] = size
                e_fmt[ne] = fmt
                e_scope[ne] = scope
                e_led[ne] = led
                e_ent[ne] = ent
                e_lac[ne] = lac
                e_len[ne] = ln
                ne += 1
                pos += 4 + size
                continue
            if code == _SKIP_RECORD:
                pos += 4 + size
                continue
            if code == _ZERO_SIZE:
                if lnz == _LNZ_UNKNOWN:
                    status = _ST_LNZ
                    break
                if lnz < pos:  # zeros to the end of data
                    if has_map:
                        if npr >= p_off.size:
                            status = _ST_FULL
                            break
                        p_off[npr] = pos
                        p_reason[npr] = _ZERO_SIZE
                        p_resumed[npr] = end
                        npr += 1
                    mode = _DONE
                    status = _ST_DONE
                    break
            origin = pos
            rcode = code
            q = pos + 1
            mode = _RESYNC
            continue
        elif mode == _RESYNC:
            found = -1
            stop = _ST_DONE
            while q + 4 + 32 <= end:
                if min(q + _HEAD, end) > buf_end:
                    st[_NEED] = _HEAD
                    stop = _ST_MORE
                    break
                c1, size, fmt, scope, led, ent, lac, ln = _header_at(buf, base, q, end)
                if c1 != 0:
                    q += 1
                    continue
                nxt = q + 4 + size
                if nxt == end:
                    found = q
                    break
                # the bytes that judge the successor: its header, and up to the next 4096 boundary
                # when it may be flush padding
                need_end = min(nxt + _HEAD, end)
                if nxt % _ALIGN != 0 and (nxt >= buf_end or buf[nxt - base] == _PAD_BYTE):
                    need_end = max(need_end, min(nxt + _ALIGN - nxt % _ALIGN, end))
                if need_end <= buf_end:
                    if _successor_ok(buf, base, nxt, end):
                        found = q
                        break
                    if lnz == _LNZ_UNKNOWN:
                        stop = _ST_LNZ
                        break
                    if lnz < nxt:
                        found = q
                        break
                    q += 1
                    continue
                if lnz == _LNZ_UNKNOWN:
                    stop = _ST_LNZ
                    break
                if lnz < nxt:
                    found = q
                    break
                if probe.size == 0:
                    stop = _ST_PROBE
                    break
                if _successor_ok(probe, 0, nxt, end):
                    found = q
                    break
                q += 1
            if stop != _ST_DONE:
                status = stop
                break
            resumed = found if found >= 0 else end
            if npr >= p_off.size:
                status = _ST_FULL
                break
            p_off[npr] = origin
            p_reason[npr] = rcode
            p_resumed[npr] = resumed
            npr += 1
            pos = resumed
            mode = _WALK
        else:
            status = _ST_DONE
            break
    st[_MODE] = mode
    st[_POS] = pos
    st[_ORIGIN] = origin
    st[_RCODE] = rcode
    st[_Q] = q
    st[_NE] = ne
    st[_NP] = npr
    return status


@njit(**JIT)
def _verify(buf, base, off, size, fmt, code, known, variant, out_type, out_status):
    """Check CRC32/CRC32C digests of entries held in ``buf``; DUMMY passes; HMAC is left pending.

    ``code``: the DigestType of each V1 entry (0 = unknown); V2 entries name theirs in the flags.
    ``known``: a status already established while sniffing (0 = check here).
    """
    m = np.uint64(0xFFFFFFFF)
    for i in range(off.size):
        s = off[i] + 4 - base
        n = size[i]
        if fmt[i] == 2:
            hdr = 41
            c = buf[s] & 0x0F
        else:
            hdr = 32
            c = code[i]
        out_type[i] = c
        if known[i] != 0:
            out_status[i] = known[i]
            continue
        if c == 0:
            out_status[i] = DIGEST_UNKNOWN
            continue
        d = 8 if c == 1 else 20 if c == 2 else 4 if c == 3 else 0
        if n < hdr + d:
            out_status[i] = DIGEST_BAD
            continue
        if c == 4:
            out_status[i] = DIGEST_OK
            continue
        if c == 2:
            out_status[i] = _DIGEST_PENDING_HMAC
            continue
        poly = 0 if c == 1 else 1
        crc = crc_update(m, buf, s, hdr, poly, variant)
        crc = crc_update(crc, buf, s + hdr + d, n - hdr - d, poly, variant) ^ m
        if c == 3:
            stored = np.uint64(be_u32(buf, s + hdr))
        else:
            stored = be_u64(buf, s + hdr)
        out_status[i] = DIGEST_OK if stored == crc else DIGEST_BAD


@njit(**JIT)
def _sniff(buf, base, off, size, variant, mask):
    """For V1 entries: bit 0 set when the entry verifies as CRC32C; else bit 1 when it verifies as CRC32.

    CRC32 is not tried once CRC32C matched (CRC32C wins the ledger anyway).
    """
    m = np.uint64(0xFFFFFFFF)
    for i in range(off.size):
        s = off[i] + 4 - base
        n = size[i]
        r = 0
        if n >= 36:
            crc = crc_update(m, buf, s, 32, 1, variant)
            crc = crc_update(crc, buf, s + 36, n - 36, 1, variant) ^ m
            if np.uint64(be_u32(buf, s + 32)) == crc:
                r |= 1
        if r == 0 and n >= 40:
            crc = crc_update(m, buf, s, 32, 0, variant)
            crc = crc_update(crc, buf, s + 40, n - 40, 0, variant) ^ m
            if be_u64(buf, s + 32) == crc:
                r |= 2
        mask[i] = r


# --- digest plan -----------------------------------------------------------------------------
LedgerKey = tuple[int, int]   # (scope, ledger)


@dataclass
class DigestPlan:
    """What is known about each ledger's digest, and what sniffing found; shared across files.

    ``known``: digest types from ledger metadata; ``passwords``: ledger passwords (for HMAC).
    ``force``: check every V1 entry as this type (benchmarks). ``sniff``: sniff the type of ledgers
    not in ``known``: each of a ledger's entries is tried (CRC32C, then CRC32, then HMAC when the
    password is known) until one verifies, which decides the ledger's type; a ledger is decided
    unknown only after ``max_samples`` entries of it verified as nothing. So a ledger whose first
    entries are corrupt is still decided by a later intact entry, in a later window or file.

    Entries checked while their ledger was undecided come out DIGEST_UNKNOWN (type 0). Within one
    ``verify_entry_digests`` call, and within one ``scan_entry_log`` (every window of the file),
    they are re-verified once the ledger is decided, so they end OK or BAD. Across calls or files
    the caller re-verifies them: ``plan.recheck(scan)`` does it for a finished EntryLogScanArrays
    (``verify_entry_digests`` with this plan on those entries does it for any entry array).
    """

    known: dict[LedgerKey, DigestType] = field(default_factory=dict)
    passwords: dict[LedgerKey, bytes] = field(default_factory=dict)
    sniff: bool = True
    max_samples: int = 64
    force: DigestType | None = None
    crc_variant: int = field(default_factory=lambda: K.CRC_VARIANT)
    decided: dict[LedgerKey, tuple[int, int]] = field(default_factory=dict)   # -> (type code, source)
    tried: dict[LedgerKey, int] = field(default_factory=dict)                 # entries sniffed, none verified
    dlen_hint: dict[LedgerKey, int] = field(default_factory=dict)
    _mac_keys: dict[LedgerKey, bytes] = field(default_factory=dict, repr=False)

    def recheck(self, scan: "EntryLogScanArrays", data=None) -> int:
        """Re-verify a finished scan's entries left unknown while their ledger was undecided.

        For the V1 entries of ``scan`` whose digest came out DIGEST_UNKNOWN with no type, and whose
        ledger this plan has decided since (by another window or file), check the digest with the
        decided type and update ``scan.digests`` (and ``scan.payload_hashes``) in place. ``data``:
        the file's bytes, when the scan was of in-memory bytes. Returns the number of rows updated.
        """
        return recheck_digests(scan, self, data)

    def ledger_digest(self, key: LedgerKey) -> tuple[DigestType | None, str | None]:
        """A V1 ledger's digest type as decided so far and where it came from."""
        code, src = self.decided.get(key, (0, SOURCE_NONE))
        return (DigestType(code) if code else None), SOURCE_NAMES[src]

    def mac_key_for(self, key: LedgerKey) -> bytes | None:
        k = self._mac_keys.get(key)
        if k is None and key in self.passwords:
            k = self._mac_keys[key] = mac_key(self.passwords[key])
        return k


def _hmac_ok(mk: bytes, mv: memoryview, s: int, hdr: int, n: int) -> bool:
    h = hmac.new(mk, mv[s:s + hdr], hashlib.sha1)
    h.update(mv[s + hdr + 20:s + n])
    return hmac.compare_digest(h.digest(), mv[s + hdr:s + hdr + 20].tobytes())


def _decide_ledger_codes(plan: DigestPlan, buf, base, off, size, ledger, entry, length, v1,
                         known_status) -> tuple[np.ndarray, np.ndarray]:
    """Per-entry (type code, source) for the V1 entries ``v1`` (indices), sniffing undecided ledgers.

    The digests of sniffed samples whose ledger turns out CRC32C or CRC32 are already checked: their
    statuses go into ``known_status`` (indexed like ``off``).
    """
    n1 = len(v1)
    code = np.zeros(n1, np.uint8)
    src = np.zeros(n1, np.uint8)
    if n1 == 0:
        return code, src
    if plan.force is not None:
        code[:] = int(plan.force)
        src[:] = SOURCE_GIVEN
        return code, src
    uled, inv = np.unique(ledger[v1], return_inverse=True)
    inv = inv.ravel()
    lcode = np.zeros(len(uled), np.uint8)
    lsrc = np.zeros(len(uled), np.uint8)
    need = np.zeros(len(uled), np.int64)
    for j, lid in enumerate(uled.tolist()):
        key = (0, lid)
        d = plan.decided.get(key)
        if d is None:
            t = plan.known.get(key)
            if t is not None:
                d = plan.decided[key] = (int(t), SOURCE_GIVEN)
            elif not plan.sniff:
                d = plan.decided[key] = (0, SOURCE_NONE)
            else:
                need[j] = max(1, plan.max_samples - plan.tried.get(key, 0))
                continue
        lcode[j], lsrc[j] = d
    if need.any():
        order = np.argsort(inv, kind="stable")
        grp = inv[order]
        first = np.searchsorted(grp, np.arange(len(uled)))
        rank = np.arange(len(order)) - first[grp]
        pick = np.sort(order[rank < need[grp]])
        sample = v1[pick]
        mask = np.zeros(len(sample), np.uint8)
        _sniff(buf, base, off[sample], size[sample], plan.crc_variant, mask)
        lmask = np.zeros(len(uled), np.uint8)
        np.bitwise_or.at(lmask, inv[pick], mask)
        cnt = np.bincount(inv[pick], minlength=len(uled))
        by_ledger = np.argsort(inv[pick], kind="stable")            # samples grouped by ledger
        starts = np.concatenate([[0], np.cumsum(cnt)])
        mv = memoryview(buf)
        for j in np.flatnonzero(need).tolist():
            key = (0, int(uled[j]))
            if lmask[j] & 1:
                d = (int(DigestType.CRC32C), SOURCE_SNIFFED)
            elif lmask[j] & 2:
                d = (int(DigestType.CRC32), SOURCE_SNIFFED)
            else:
                d = None
                mk = plan.mac_key_for(key)
                if mk is not None:
                    for i in sample[by_ledger[starts[j]:starts[j + 1]]].tolist():
                        s = int(off[i]) + 4 - base
                        if int(size[i]) >= 52 and _hmac_ok(mk, mv, s, 32, int(size[i])):
                            d = (int(DigestType.HMAC), SOURCE_SNIFFED)
                            break
                if d is None:
                    tried = plan.tried[key] = plan.tried.get(key, 0) + int(cnt[j])
                    if tried >= plan.max_samples:
                        plan.decided[key] = (0, SOURCE_SNIFFED)   # sniffed, and nothing verifies
                    lsrc[j] = SOURCE_SNIFFED
                    continue
            plan.decided[key] = d
            lcode[j], lsrc[j] = d
        # samples of ledgers decided CRC32C/CRC32 here: their sniff result is their digest check
        # (bit 1 was computed exactly for the samples that failed CRC32C, i.e. all of a CRC32 ledger's)
        lc = lcode[inv[pick]]
        bit = np.where(lc == int(DigestType.CRC32C), 1, np.where(lc == int(DigestType.CRC32), 2, 0))
        done = bit != 0
        known_status[sample[done]] = np.where(mask[done] & bit[done], DIGEST_OK, DIGEST_BAD)
    if plan.sniff and not lcode.all():
        _learn_dlen_hints(plan, uled, lcode, inv, v1, size, entry, length)
    code[:] = lcode[inv]
    src[:] = lsrc[inv]
    return code, src


def _learn_dlen_hints(plan: DigestPlan, uled, lcode, inv, v1, size, entry, length) -> None:
    """For ledgers whose type stays unknown, infer the digest length from the cumulative lengths.

    An entry's payload is ``length - previous length`` (``length`` itself for entry 0), so the digest
    takes ``size - 32 - payload`` bytes. Only the lengths 0, 4, 8 and 20 are accepted.
    """
    todo = (lcode == 0) & np.array([(0, int(l)) not in plan.dlen_hint for l in uled.tolist()], dtype=bool)
    unk = np.flatnonzero(todo[inv])
    if len(unk) == 0:
        return
    idx = v1[unk]
    g = inv[unk]
    order = np.lexsort((entry[idx], g))
    idx, g = idx[order], g[order]
    e = entry[idx]
    payload = length[idx].copy()
    prev_ok = np.zeros(len(idx), bool)
    prev_ok[1:] = (g[1:] == g[:-1]) & (e[1:] == e[:-1] + 1)
    payload[1:] = np.where(prev_ok[1:], length[idx][1:] - length[idx][:-1], payload[1:])
    usable = (e == 0) | prev_ok
    d = size[idx].astype(np.int64) - 32 - payload
    good = np.flatnonzero(usable & np.isin(d, (0, 4, 8, 20)))
    groups, first = np.unique(g[good], return_index=True)
    for j, k in zip(groups.tolist(), good[first].tolist()):
        plan.dlen_hint.setdefault((0, int(uled[j])), int(d[k]))


def verify_entry_digests(data, entries: np.ndarray, plan: DigestPlan | None = None, *, base: int = 0,
                         payload_hash: str | None = None) -> tuple[np.ndarray, list[str | None] | None]:
    """Digest results (DIGEST_DTYPE rows) for ``entries`` (ENTRY_DTYPE) held in ``data``.

    ``data`` holds the file bytes [base, base + len(data)) and every entry's whole record. ``plan``
    (updated in place) gives known types and passwords and collects sniffing results; without one,
    every V1 ledger is sniffed. ``payload_hash="sha256"`` also returns each payload's hex digest
    (None where the digest length, hence the payload, is unknown).
    """
    if payload_hash not in (None, "sha256"):
        raise ValueError(f"unsupported payload hash {payload_hash!r} (only sha256)")
    plan = DigestPlan() if plan is None else plan
    buf = K.as_bytes_array(data)
    n = len(entries)
    out = np.zeros(n, DIGEST_DTYPE)
    if n == 0:
        return out, ([] if payload_hash else None)
    off = np.ascontiguousarray(entries["offset"], dtype=np.int64)
    size = np.ascontiguousarray(entries["size"], dtype=np.int64)
    fmt = np.ascontiguousarray(entries["format"], dtype=np.uint8)
    if len(off) and (off.min() + 4 < base or (off + 4 + size).max() > base + buf.size):
        raise ValueError("entries outside the bytes given")
    ledger = np.ascontiguousarray(entries["ledger"])
    v1 = np.flatnonzero(fmt == 1)
    code = np.zeros(n, np.uint8)
    src = np.full(n, SOURCE_ENTRY, np.uint8)
    known = np.zeros(n, np.uint8)
    c1, s1 = _decide_ledger_codes(plan, buf, base, off, size, ledger, entries["entry"], entries["length"], v1, known)
    code[v1] = c1
    src[v1] = s1
    dtype = np.zeros(n, np.uint8)
    status = np.zeros(n, np.uint8)
    _verify(buf, base, off, size, fmt, code, known, plan.crc_variant, dtype, status)
    hdr = np.where(fmt == 2, ENTRY_V2_HEADER_SIZE, ENTRY_V1_HEADER_SIZE)
    pend = np.flatnonzero(status == _DIGEST_PENDING_HMAC)
    if len(pend):
        mv = memoryview(buf)
        scope = entries["scope"]
        for i in pend.tolist():
            mk = plan.mac_key_for((int(scope[i]), int(ledger[i])))
            if mk is None:
                status[i] = DIGEST_UNKNOWN
            else:
                s = int(off[i]) + 4 - base
                status[i] = DIGEST_OK if _hmac_ok(mk, mv, s, int(hdr[i]), int(size[i])) else DIGEST_BAD
    dlen = _DLEN[dtype]
    unknown = np.flatnonzero(dlen < 0)
    if len(unknown) and plan.dlen_hint:
        uu, ui = np.unique(ledger[unknown], return_inverse=True)
        hint = np.array([plan.dlen_hint.get((0, l), -1) for l in uu.tolist()], dtype=np.int64)
        dlen[unknown] = hint[ui.ravel()]
    plen = np.where(dlen >= 0, size - hdr - dlen, -1)
    plen[plen < -1] = -1  # an entry too short for its digest
    out["type"] = dtype
    out["source"] = src
    out["status"] = status
    out["payload_len"] = plen
    hashes = None
    if payload_hash:
        mv = memoryview(buf)
        start = off + 4 - base + hdr + np.maximum(dlen, 0)
        hashes = [None] * n
        for i in np.flatnonzero(plen >= 0).tolist():
            a = int(start[i])
            hashes[i] = hashlib.sha256(mv[a:a + int(plen[i])]).hexdigest()
    return out, hashes


def _recheck_rows(scan, plan: DigestPlan, whole) -> int:
    """recheck_digests with ``whole()`` giving the file's bytes (called only when there is work)."""
    d = scan.digests
    if d is None or len(d) == 0 or plan.force is not None:
        return 0
    e = scan.entries
    cand = np.flatnonzero((d["type"] == 0) & (d["status"] == DIGEST_UNKNOWN) & (e["format"] == 1))
    if len(cand) == 0:
        return 0
    uled, inv = np.unique(e["ledger"][cand], return_inverse=True)
    now = np.array([plan.decided.get((0, l), (0, SOURCE_NONE))[0] != 0 for l in uled.tolist()], dtype=bool)
    idx = cand[now[inv.ravel()]]
    if len(idx) == 0:
        return 0
    hashing = scan.payload_hashes is not None
    rows, hs = verify_entry_digests(whole(), e[idx], plan, payload_hash="sha256" if hashing else None)
    d[idx] = rows
    if hashing:
        for k, i in enumerate(idx.tolist()):
            scan.payload_hashes[i] = hs[k]
    return len(idx)


def recheck_digests(scan: "EntryLogScanArrays", plan: DigestPlan, data=None) -> int:
    """Re-verify the entries of a finished scan left DIGEST_UNKNOWN while their ledger was undecided.

    Sniffing decides a ledger's type on the first of its entries that verifies; entries of it
    checked before that (in another file, or by another call) came out unknown, with type 0. For
    those whose ledger ``plan`` has decided since, this checks the digest with the decided type and
    updates ``scan.digests`` (and ``scan.payload_hashes``) in place, so a corrupt one is reported
    BAD. ``data``: the file's bytes when the scan was of in-memory bytes; else the file is mapped
    (only the pages of those entries are read). Returns the number of rows updated.
    """
    if data is not None:
        return _recheck_rows(scan, plan, lambda: K.as_bytes_array(data))
    with ExitStack() as stack:
        return _recheck_rows(scan, plan, lambda: K.readonly(stack.enter_context(map_file(scan.path))))


# --- file access -----------------------------------------------------------------------------
class _Source:
    """A file (read through windows) or in-memory bytes, with the same small interface."""

    def __init__(self, path: str, data, stack: ExitStack):
        self.path = path
        self.stack = stack
        self._whole = None
        if data is not None:
            self.arr = K.as_bytes_array(data)
            self.size = self.arr.size
        else:
            self.arr = None
            self.size = file_size(path)   # DiskError unless a readable regular file (no FIFO, no device)

    def read(self, offset: int, length: int) -> bytes:
        length = max(0, min(length, self.size - offset))
        if self.arr is not None:
            return self.arr[offset:offset + length].tobytes()
        return read_range(self.path, offset, length)

    def window(self, offset: int, length: int):
        if self.arr is not None:
            return _Held(self.arr[offset:offset + length])
        return map_window(self.path, offset, length)

    def whole(self) -> np.ndarray:
        if self._whole is None:
            self._whole = self.arr if self.arr is not None else K.readonly(self.stack.enter_context(map_file(self.path)))
        return self._whole

    def last_nonzero(self, end: int, window: int) -> int:
        hi = end
        while hi > 0:
            lo = max(0, hi - window)
            with self.window(lo, hi - lo) as w:
                i = K.last_nonzero(K.readonly(w))
                del w
            if i >= 0:
                return lo + i
            hi = lo
        return -1


class _Held:
    def __init__(self, arr):
        self.arr = arr

    def __enter__(self):
        return self.arr

    def __exit__(self, *exc):
        return False


def _parse_ledgers_map(src: _Source, start: int, path: str) -> dict[tuple[int, int], int]:
    """formats.entrylog.parse_ledgers_map over the file from ``start``, batch arrays parsed by numpy.

    Any malformed batch is handed to the reference parser, so the error raised is the same.
    """
    out: dict[tuple[int, int], int] = {}
    pos, n = start, src.size
    while pos + 4 <= n:
        size = int.from_bytes(src.read(pos, 4), "big", signed=True)
        if size <= 0:
            break
        ok = pos + 4 + size <= n and size >= 20
        if ok:
            head = src.read(pos + 4, 20)
            lid = int.from_bytes(head[0:8], "big")
            eid = int.from_bytes(head[8:16], "big", signed=True)
            count = int.from_bytes(head[16:20], "big", signed=True)
            width = 24 if eid == fe.SCOPED_LEDGERS_MAP_ENTRY_ID else 16
            ok = (lid == fe.INVALID_LEDGER_ID and eid in (fe.LEDGERS_MAP_ENTRY_ID, fe.SCOPED_LEDGERS_MAP_ENTRY_ID)
                  and 0 < count <= fe.LEDGERS_MAP_MAX_BATCH and size == 20 + width * count)
        if not ok:
            chunk = src.read(pos, min(n - pos, 4 + size))
            try:
                fe.parse_ledgers_map(chunk, 0, path=path)
            except FormatError as e:
                raise e.at(base_offset=pos) from None
            raise AssertionError(f"{path}: ledgers-map batch at {pos}: fast and reference parsers disagree")
        body = np.frombuffer(src.read(pos + 24, width * count), dtype=">u8").reshape(count, width // 8)
        sizes = body[:, -1].astype(np.int64).tolist()  # the byte counts are signed longs
        ledgers = body[:, -2].tolist()
        scopes = body[:, 0].tolist() if width == 24 else [0] * count
        for s, l, b in zip(scopes, ledgers, sizes):
            k = (s, l)
            out[k] = out.get(k, 0) + b
        pos += 4 + size
    return out


class _Columns:
    def __init__(self, cap: int, pcap: int):
        self.e = [np.zeros(cap, t) for t in (np.int64, np.int64, np.uint8, np.uint64, np.uint64, np.int64,
                                              np.int64, np.int64)]
        self.p = [np.zeros(pcap, t) for t in (np.int64, np.uint8, np.int64)]

    def grow(self, st) -> None:
        if st[_NE] >= len(self.e[0]):
            self.e = [np.concatenate([a, np.zeros(len(a), a.dtype)]) for a in self.e]
        if st[_NP] >= len(self.p[0]):
            self.p = [np.concatenate([a, np.zeros(len(a), a.dtype)]) for a in self.p]

    def entries(self, lo: int, hi: int) -> np.ndarray:
        out = np.zeros(hi - lo, ENTRY_DTYPE)
        for name, a in zip(ENTRY_DTYPE.names, self.e):
            out[name] = a[lo:hi]
        return out

    def problems(self, n: int) -> np.ndarray:
        out = np.zeros(n, PROBLEM_DTYPE)
        for name, a in zip(PROBLEM_DTYPE.names, self.p):
            out[name] = a[:n]
        return out


# --- the scanner -----------------------------------------------------------------------------
def scan_entry_log(path: str | os.PathLike, *, window: int = DEFAULT_WINDOW, data=None,
                   digests: DigestPlan | None = None, payload_hash: str | None = None) -> EntryLogScanArrays:
    """Scan one entry log: header, ledgers map, every framed entry, damage and resync.

    Equal to ``scan_entry_log_reference(path, data)`` in every field it shares with it. ``window``
    bounds the bytes mapped at once (a record larger than it gets a window of its own size).
    ``data`` scans in-memory bytes instead of reading ``path``. With ``digests`` (a DigestPlan,
    updated in place) or ``payload_hash``, every entry's digest is checked too (``.digests``).
    """
    p = os.fspath(path)
    window = max(int(window), MIN_WINDOW)
    check = digests is not None or payload_hash is not None
    plan = digests if digests is not None else (DigestPlan() if check else None)
    with ExitStack() as stack:
        src = _Source(p, data, stack)
        res = EntryLogScanArrays(p, parse_entry_log_name(os.path.basename(p)), src.size, None, None, None, None, 0,
                                 np.zeros(0, ENTRY_DTYPE), np.zeros(0, PROBLEM_DTYPE))
        if check:
            res.digests = np.zeros(0, DIGEST_DTYPE)
            res.payload_hashes = [] if payload_hash else None
        if src.size == 0:
            return res  # a preallocated log that was never written
        fr = read_frame(src.read, src.size, p, lambda start: _parse_ledgers_map(src, start, p))
        res.header, res.header_error, res.ledgers_map, res.map_error = fr.header, fr.header_error, \
            fr.ledgers_map, fr.map_error
        end = fr.data_end
        res.data_end = end
        has_map = res.ledgers_map is not None

        st = np.zeros(_NSTATE, np.int64)
        st[_MODE], st[_POS], st[_LNZ] = _WALK, fe.HEADER_SIZE, _LNZ_UNKNOWN
        cap = int(min(max(end - fe.HEADER_SIZE, 0) // 36 + 1, max(1024, min(window, end) // 2048)))
        cols = _Columns(cap, 16)
        probe = K.readonly(np.zeros(0, np.uint8))
        dig_parts, hash_parts = [], []
        while st[_MODE] != _DONE:
            start = int(st[_POS] if st[_MODE] == _WALK else st[_Q])
            length = min(end - start, max(window, int(st[_NEED]) + _HEAD))
            st[_NEED] = 0
            with src.window(start, max(length, 0)) as w:
                buf = K.readonly(w)
                e0 = int(st[_NE])
                while True:
                    status = _walk(buf, start, probe, end, has_map, st, *cols.e, *cols.p)
                    if status == _ST_FULL:
                        cols.grow(st)
                    elif status == _ST_LNZ:
                        st[_LNZ] = src.last_nonzero(end, window)
                    elif status == _ST_PROBE:
                        probe = src.whole()
                    else:
                        break
                e1 = int(st[_NE])
                if check and e1 > e0:
                    d, hs = verify_entry_digests(buf, cols.entries(e0, e1), plan, base=start, payload_hash=payload_hash)
                    dig_parts.append(d)
                    if hs is not None:
                        hash_parts.extend(hs)
                del buf, w  # let map_window unmap now, before the next window is mapped
        res.entries = cols.entries(0, int(st[_NE]))
        res.problems = cols.problems(int(st[_NP]))
        if check:
            res.digests = np.concatenate(dig_parts) if dig_parts else np.zeros(0, DIGEST_DTYPE)
            res.payload_hashes = hash_parts if payload_hash else None
            # entries checked in a window before a later window decided their ledger's type
            _recheck_rows(res, plan, src.whole)
    return res
