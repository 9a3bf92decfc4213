"""Jitted CRC32/CRC32C digest checks and CRC sniffing over stored entries, each beside its pure-Python twin.

An entry is addressed by the offset of its size prefix and its stored size (entry-log and journal
records alike). ``check_digests`` checks each entry with the digest type its V2 flags name or the
caller gives for V1; ``sniff_crc`` says which CRC a V1 entry verifies as. Their twins
(``check_digests_reference``, ``sniff_crc_reference``) compute the same through
``formats.digests.compute_digest`` (zlib and the crc32c package); tests compare them.
``entry_facts`` takes one entry's digest facts (its V2 code, whether it verifies as CRC32C) while a walk
holds its bytes; ``digests_from_facts`` settles a part's digests from those facts alone where they
suffice (twin: ``digests_from_facts_reference``).
"""
from __future__ import annotations

import numpy as np

from bkdisk.digests.crc_kernels import POLY_CRC32, POLY_CRC32C, crc_update
from bkdisk.digests.id_slots import fill_id_slots, find_slotted, remembered_row, slot_bits
from bkdisk.digests.plan import SOURCE_ENTRY, SOURCE_SNIFFED
from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.kernels import be_u32, be_u64, first_at_least, unowned
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType, compute_digest
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE, V2_DIGEST_MASK, V2_FLAGS_AT, V2_MARKER
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

# Per-entry digest results.
DIGEST_UNKNOWN, DIGEST_OK, DIGEST_BAD = 0, 1, 2
DIGEST_PENDING_HMAC = 3     # left for the caller, who holds the keys
DIGEST_NEEDS_BYTES = 4      # check_digests_by_facts: the facts do not settle it, the bytes do
# sniff_crc's result bits
SNIFF_CRC32C, SNIFF_CRC32 = 1, 2
# An entry's digest facts (entry_facts), one byte: whether its digest verifies as CRC32C (0: not
# computed, the entry being too short), its format, a V2 entry's digest code, and, for an entry that
# does not verify as CRC32C and is long enough for a CRC32 digest, whether it verifies as CRC32 (the
# digest of about one ledger in ten: its entries then need no second read of their bytes).
FACT_CRC32C_OK, FACT_CRC32C_BAD, FACT_CRC32C = 1, 2, 3
FACT_V2 = 4
FACT_CODE_SHIFT = 3
FACT_CRC32_OK = 128

_CRC32, _HMAC, _CRC32C, _DUMMY = (int(t) for t in (DigestType.CRC32, DigestType.HMAC, DigestType.CRC32C,
                                                   DigestType.DUMMY))
# digest length by DigestType code; -1 for code 0 (unknown)
DIGEST_LENGTH_BY_CODE = np.array([-1] + [DIGEST_LENGTH[DigestType(c)] for c in range(1, 5)], dtype=np.int64)
_LEN_CRC32, _LEN_HMAC, _LEN_CRC32C = DIGEST_LENGTH[DigestType.CRC32], DIGEST_LENGTH[DigestType.HMAC], \
    DIGEST_LENGTH[DigestType.CRC32C]
_V1, _V2 = ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE
KNOWN_DIGEST_CODES = frozenset(int(t) for t in DigestType)   # a V2 entry's flags may name another


@inline_kernel
def _settled(n, header, digest_type, known):
    """An entry's status settled before any CRC (one already known, no type, too short for its digest,
    DUMMY, HMAC left to the caller), or -1 when its CRC decides."""
    if known != 0:
        return known
    if digest_type == 0:
        return DIGEST_UNKNOWN
    if n < header + DIGEST_LENGTH_BY_CODE[digest_type]:
        return DIGEST_BAD
    if digest_type == _DUMMY:
        return DIGEST_OK
    if digest_type == _HMAC:
        return DIGEST_PENDING_HMAC
    return -1


@kernel
def check_digests(buf, base, off, size, fmt, code, known, variant, out_type, out_status):
    """Check CRC32/CRC32C digests of entries held in ``buf`` (file bytes [base, ...)); DUMMY passes;
    HMAC is left DIGEST_PENDING_HMAC.

    ``code``: the DigestType of each V1 entry (0 = unknown); V2 entries name theirs in the flags.
    ``known``: a status already established while sniffing (0 = check here).
    """
    buf = unowned(buf)
    mask32 = np.uint64(0xFFFFFFFF)
    for i in range(off.size):
        body = off[i] + SIZE_PREFIX_SIZE - base
        n = size[i]
        if fmt[i] == 2:
            header = _V2
            digest_type = buf[body + V2_FLAGS_AT] & V2_DIGEST_MASK
        else:
            header = _V1
            digest_type = code[i]
        out_type[i] = digest_type
        settled = _settled(n, header, digest_type, known[i])
        if settled >= 0:
            out_status[i] = settled
            continue
        digest_len = DIGEST_LENGTH_BY_CODE[digest_type]
        poly = POLY_CRC32 if digest_type == _CRC32 else POLY_CRC32C
        crc = crc_update(mask32, buf, body, header, poly, variant)
        crc = crc_update(crc, buf, body + header + digest_len, n - header - digest_len, poly, variant) ^ mask32
        if digest_type == _CRC32C:
            stored = np.uint64(be_u32(buf, body + header))
        else:
            stored = be_u64(buf, body + header)
        out_status[i] = DIGEST_OK if stored == crc else DIGEST_BAD


@inline_kernel
def entry_facts(buf, body, n, variant, max_crc):
    """The digest facts (FACT_* bits) of the entry of ``n`` stored bytes at ``buf[body]``: what a digest
    check reads of its bytes when its type is CRC32C (most ledgers'), taken while the bytes are at hand
    so that the check may come later without them. The CRC of an entry of more than ``max_crc`` bytes
    is left to the check (not computed)."""
    mask32 = np.uint64(0xFFFFFFFF)
    f = 0
    header = _V1
    if buf[body] >= V2_MARKER:
        f = FACT_V2 | ((buf[body + V2_FLAGS_AT] & V2_DIGEST_MASK) << FACT_CODE_SHIFT)
        header = _V2
    if header + _LEN_CRC32C <= n <= max_crc:
        crc = crc_update(mask32, buf, body, header, POLY_CRC32C, variant)
        crc = crc_update(crc, buf, body + header + _LEN_CRC32C, n - header - _LEN_CRC32C, POLY_CRC32C,
                         variant) ^ mask32
        if np.uint64(be_u32(buf, body + header)) == crc:
            f |= FACT_CRC32C_OK
        else:
            f |= FACT_CRC32C_BAD
            if n >= header + _LEN_CRC32:
                crc = crc_update(mask32, buf, body, header, POLY_CRC32, variant)
                crc = crc_update(crc, buf, body + header + _LEN_CRC32, n - header - _LEN_CRC32, POLY_CRC32,
                                 variant) ^ mask32
                if be_u64(buf, body + header) == crc:
                    f |= FACT_CRC32_OK
    return f


@inline_kernel
def _status_of_facts(digest_type, f):
    """A CRC digest's status from an entry's facts (its length past its header and digest checked
    already), or DIGEST_NEEDS_BYTES where they do not tell: a CRC32C not computed, a CRC32 not
    computed (the entry verified as CRC32C, or was not checked at all)."""
    crc32c = f & FACT_CRC32C
    if digest_type == _CRC32C and crc32c != 0:
        return DIGEST_OK if crc32c == FACT_CRC32C_OK else DIGEST_BAD
    if digest_type == _CRC32 and crc32c == FACT_CRC32C_BAD:
        return DIGEST_OK if f & FACT_CRC32_OK else DIGEST_BAD
    return DIGEST_NEEDS_BYTES


@kernel
def check_digests_by_facts(size, fmt, facts, code, known, out_type, out_status):
    """check_digests from the entries' digest facts instead of their bytes: the same type and status,
    or DIGEST_NEEDS_BYTES where the facts do not tell (a CRC not computed)."""
    for i in range(size.size):
        n = size[i]
        if fmt[i] == 2:
            header = _V2
            digest_type = (facts[i] >> FACT_CODE_SHIFT) & V2_DIGEST_MASK
        else:
            header = _V1
            digest_type = code[i]
        out_type[i] = digest_type
        settled = _settled(n, header, digest_type, known[i])
        if settled >= 0:
            out_status[i] = settled
            continue
        out_status[i] = _status_of_facts(digest_type, facts[i])


@inline_kernel
def _find_sorted(ids, key):
    """The index of ``key`` in the sorted ``ids``, or -1."""
    lo = first_at_least(ids, key, 0, ids.size)
    return lo if lo < ids.size and ids[lo] == key else -1


@kernel(any_layout=("size", "v2", "ledger"))
def digests_from_facts(size, v2, ledger, facts, decided_ids, decided_rows, slots, met, met_row, known_ids, samples,
                       out_type, out_source, out_status, out_payload_len, out_sniffed):
    """What verify_entry_digests gives entries from their digest facts (``v2``: nonzero for an entry
    of format V2) when the facts settle every one: a V2 entry's type is its flags' code (source
    SOURCE_ENTRY); a V1 entry's its ledger's row (code, source) in ``decided_ids`` (sorted) /
    ``decided_rows`` (found through ``slots``, ``met``, ``met_row``: id_slots_room(min(len(decided_ids),
    len(size))), a table of every decided ledger or of each ledger met, searched once), or, for
    a ledger not decided and not in ``known_ids`` (sorted), CRC32C as sniffed, when ``samples`` > 0
    and one of the ledger's first ``samples`` entries verifies as CRC32C (those samples' statuses are
    their sniff results). Such a ledger's V1 entries must be one run: one met again after its run is
    listed twice in ``out_sniffed``, and the caller refuses the result
    (a sort here would make the kernel slow to load from the cache).

    Returns the number k of ledgers sniffed (their ids in ``out_sniffed[:k]``, for the plan), or -1
    (the outputs then partly written) as soon as an entry is not settled so: a ledger decided as no
    type, known, or not sniffed as CRC32C; a V2 code that is none or no
    DigestType; an entry that needs its bytes or a password (HMAC, a CRC not computed). The
    caller then checks the entries the general way."""
    decided_ids = unowned(decided_ids)
    known_ids = unowned(known_ids)
    # Where logs interleave ledgers each entry's ledger differs from the last: a table, not a search of
    # the sorted ids for every entry, finds its row; of every decided ledger when they are no more than
    # the entries, else of the ledgers met (each searched once).
    every = decided_ids.size <= size.size
    bits = fill_id_slots(decided_ids, slots) if every else slot_bits(slots)
    m = 0
    k = 0
    last_ledger = np.uint64(0)
    at = -2           # the last V1 ledger's row in the decided table; -1: it is being sniffed
    pos = 0           # the entry's place in its sniffed ledger's run
    run_ok = True     # a sample of the ledger being sniffed verified as CRC32C
    for i in range(size.size):
        n = size[i]
        f = facts[i]
        crc32c = f & FACT_CRC32C
        if v2[i]:
            header = _V2
            digest_type = (f >> FACT_CODE_SHIFT) & V2_DIGEST_MASK
            if digest_type == 0 or digest_type >= DIGEST_LENGTH_BY_CODE.size:   # left to the general check
                return -1
            out_source[i] = SOURCE_ENTRY
        else:
            header = _V1
            lid = ledger[i]
            if at == -2 or lid != last_ledger:   # entries of a ledger often come in runs
                if at == -1 and not run_ok:
                    return -1
                if every:
                    at = find_slotted(decided_ids, slots, bits, lid)
                else:
                    at, m = remembered_row(decided_ids, lid, slots, bits, met, met_row, m)
                last_ledger = lid
                if at == -1:   # met first here: sniffed
                    if samples == 0 or _find_sorted(known_ids, lid) >= 0:
                        return -1
                    out_sniffed[k] = lid
                    k += 1
                    pos, run_ok = 0, False
            elif at == -1:
                pos += 1
            if at == -1:
                digest_type = _CRC32C
                out_source[i] = SOURCE_SNIFFED
            else:
                digest_type = decided_rows[at, 0]
                if digest_type == 0:
                    return -1
                out_source[i] = decided_rows[at, 1]
        out_type[i] = digest_type
        plen = n - header - DIGEST_LENGTH_BY_CODE[digest_type]
        out_payload_len[i] = plen if plen >= 0 else -1
        if not v2[i] and at == -1 and pos < samples:   # a sample: its status is its sniff's
            if crc32c == 0:
                return -1
            run_ok = run_ok or crc32c == FACT_CRC32C_OK
            out_status[i] = DIGEST_OK if crc32c == FACT_CRC32C_OK else DIGEST_BAD
            continue
        settled = _settled(n, header, digest_type, 0)
        if settled >= 0:
            if settled == DIGEST_PENDING_HMAC:
                return -1
            out_status[i] = settled
            continue
        status = _status_of_facts(digest_type, f)
        if status == DIGEST_NEEDS_BYTES:
            return -1
        out_status[i] = status
    if at == -1 and not run_ok:
        return -1
    return k


def digests_from_facts_reference(size, v2, ledger, facts, decided: dict[int, tuple[int, int]], known: set[int],
                                 samples: int):
    """digests_from_facts one entry at a time, the decided (code, source) by ledger in a dict, the
    sniffed ledgers found by grouping: the (types, sources, statuses, payload lengths) and the ledgers
    sniffed, or None where the kernel returns -1."""
    n_all = len(size)
    out: list[np.ndarray] = [np.zeros(n_all, np.uint8), np.zeros(n_all, np.uint8), np.zeros(n_all, np.uint8),
                             np.zeros(n_all, np.int64)]
    runs: dict[int, list[int]] = {}   # ledger not decided -> its V1 entries, in order
    for i in range(n_all):
        if not v2[i] and int(ledger[i]) not in decided:
            runs.setdefault(int(ledger[i]), []).append(i)
    sample_of: dict[int, bool] = {}
    for lid, members in runs.items():
        between = range(members[0], members[-1] + 1)
        if not samples or lid in known or any(not v2[j] and int(ledger[j]) != lid for j in between):
            return None
        firsts = members[:samples]
        if not any(int(facts[j]) & FACT_CRC32C == FACT_CRC32C_OK for j in firsts):
            return None
        sample_of.update({j: True for j in firsts})
    for i in range(n_all):
        n, f, is_v2 = int(size[i]), int(facts[i]), bool(v2[i])
        if is_v2:
            t, source = (f >> FACT_CODE_SHIFT) & V2_DIGEST_MASK, SOURCE_ENTRY
        else:
            t, source = decided.get(int(ledger[i]), (_CRC32C, SOURCE_SNIFFED))
        if t == 0 or t not in KNOWN_DIGEST_CODES:
            return None
        d = DIGEST_LENGTH[DigestType(t)]
        header = _V2 if is_v2 else _V1
        if i in sample_of:
            if f & FACT_CRC32C == 0:
                return None
            status = DIGEST_OK if f & FACT_CRC32C == FACT_CRC32C_OK else DIGEST_BAD
        elif n < header + d:
            status = DIGEST_BAD
        elif t == _DUMMY:
            status = DIGEST_OK
        elif t == _CRC32C and f & FACT_CRC32C != 0:
            status = DIGEST_OK if f & FACT_CRC32C == FACT_CRC32C_OK else DIGEST_BAD
        elif t == _CRC32 and f & FACT_CRC32C == FACT_CRC32C_BAD:
            status = DIGEST_OK if f & FACT_CRC32_OK else DIGEST_BAD
        else:   # HMAC, or a CRC not computed
            return None
        for column, value in zip(out, (t, source, status, max(n - header - d, -1))):
            column[i] = value
    return tuple(out), list(runs)


def check_digests_reference(data, base: int, off, size, fmt, code, known) -> tuple[np.ndarray, np.ndarray]:
    """check_digests one entry at a time through formats.digests: (types, statuses)."""
    b = bytes(data)
    out_type = np.zeros(len(off), np.uint8)
    out_status = np.zeros(len(off), np.uint8)
    for i in range(len(off)):
        body, n = int(off[i]) + SIZE_PREFIX_SIZE - base, int(size[i])
        header = _V2 if fmt[i] == 2 else _V1
        t = b[body + V2_FLAGS_AT] & V2_DIGEST_MASK if fmt[i] == 2 else int(code[i])
        out_type[i] = t
        if known[i]:
            out_status[i] = known[i]
        elif t == 0:
            out_status[i] = DIGEST_UNKNOWN
        elif n < header + DIGEST_LENGTH[DigestType(t)]:
            out_status[i] = DIGEST_BAD
        elif t == _HMAC:
            out_status[i] = DIGEST_PENDING_HMAC
        else:
            d = DIGEST_LENGTH[DigestType(t)]
            want = compute_digest(DigestType(t), b[body:body + header], b[body + header + d:body + n])
            out_status[i] = DIGEST_OK if want == b[body + header:body + header + d] else DIGEST_BAD
    return out_type, out_status


@kernel
def sniff_crc(buf, base, off, size, variant, result):
    """For V1 entries: SNIFF_CRC32C when the entry verifies as CRC32C, else SNIFF_CRC32 when it
    verifies as CRC32, else 0. CRC32 is not tried once CRC32C matched (CRC32C wins the ledger anyway)."""
    buf = unowned(buf)
    mask32 = np.uint64(0xFFFFFFFF)
    for i in range(off.size):
        body = off[i] + SIZE_PREFIX_SIZE - base
        n = size[i]
        found = 0
        if n >= _V1 + _LEN_CRC32C:
            crc = crc_update(mask32, buf, body, _V1, POLY_CRC32C, variant)
            crc = crc_update(crc, buf, body + _V1 + _LEN_CRC32C, n - _V1 - _LEN_CRC32C, POLY_CRC32C, variant) ^ mask32
            if np.uint64(be_u32(buf, body + _V1)) == crc:
                found = SNIFF_CRC32C
        if found == 0 and n >= _V1 + _LEN_CRC32:
            crc = crc_update(mask32, buf, body, _V1, POLY_CRC32, variant)
            crc = crc_update(crc, buf, body + _V1 + _LEN_CRC32, n - _V1 - _LEN_CRC32, POLY_CRC32, variant) ^ mask32
            if be_u64(buf, body + _V1) == crc:
                found = SNIFF_CRC32
        result[i] = found


def sniff_crc_reference(data, base: int, off, size) -> np.ndarray:
    """sniff_crc one entry at a time through formats.digests."""
    b = bytes(data)
    out = np.zeros(len(off), np.uint8)
    for i in range(len(off)):
        body, n = int(off[i]) + SIZE_PREFIX_SIZE - base, int(size[i])
        head = b[body:body + _V1]
        for t, bit in ((DigestType.CRC32C, SNIFF_CRC32C), (DigestType.CRC32, SNIFF_CRC32)):
            d = DIGEST_LENGTH[t]
            if n >= _V1 + d and compute_digest(t, head, b[body + _V1 + d:body + n]) == b[body + _V1:body + _V1 + d]:
                out[i] = bit
                break
    return out
