"""Digest policy shared by the entry-log and journal scanners: which digest each entry is checked
with (ledger metadata, V2 flags, or sniffing per ledger), HMAC keys, payload lengths and hashes.

``DigestPlan`` holds what is known and learned of each ledger's digest across files and windows; a
ledger's entries are tried (CRC32C, then CRC32; HMAC only when the ledger's password is known) until
one verifies, which decides the type, up to ``max_samples`` of them, after which it is unknown and
the result says so. Entries tried before the decision are re-verified with the decided type, so a
corrupt one is BAD, not unknown (within a call here; across files by ``DigestPlan.recheck``).
CRC32/CRC32C are checked by the jitted kernels of diskio/digest_kernels.py; HMAC-SHA1 by ``hmac``
(one call per HMAC entry). A plan may be shared by threads (fsck ``--jobs``): its lock guards every
read-modify-write of its tables, and the kernels run outside it.
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from diskio import config
from diskio.digest_kernels import (DIGEST_BAD, DIGEST_LENGTH_BY_CODE, DIGEST_OK, DIGEST_PENDING_HMAC,
                                   DIGEST_UNKNOWN, SNIFF_CRC32, SNIFF_CRC32C, check_digests, sniff_crc)
from diskio.kernels import as_bytes_array, readonly
from diskio.mapped import map_file
from diskio.payload_hashes import PayloadHashes, sha256_payloads
from formats.digests import DIGEST_LENGTH, DigestType, mac_key
from formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE
from formats.entrylog import SIZE_PREFIX_SIZE

__all__ = ["DIGEST_BAD", "DIGEST_DTYPE", "DIGEST_OK", "DIGEST_UNKNOWN", "DigestPlan", "LedgerKey", "SOURCE_ENTRY",
           "SOURCE_GIVEN", "SOURCE_NAMES", "SOURCE_NONE", "SOURCE_SNIFFED", "recheck_digests",
           "verify_entry_digests"]

SOURCE_NONE, SOURCE_GIVEN, SOURCE_SNIFFED, SOURCE_ENTRY = 0, 1, 2, 3
SOURCE_NAMES = {SOURCE_NONE: None, SOURCE_GIVEN: "metadata", SOURCE_SNIFFED: "sniffed", SOURCE_ENTRY: "entry"}
DIGEST_DTYPE = np.dtype([
    ("type", "u1"),          # DigestType value, 0 = unknown
    ("source", "u1"),        # SOURCE_*: where the type came from
    ("status", "u1"),        # DIGEST_UNKNOWN / DIGEST_OK / DIGEST_BAD
    ("payload_len", "<i8"),  # -1 when the digest length is unknown
])
# digest lengths a V1 entry's sizes may imply (for ledgers whose type stays unknown)
_PLAUSIBLE_DIGEST_LENGTHS = tuple(sorted(set(DIGEST_LENGTH.values())))


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
    crc_variant: int = field(default_factory=config.crc_variant)
    decided: dict[LedgerKey, tuple[int, int]] = field(default_factory=dict)   # -> (type code, source)
    tried: dict[LedgerKey, int] = field(default_factory=dict)                 # entries sniffed, none verified
    dlen_hint: dict[LedgerKey, int] = field(default_factory=dict)
    _mac_keys: dict[LedgerKey, bytes] = field(default_factory=dict, repr=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    _tables: dict = field(default_factory=dict, repr=False, compare=False)   # decided/known as arrays

    def __getstate__(self) -> dict:   # picklable (a lock is not): a copy gets a lock of its own
        state = dict(self.__dict__)
        del state["lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, lock=threading.RLock())

    def decided_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``decided`` for scope 0 (V1 ledgers) as arrays: sorted ledger ids, (type code, source) rows.

        Rebuilt only when ``decided`` grew (it only grows: a ledger is decided once)."""
        return self._table("decided", self.decided, lambda v: v)

    def known_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``known`` for scope 0 as arrays: sorted ledger ids, type codes."""
        return self._table("known", self.known, int)

    def _table(self, name: str, d: dict, value) -> tuple[np.ndarray, np.ndarray]:
        cached = self._tables.get(name)
        if cached is not None and cached[:2] == (id(d), len(d)):
            return cached[2]
        # Dicts keep insertion order and these only grow: new items are the last ones, merged in (no rebuild).
        start = cached[1] if cached is not None and cached[0] == id(d) and cached[1] < len(d) else 0
        keys = np.array(list(itertools.islice(d.keys(), start, None)), dtype=np.uint64).reshape(-1, 2)
        values = np.array([value(v) for v in itertools.islice(d.values(), start, None)], dtype=np.uint8)
        v1, order = keys[:, 0] == 0, np.argsort(keys[:, 1], kind="stable")   # scope 0 only, by ledger id
        order = order[v1[order]]
        ids, values = keys[order, 1], values.reshape((len(keys), 2) if name == "decided" else -1)[order]
        if start:
            at = np.searchsorted(cached[2][0], ids)
            ids, values = np.insert(cached[2][0], at, ids), np.insert(cached[2][1], at, values, axis=0)
        self._tables[name] = (id(d), len(d), (ids, values))
        return ids, values

    def recheck(self, scan, data=None) -> int:
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
        with self.lock:
            k = self._mac_keys.get(key)
            if k is None and key in self.passwords:
                k = self._mac_keys[key] = mac_key(self.passwords[key])
            return k


_HMAC_LENGTH = DIGEST_LENGTH[DigestType.HMAC]


def _hmac_ok(key: bytes, mv: memoryview, body: int, header: int, n: int) -> bool:
    """Whether the entry body at ``mv[body:body + n]`` (header bytes, then the digest) verifies as HMAC."""
    h = hmac.new(key, mv[body:body + header], hashlib.sha1)
    h.update(mv[body + header + _HMAC_LENGTH:body + n])
    return hmac.compare_digest(h.digest(), mv[body + header:body + header + _HMAC_LENGTH].tobytes())


def _find(table: tuple[np.ndarray, np.ndarray], ledgers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row in ``table``, found) for each ledger id, by binary search of the table's sorted ids."""
    ids = table[0]
    if len(ids) == 0:
        return np.zeros(len(ledgers), np.int64), np.zeros(len(ledgers), bool)
    at = np.minimum(np.searchsorted(ids, ledgers), len(ids) - 1)
    return at, ids[at] == ledgers


def _decide_ledger_codes(plan: DigestPlan, buf, base, off, size, ledger, entry, length, v1,
                         known_status) -> tuple[np.ndarray, np.ndarray]:
    """Per-entry (type code, source) for the V1 entries ``v1`` (indices), sniffing undecided ledgers.

    The digests of sniffed samples whose ledger turns out CRC32C or CRC32 are already checked: their
    statuses go into ``known_status`` (indexed like ``off``). Holds the plan's lock throughout.
    """
    with plan.lock:
        return _decide_locked(plan, buf, base, off, size, ledger, entry, length, v1, known_status)


def _decide_locked(plan: DigestPlan, buf, base, off, size, ledger, entry, length, v1, known_status):
    n1 = len(v1)
    code = np.zeros(n1, np.uint8)
    src = np.zeros(n1, np.uint8)
    if n1 == 0:
        return code, src
    if plan.force is not None:
        code[:] = int(plan.force)
        src[:] = SOURCE_GIVEN
        return code, src
    ledgers, inv = np.unique(ledger[v1], return_inverse=True)
    inv = inv.ravel()
    lcode = np.zeros(len(ledgers), np.uint8)
    lsrc = np.zeros(len(ledgers), np.uint8)
    need = np.zeros(len(ledgers), np.int64)
    # Ledgers decided before (the common case after the first window): one array lookup for all.
    at, hit = _find(plan.decided_table(), ledgers)
    decided_values = plan.decided_table()[1]
    lcode[hit], lsrc[hit] = decided_values[at[hit], 0], decided_values[at[hit], 1]
    rest = np.flatnonzero(~hit)
    if len(rest):   # met for the first time (once per ledger and plan): metadata, or sniff, or none
        at, given = _find(plan.known_table(), ledgers[rest])
        now_known = rest[given]
        lcode[now_known], lsrc[now_known] = plan.known_table()[1][at[given]], SOURCE_GIVEN
        unknown = rest[~given]
        if not plan.sniff:
            lcode[unknown], lsrc[unknown] = 0, SOURCE_NONE
        else:
            tried = plan.tried   # only ledgers whose samples all failed are in it: usually none
            need[unknown] = [max(1, plan.max_samples - tried.get((0, lid), 0)) for lid in ledgers[unknown].tolist()] \
                if tried else max(1, plan.max_samples)
        first = now_known if plan.sniff else rest
        plan.decided.update({(0, lid): (c, s) for lid, c, s in zip(ledgers[first].tolist(), lcode[first].tolist(),
                                                                   lsrc[first].tolist())})
    if need.any():
        order = np.argsort(inv, kind="stable")
        grp = inv[order]
        first = np.searchsorted(grp, np.arange(len(ledgers)))
        rank = np.arange(len(order)) - first[grp]
        pick = np.sort(order[rank < need[grp]])
        sample = v1[pick]
        sniffed = np.zeros(len(sample), np.uint8)
        sniff_crc(buf, base, off[sample], size[sample], plan.crc_variant, sniffed)
        ledger_sniffed = np.zeros(len(ledgers), np.uint8)
        np.bitwise_or.at(ledger_sniffed, inv[pick], sniffed)
        cnt = np.bincount(inv[pick], minlength=len(ledgers))
        by_ledger = np.argsort(inv[pick], kind="stable")            # samples grouped by ledger
        starts = np.concatenate([[0], np.cumsum(cnt)])
        sniffed_j = np.flatnonzero(need)
        crc = np.where(ledger_sniffed[sniffed_j] & SNIFF_CRC32C, int(DigestType.CRC32C),
                       np.where(ledger_sniffed[sniffed_j] & SNIFF_CRC32, int(DigestType.CRC32), 0)).astype(np.uint8)
        ok = crc != 0
        hit_j = sniffed_j[ok]   # a CRC verified (CRC32C tried first): decided as arrays; the rest one by one
        lcode[hit_j], lsrc[hit_j] = crc[ok], SOURCE_SNIFFED
        plan.decided.update(((0, l), (c, SOURCE_SNIFFED)) for l, c in zip(ledgers[hit_j].tolist(), crc[ok].tolist()))
        for j in sniffed_j[~ok].tolist():
            key = (0, int(ledgers[j]))
            d = None
            key_bytes = plan.mac_key_for(key)
            if key_bytes is not None:
                for i in sample[by_ledger[starts[j]:starts[j + 1]]].tolist():
                    body = int(off[i]) + SIZE_PREFIX_SIZE - base
                    if int(size[i]) >= ENTRY_V1_HEADER_SIZE + _HMAC_LENGTH and _hmac_ok(
                            key_bytes, memoryview(buf), body, ENTRY_V1_HEADER_SIZE, int(size[i])):
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
        # (SNIFF_CRC32 was computed exactly for the samples that failed CRC32C, i.e. all of a CRC32 ledger's)
        lc = lcode[inv[pick]]
        bit = np.where(lc == int(DigestType.CRC32C), SNIFF_CRC32C, np.where(lc == int(DigestType.CRC32), SNIFF_CRC32, 0))
        done = bit != 0
        known_status[sample[done]] = np.where(sniffed[done] & bit[done], DIGEST_OK, DIGEST_BAD)
    if plan.sniff and not lcode.all():
        _learn_dlen_hints(plan, ledgers, lcode, inv, v1, size, entry, length)
    code[:] = lcode[inv]
    src[:] = lsrc[inv]
    return code, src


def _learn_dlen_hints(plan: DigestPlan, uled, lcode, inv, v1, size, entry, length) -> None:
    """For ledgers whose type stays unknown, infer the digest length from the cumulative lengths.

    An entry's payload is ``length - previous length`` (``length`` itself for entry 0), so the digest
    takes ``size - header - payload`` bytes. Only the lengths of a digest type are accepted.
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
    d = size[idx].astype(np.int64) - ENTRY_V1_HEADER_SIZE - payload
    good = np.flatnonzero(usable & np.isin(d, _PLAUSIBLE_DIGEST_LENGTHS))
    groups, first = np.unique(g[good], return_index=True)
    for j, k in zip(groups.tolist(), good[first].tolist()):
        plan.dlen_hint.setdefault((0, int(uled[j])), int(d[k]))


def verify_entry_digests(data, entries: np.ndarray, plan: DigestPlan | None = None, *, base: int = 0,
                         payload_hash: str | None = None) -> tuple[np.ndarray, PayloadHashes | None]:
    """Digest results (DIGEST_DTYPE rows) for ``entries`` (ENTRY_DTYPE) held in ``data``.

    ``data`` holds the file bytes [base, base + len(data)) and every entry's whole record. ``plan``
    (updated in place) gives known types and passwords and collects sniffing results; without one,
    every V1 ledger is sniffed. ``payload_hash="sha256"`` also returns each payload's SHA-256
    (absent where the digest length, hence the payload, is unknown).
    """
    if payload_hash not in (None, "sha256"):
        raise ValueError(f"unsupported payload hash {payload_hash!r} (only sha256)")
    plan = DigestPlan() if plan is None else plan
    buf = as_bytes_array(data)
    n = len(entries)
    out = np.zeros(n, DIGEST_DTYPE)
    if n == 0:
        return out, (PayloadHashes.empty() if payload_hash else None)
    off = np.ascontiguousarray(entries["offset"], dtype=np.int64)
    size = np.ascontiguousarray(entries["size"], dtype=np.int64)
    fmt = np.ascontiguousarray(entries["format"], dtype=np.uint8)
    if len(off) and (off.min() + SIZE_PREFIX_SIZE < base or (off + SIZE_PREFIX_SIZE + size).max() > base + buf.size):
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
    check_digests(buf, base, off, size, fmt, code, known, plan.crc_variant, dtype, status)
    hdr = np.where(fmt == 2, ENTRY_V2_HEADER_SIZE, ENTRY_V1_HEADER_SIZE)
    pend = np.flatnonzero(status == DIGEST_PENDING_HMAC)
    if len(pend):
        mv = memoryview(buf)
        scope = entries["scope"]
        for i in pend.tolist():
            key_bytes = plan.mac_key_for((int(scope[i]), int(ledger[i])))
            if key_bytes is None:
                status[i] = DIGEST_UNKNOWN
            else:
                body = int(off[i]) + SIZE_PREFIX_SIZE - base
                status[i] = DIGEST_OK if _hmac_ok(key_bytes, mv, body, int(hdr[i]), int(size[i])) else DIGEST_BAD
    dlen = DIGEST_LENGTH_BY_CODE[dtype]
    unknown = np.flatnonzero(dlen < 0)
    if len(unknown) and plan.dlen_hint:
        with plan.lock:
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
        hashes = sha256_payloads(buf, off + SIZE_PREFIX_SIZE - base + hdr + np.maximum(dlen, 0), plen)
    return out, hashes


def _recheck_rows(scan, plan: DigestPlan, whole: Callable[[], np.ndarray]) -> int:
    """recheck_digests with ``whole()`` giving the file's bytes (called only when there is work)."""
    d = scan.digests
    if d is None or len(d) == 0 or plan.force is not None:
        return 0
    e = scan.entries
    cand = np.flatnonzero((d["type"] == 0) & (d["status"] == DIGEST_UNKNOWN) & (e["format"] == 1))
    if len(cand) == 0:
        return 0
    uled, inv = np.unique(e["ledger"][cand], return_inverse=True)
    with plan.lock:
        ids, values = plan.decided_table()
        at, hit = _find((ids, values), uled)
        now = hit & (values[at, 0] != 0) if len(ids) else hit
    idx = cand[now[inv.ravel()]]
    if len(idx) == 0:
        return 0
    hashing = scan.payload_hashes is not None
    rows, hs = verify_entry_digests(whole(), e[idx], plan, payload_hash="sha256" if hashing else None)
    d[idx] = rows
    if hashing:
        scan.payload_hashes.put(idx, hs)
    return len(idx)


def recheck_digests(scan, plan: DigestPlan, data=None) -> int:
    """Re-verify the entries of a finished scan left DIGEST_UNKNOWN while their ledger was undecided.

    Sniffing decides a ledger's type on the first of its entries that verifies; entries of it
    checked before that (in another file, or by another call) came out unknown, with type 0. For
    those whose ledger ``plan`` has decided since, this checks the digest with the decided type and
    updates ``scan.digests`` (and ``scan.payload_hashes``) in place, so a corrupt one is reported
    BAD. ``data``: the file's bytes when the scan was of in-memory bytes (or a callable giving
    them, called only when there is work); else the file is mapped (only the pages of those entries
    are read). Returns the number of rows updated.
    """
    if callable(data):
        return _recheck_rows(scan, plan, data)
    if data is not None:
        return _recheck_rows(scan, plan, lambda: as_bytes_array(data))
    with ExitStack() as stack:
        return _recheck_rows(scan, plan, lambda: readonly(stack.enter_context(map_file(scan.path))))


