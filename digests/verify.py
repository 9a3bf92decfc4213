"""Digest verification of stored entries, entry-log and journal records alike: the one place digests
are checked.

A record is a 4-byte size prefix, then the entry (header, digest, payload); an array of records names
each by the offset of its prefix and its stored size. ``verify_entry_digests`` checks the records held
in a buffer (a whole file, or a window of whole records), ``verify_streamed`` one record too large for
a window, its covered bytes read a chunk at a time; ``recheck_digests`` re-verifies a finished scan's
entries once their ledger's type is decided. Which digest each entry is checked with comes from the
``DigestPlan`` (digests/plan.py: ledger metadata, V2 flags, or sniffing per ledger): a ledger's
entries are tried (CRC32C, then CRC32; HMAC only when the ledger's password is known) until one
verifies, which decides the type, up to ``max_samples`` of them, after which it is unknown and the
result says so. Entries tried before the decision are re-verified with the decided type, so a corrupt
one is BAD, not unknown (within a call here; across files by ``DigestPlan.recheck``). CRC32/CRC32C
are checked by the jitted kernels of digests/kernels.py; HMAC-SHA1 by ``hmac`` (one call per
HMAC entry). The plan's lock is held while its tables are read and changed: the general check's CRC
kernels run outside it; the facts' kernel (``digests_by_facts``) runs inside it, as it reads a part's
decisions and records what it sniffs in one step.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from contextlib import ExitStack

import numpy as np

from bkdisk.digests.crc_kernels import POLY_CRC32, POLY_CRC32C, crc_update
from bkdisk.digests.decision_table import LedgerKey, find_ledgers
from bkdisk.digests.entry_bytes import EntryBytes
from bkdisk.digests.id_slots import id_slots_room
from bkdisk.digests.kernels import (
    DIGEST_BAD,
    DIGEST_LENGTH_BY_CODE,
    DIGEST_OK,
    DIGEST_PENDING_HMAC,
    DIGEST_UNKNOWN,
    KNOWN_DIGEST_CODES,
    SNIFF_CRC32,
    SNIFF_CRC32C,
    digests_from_facts,
)
from bkdisk.digests.payload_hashes import PayloadHashes, sha256_payloads
from bkdisk.digests.plan import (
    SOURCE_ENTRY,
    SOURCE_GIVEN,
    SOURCE_NONE,
    SOURCE_SNIFFED,
    DigestPlan,
    learn_digest_length_hints,
)
from bkdisk.diskio.distinct import distinct
from bkdisk.diskio.kernels import as_bytes_array, be_i64_at, readonly
from bkdisk.diskio.mapped import map_file
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE, V2_DIGEST_MASK, V2_FLAGS_AT, V2_MARKER
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

__all__ = ["DIGEST_DTYPE", "digests_by_facts", "recheck_digests", "verify_entry_digests", "verify_streamed"]

DIGEST_DTYPE = np.dtype([
    ("type", "u1"),          # DigestType value, 0 = unknown
    ("source", "u1"),        # SOURCE_*: where the type came from
    ("status", "u1"),        # DIGEST_UNKNOWN / DIGEST_OK / DIGEST_BAD
    ("payload_len", "<i8"),  # -1 when the digest length is unknown
])

_HMAC_LENGTH = DIGEST_LENGTH[DigestType.HMAC]


def _hmac_ok(key: bytes, mv: memoryview, body: int, header: int, n: int) -> bool:
    """Whether the entry body at ``mv[body:body + n]`` (header bytes, then the digest) verifies as HMAC."""
    h = hmac.new(key, mv[body:body + header], hashlib.sha1)
    h.update(mv[body + header + _HMAC_LENGTH:body + n])
    return hmac.compare_digest(h.digest(), mv[body + header:body + header + _HMAC_LENGTH].tobytes())


def _decide_ledger_codes(plan: DigestPlan, entry_bytes: EntryBytes, ledger, entry, length, v1,
                         known_status) -> tuple[np.ndarray, np.ndarray]:
    """Per-entry (type code, source) for the V1 entries ``v1`` (indices), sniffing undecided ledgers.

    The digests of sniffed samples whose ledger turns out CRC32C or CRC32 are already checked: their
    statuses go into ``known_status`` (indexed like the entries). ``length``: the entries' cumulative
    lengths, or a callable giving them (asked only to infer digest lengths). Holds the plan's lock
    throughout.
    """
    with plan.lock:
        return _decide_locked(plan, entry_bytes, ledger, entry, length, v1, known_status)


def _decide_locked(plan: DigestPlan, entry_bytes: EntryBytes, ledger, entry, length, v1, known_status):
    off, size, base = entry_bytes.off, entry_bytes.size, entry_bytes.base
    n1 = len(v1)
    code = np.zeros(n1, np.uint8)
    src = np.zeros(n1, np.uint8)
    if n1 == 0:
        return code, src
    if plan.force is not None:
        code[:] = int(plan.force)
        src[:] = SOURCE_GIVEN
        return code, src
    # The ledgers met, and each entry's: one stable sort, which also groups the entries by ledger in
    # their order (the samples below are the first of each group).
    keys = ledger[v1]
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    begins = np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1]))
    starts_sorted = np.flatnonzero(begins)
    ledgers = sorted_keys[starts_sorted]
    grp = np.cumsum(begins) - 1   # each sorted entry's ledger
    inv = np.empty(n1, np.intp)
    inv[order] = grp
    lcode = np.zeros(len(ledgers), np.uint8)
    lsrc = np.zeros(len(ledgers), np.uint8)
    need = np.zeros(len(ledgers), np.int64)
    # Ledgers decided before (the common case after the first window): one array lookup for all.
    at, hit = find_ledgers(plan.decided_table(), ledgers)
    decided_values = plan.decided_table()[1]
    lcode[hit], lsrc[hit] = decided_values[at[hit], 0], decided_values[at[hit], 1]
    rest = np.flatnonzero(~hit)
    if len(rest):   # met for the first time (once per ledger and plan): metadata, or sniff, or none
        at, given = find_ledgers(plan.known_table(), ledgers[rest])
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
        plan.decided.put_ledgers(ledgers[first], lcode[first], lsrc[first])
    if need.any():
        rank = np.arange(n1) - starts_sorted[grp]
        grouped = order[rank < need[grp]]   # each ledger's samples, in entry order, ledger by ledger
        pick = np.sort(grouped)
        sample = v1[pick]
        sniffed = entry_bytes.sniff(sample)
        ledger_sniffed = np.zeros(len(ledgers), np.uint8)
        np.bitwise_or.at(ledger_sniffed, inv[pick], sniffed)
        cnt = np.bincount(inv[pick], minlength=len(ledgers))
        starts = np.concatenate([[0], np.cumsum(cnt)])   # ledger j's samples: grouped[starts[j]:starts[j + 1]]
        sniffed_j = np.flatnonzero(need)
        crc = np.where(ledger_sniffed[sniffed_j] & SNIFF_CRC32C, int(DigestType.CRC32C),
                       np.where(ledger_sniffed[sniffed_j] & SNIFF_CRC32, int(DigestType.CRC32), 0)).astype(np.uint8)
        ok = crc != 0
        hit_j = sniffed_j[ok]   # a CRC verified (CRC32C tried first): decided as arrays; the rest one by one
        lcode[hit_j], lsrc[hit_j] = crc[ok], SOURCE_SNIFFED
        plan.decided.put_ledgers(ledgers[hit_j], crc[ok], SOURCE_SNIFFED)
        for j in sniffed_j[~ok].tolist():
            key = (0, int(ledgers[j]))
            d = None
            key_bytes = plan.mac_key_for(key)
            if key_bytes is not None:
                for i in v1[grouped[starts[j]:starts[j + 1]]].tolist():
                    body = int(off[i]) + SIZE_PREFIX_SIZE - base
                    if int(size[i]) >= ENTRY_V1_HEADER_SIZE + _HMAC_LENGTH and _hmac_ok(
                            key_bytes, entry_bytes.buf().data, body, ENTRY_V1_HEADER_SIZE, int(size[i])):
                        d = (int(DigestType.HMAC), SOURCE_SNIFFED)
                        break
            if d is None:
                samples = plan.tried[key] = plan.tried.get(key, 0) + int(cnt[j])
                if samples >= plan.max_samples:
                    plan.decided[key] = (0, SOURCE_SNIFFED)   # sniffed, and nothing verifies
                lsrc[j] = SOURCE_SNIFFED
                continue
            plan.decided[key] = d
            lcode[j], lsrc[j] = d
        # samples of ledgers decided CRC32C/CRC32 here: their sniff result is their digest check
        # (SNIFF_CRC32 was computed exactly for the samples that failed CRC32C, i.e. all of a CRC32 ledger's)
        lc = lcode[inv[pick]]
        bit = np.where(lc == int(DigestType.CRC32C), SNIFF_CRC32C,
                       np.where(lc == int(DigestType.CRC32), SNIFF_CRC32, 0))
        done = bit != 0
        known_status[sample[done]] = np.where(sniffed[done] & bit[done], DIGEST_OK, DIGEST_BAD)
    if plan.sniff and not lcode.all():
        learn_digest_length_hints(plan, ledgers, lcode, inv, v1, size, entry, length() if callable(length) else length)
    code[:] = lcode[inv]
    src[:] = lsrc[inv]
    return code, src


def verify_entry_digests(data, entries: np.ndarray, plan: DigestPlan | None = None, *, base: int = 0,
                         payload_hash: str | None = None, facts: np.ndarray | None = None
                         ) -> tuple[np.ndarray, PayloadHashes | None]:
    """Digest results (DIGEST_DTYPE rows) for ``entries`` (ENTRY_DTYPE, or its fields but the LAC and
    length) held in ``data``.

    ``data`` holds the file bytes [base, base + len(data)) and every entry's whole record. ``plan``
    (updated in place) gives known types and passwords and collects sniffing results; without one,
    every V1 ledger is sniffed. ``payload_hash="sha256"`` also returns each payload's SHA-256
    (absent where the digest length, hence the payload, is unknown).

    ``facts``: each entry's digest facts (digests.kernels.entry_facts), taken earlier from the
    same bytes; then ``data`` may be a callable giving the bytes, called only for what the facts do
    not settle (CRC32, HMAC). Entries without a length field have their cumulative lengths read from
    their headers in ``data``, and only where a digest length must be inferred from them.
    """
    if payload_hash not in (None, "sha256"):
        raise ValueError(f"unsupported payload hash {payload_hash!r} (only sha256)")
    plan = DigestPlan() if plan is None else plan
    n = len(entries)
    out = np.zeros(n, DIGEST_DTYPE)
    if n == 0:
        return out, (PayloadHashes.empty() if payload_hash else None)
    off = np.ascontiguousarray(entries["offset"], dtype=np.int64)
    size = np.ascontiguousarray(entries["size"], dtype=np.int64)
    fmt = np.ascontiguousarray(entries["format"], dtype=np.uint8)
    bytes_of = EntryBytes(data, base, off, size, plan.crc_variant, facts)
    if not callable(data):
        buf = bytes_of.buf()
        if off.min() + SIZE_PREFIX_SIZE < base or (off + SIZE_PREFIX_SIZE + size).max() > base + buf.size:
            raise ValueError("entries outside the bytes given")
    ledger = np.ascontiguousarray(entries["ledger"])
    settled = digests_by_facts(plan, size, fmt == 2, ledger, facts) if facts is not None and not payload_hash \
        else None
    if settled is not None:
        out["type"], out["source"], out["status"], out["payload_len"] = settled
        return out, None
    v1 = np.flatnonzero(fmt == 1)
    code = np.zeros(n, np.uint8)
    src = np.full(n, SOURCE_ENTRY, np.uint8)
    known = np.zeros(n, np.uint8)
    # (rows without a length field, as a check keeps them: read from the headers only if asked)
    length = entries["length"] if "length" in (entries.dtype.names or ()) else bytes_of.lengths
    c1, s1 = _decide_ledger_codes(plan, bytes_of, ledger, entries["entry"], length, v1, known)
    code[v1] = c1
    src[v1] = s1
    dtype = np.zeros(n, np.uint8)
    status = np.zeros(n, np.uint8)
    bytes_of.check(fmt, code, known, dtype, status)
    hdr = np.where(fmt == 2, ENTRY_V2_HEADER_SIZE, ENTRY_V1_HEADER_SIZE)
    pend = np.flatnonzero(status == DIGEST_PENDING_HMAC)
    if len(pend):
        scope = entries["scope"]
        for i in pend.tolist():
            key_bytes = plan.mac_key_for((int(scope[i]), int(ledger[i])))
            if key_bytes is None:
                status[i] = DIGEST_UNKNOWN
            else:
                body = int(off[i]) + SIZE_PREFIX_SIZE - base
                status[i] = DIGEST_OK if _hmac_ok(key_bytes, bytes_of.buf().data, body, int(hdr[i]),
                                                  int(size[i])) else DIGEST_BAD
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
        hashes = sha256_payloads(bytes_of.buf(), off + SIZE_PREFIX_SIZE - base + hdr + np.maximum(dlen, 0), plen)
    return out, hashes


def digests_by_facts(plan: DigestPlan, size: np.ndarray, v2: np.ndarray, ledger: np.ndarray,
                     facts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The entries' digest (types, sources, statuses, payload lengths) from their facts alone, the
    ledgers they show to be CRC32C recorded in the plan as sniffed; or None when the facts do not
    settle every entry (digests.kernels.digests_from_facts; ``v2``: nonzero for a V2 entry).
    What the plan learns and the rows are what verify_entry_digests' general check gives such
    entries; ``plan.force`` is left to it."""
    if plan.force is not None:
        return None
    n = len(size)
    got = np.empty(n, np.uint8), np.empty(n, np.uint8), np.empty(n, np.uint8), np.empty(n, np.int64)
    sniffed = np.empty(n, np.uint64)
    with plan.lock:
        ids, rows = plan.decided_table()
        samples = max(1, plan.max_samples) if plan.sniff and not plan.tried else 0
        k = digests_from_facts(size, v2, ledger, facts, ids, rows, *id_slots_room(min(len(ids), n)),
                               plan.known_table()[0], samples, *got, sniffed)
        if k < 0 or len(distinct(sniffed[:k])) < k:   # (a ledger sniffed in two runs: left to the general check)
            return None
        plan.decided.put_ledgers(sniffed[:k], int(DigestType.CRC32C), SOURCE_SNIFFED)
    return got


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
        at, hit = find_ledgers((ids, values), uled)
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




# A record larger than a window is verified on its own, read in chunks of this size: BookKeeper sets
# no bound on a journal record's length (nettyMaxFrameSizeBytes is a setting, and readers only warn
# above it), so a length of up to 2 GiB within the file is a record to verify, not an error.
STREAM_CHUNK = 8 << 20
_MAX_DIGEST = max(DIGEST_LENGTH.values())
_POLY = {DigestType.CRC32: POLY_CRC32, DigestType.CRC32C: POLY_CRC32C}


def verify_streamed(path: str, offset: int, size: int, key: LedgerKey, plan: DigestPlan) -> int:
    """DIGEST_OK / BAD / UNKNOWN of one record (size prefix at ``offset``, ``size`` stored bytes) too
    large for a window: its header read once, the covered bytes in STREAM_CHUNK reads, so memory is one
    chunk whatever length the record claims. A V1 record of a ledger whose type is not known yet is
    tried as CRC32C, CRC32 (and HMAC with a password); none verifying leaves it unknown, as one sample
    does not decide a ledger."""
    body, n = offset + SIZE_PREFIX_SIZE, size
    with open(path, "rb", buffering=0) as fh:
        head = np.frombuffer(os.pread(fh.fileno(), ENTRY_V2_HEADER_SIZE + _MAX_DIGEST, body), np.uint8)
        if head[0] >= V2_MARKER:
            header, code = ENTRY_V2_HEADER_SIZE, int(head[V2_FLAGS_AT]) & V2_DIGEST_MASK
            if code not in KNOWN_DIGEST_CODES:
                return DIGEST_UNKNOWN
        else:
            header = ENTRY_V1_HEADER_SIZE
            code = int(plan.known[key]) if key in plan.known else plan.decided.get(key, (0, 0))[0]
        key_bytes = plan.mac_key_for(key)
        if code == DigestType.DUMMY:
            return DIGEST_OK
        if code == DigestType.HMAC and key_bytes is None:
            return DIGEST_UNKNOWN
        tries = [DigestType(code)] if code else \
            [DigestType.CRC32C, DigestType.CRC32] + ([DigestType.HMAC] if key_bytes is not None else [])
        tries = [t for t in tries if n >= header + t.length]
        if not tries:
            return DIGEST_BAD if code else DIGEST_UNKNOWN
        mask = np.uint64(0xFFFFFFFF)
        regs = {t: mask for t in tries if t in _POLY}   # (a uint64 always: the kernel's one variant)
        mac = hmac.new(key_bytes, head[:header].tobytes(), hashlib.sha1) \
            if key_bytes is not None and DigestType.HMAC in tries else None
        for t in regs:
            regs[t] = np.uint64(crc_update(regs[t], head, 0, header, _POLY[t], plan.crc_variant))
        # The covered bytes after the digest differ by type only in where they start.
        start = header + min(t.length for t in tries)
        at = start
        skip = {t: header + t.length - start for t in tries}
        while at < n:
            chunk = np.frombuffer(os.pread(fh.fileno(), min(STREAM_CHUNK, n - at), body + at), np.uint8)
            if len(chunk) == 0:
                return DIGEST_BAD   # shorter than the scan saw: changed under us
            for t in tries:
                lo = min(skip[t], len(chunk))
                skip[t] -= lo
                if t in regs:
                    regs[t] = np.uint64(crc_update(regs[t], chunk, lo, len(chunk) - lo, _POLY[t], plan.crc_variant))
                elif mac is not None:
                    mac.update(chunk[lo:].tobytes())
            at += len(chunk)
    for t in tries:
        if t == DigestType.HMAC:
            ok = mac is not None and hmac.compare_digest(mac.digest(), head[header:header + t.length].tobytes())
        elif t == DigestType.CRC32:
            ok = int(be_i64_at(head, np.array([header]))[0]) == int(regs[t] ^ mask)
        else:
            ok = int(be_i64_at(head, np.array([header - 4]))[0]) & 0xFFFFFFFF == int(regs[t] ^ mask)
        if ok:
            return DIGEST_OK
    return DIGEST_BAD if code else DIGEST_UNKNOWN
