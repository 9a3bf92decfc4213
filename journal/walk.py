"""Jitted journal walk over one window: every record (data, ledger key, fence, force, explicit LAC,
padding) and how the journal ends.

Its pure-Python twin is the reference reader, journal/reader.py: ``classify_record`` is
``formats.journal.classify_body`` plus the version rule of ``read_journal``, and
``walk_journal_records`` the loop of ``read_journal`` (tests compare them record for record). The
walk runs under diskio/windowed.py's driver.
"""
from __future__ import annotations

import numpy as np

from bkdisk.digests.kernels import entry_facts
from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.kernels import be_i32, be_i64, be_u64, first_nonzero, ld_u64le, read_ahead, small_run, unowned
from bkdisk.diskio.windowed import DONE, FIRST_OWN_SLOT, FULL, MODE, MODE_DONE, NEED, NEXT_WINDOW, RESUME
from bkdisk.formats import journal as fj
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, V2_FLAGS_BASE, V2_MARKER
from bkdisk.formats.journal import RecordKind
from bkdisk.journal.reader import EndKind

# The walk's own state slots (after diskio.windowed's MODE, RESUME, NEED).
POSITION = FIRST_OWN_SLOT
ZERO_AT = FIRST_OWN_SLOT + 1       # where a zero length was met (the end, if only zeros follow)
RECORDS = FIRST_OWN_SLOT + 2
END_KIND = FIRST_OWN_SLOT + 3
END_AT = FIRST_OWN_SLOT + 4
END_VALUE = FIRST_OWN_SLOT + 5     # the number the end's text quotes (a length, an offset, a kind)
END_REASON = FIRST_OWN_SLOT + 6    # END_* below: which text
STATE_SLOTS = 7
# Modes (MODE slot).
WALKING, IN_ZERO_TAIL = 0, 1
LOOKAHEAD = fj.PADDING_HEAD_SIZE   # a length prefix, or a padding record's marker and length
# Why the walk stopped; journal/scan.py turns each into the reference reader's text.
(END_EOF, END_CLEAN, END_GARBAGE, END_PAD_SHORT, END_PAD_LENGTH, END_NEGATIVE, END_TORN, END_ZERO_BODY,
 END_CLASSIFY, END_VERSION) = range(10)

_DATA, _KEY, _FENCE, _FORCE, _LAC, _PAD, _UNKNOWN = (int(k) for k in (
    RecordKind.DATA, RecordKind.LEDGER_KEY, RecordKind.FENCE, RecordKind.FORCE_LEDGER, RecordKind.EXPLICIT_LAC,
    RecordKind.PADDING, RecordKind.UNKNOWN_META))
_CLEAN, _EOF, _TORN, _INVALID, _GARBAGE = (int(k) for k in (EndKind.CLEAN, EndKind.EOF, EndKind.TORN,
                                                            EndKind.INVALID, EndKind.GARBAGE))
_KEY_VERSION, _FENCE_VERSION, _LAC_VERSION = (fj.KIND_MIN_VERSION[k] for k in (
    RecordKind.LEDGER_KEY, RecordKind.FENCE, RecordKind.EXPLICIT_LAC))
_DATA_FLAGS_MIN, _DATA_FLAGS_MAX = V2_FLAGS_BASE + int(min(DigestType)), V2_FLAGS_BASE + int(max(DigestType))
_PREFIX = fj.RECORD_LENGTH_SIZE


@inline_kernel
def classify_record(buf, i, length, version):
    """Decode a body of ``length`` bytes at buf[i]: (ok, kind, scope, ledger, entry); ok=0 malformed,
    ok=-1 a meta record the journal version may not hold."""
    zero = np.uint64(0)
    at = i
    remaining = length
    scope = zero
    if buf[at] >= V2_MARKER:  # scoped: flags 0xA0 on meta records, 0xA1..0xA4 (the digest type) on data
        if remaining < fj.SCOPED_PREFIX_SIZE:
            return 0, 0, zero, zero, 0
        flags = buf[at]
        scope = be_u64(buf, at + fj.SCOPE_AT)
        at += fj.SCOPED_PREFIX_SIZE
        remaining -= fj.SCOPED_PREFIX_SIZE
        is_meta = remaining >= fj.META_BODY_SIZE and be_i64(buf, at + fj.META_ENTRY_AT) < 0
        if is_meta and flags != fj.SCOPED_META_FLAGS:
            return 0, 0, zero, zero, 0
        if not is_meta and (flags < _DATA_FLAGS_MIN or flags > _DATA_FLAGS_MAX):
            return 0, 0, zero, zero, 0
    if remaining < fj.META_BODY_SIZE:
        return 0, 0, zero, zero, 0
    ledger = be_u64(buf, at + fj.META_LEDGER_AT)
    entry = be_i64(buf, at + fj.META_ENTRY_AT)
    if entry >= 0:
        if remaining < ENTRY_V1_HEADER_SIZE:
            return 0, 0, zero, zero, 0
        return 1, _DATA, scope, ledger, entry
    kind = _UNKNOWN
    if entry == fj.META_LEDGER_KEY:
        kind = _KEY
        if remaining < fj.KEY_AT:
            return 0, 0, zero, zero, 0
        key_length = np.int64(be_i32(buf, at + fj.KEY_LENGTH_AT))
        if key_length < 0 or key_length > fj.MAX_KEY_LENGTH or remaining < fj.KEY_AT + key_length:
            return 0, 0, zero, zero, 0
        if version < _KEY_VERSION:
            return -1, kind, scope, ledger, entry
    elif entry == fj.META_EXPLICIT_LAC:
        kind = _LAC
        if remaining < fj.LAC_BODY_AT:
            return 0, 0, zero, zero, 0
        lac_length = np.int64(be_i32(buf, at + fj.LAC_BODY_LENGTH_AT))
        if (lac_length < fj.MIN_LAC_BODY_LENGTH or lac_length > fj.MAX_LAC_BODY_LENGTH
                or remaining < fj.LAC_BODY_AT + lac_length):
            return 0, 0, zero, zero, 0
        if version < _LAC_VERSION:
            return -1, kind, scope, ledger, entry
    elif entry == fj.META_FENCE:
        kind = _FENCE
        if version < _FENCE_VERSION:
            return -1, kind, scope, ledger, entry
    elif entry == fj.META_FORCE_LEDGER:
        kind = _FORCE
    return 1, kind, scope, ledger, entry


@kernel
def walk_journal_records(buf, base, n, version, state, r_offset, r_kind, r_scope, r_ledger, r_entry, r_size,
                         r_facts, variant, max_crc):
    """Walk journal records from ``state`` through ``buf`` (file bytes [base, base + buf.size)) of a
    file of ``n`` bytes, filling the record columns ``r_*``; returns a diskio.windowed status. When
    ``r_facts`` is not empty (as long as ``r_offset``), each data record's digest facts go into it
    (digests.kernels.entry_facts, with ``variant`` and ``max_crc``), 0 for other records."""
    buf = unowned(buf)
    buf_end = base + buf.size
    mode = state[MODE]
    pos = state[POSITION]
    zero_at = state[ZERO_AT]
    n_records = state[RECORDS]
    status = DONE
    end_kind = -1
    reason = 0
    value: int | np.int64 = 0     # the local's annotation is for mypy: numba does not read it
    zero = np.uint64(0)
    ahead = pos - base
    run: int | np.int64 = 0        # bytes of the run of small records the walk is in (read_ahead's reach)
    streamed = r_facts.size > 0    # the walk reads every entry's bytes in order
    while True:
        if mode == IN_ZERO_TAIL:
            nonzero = first_nonzero(buf, pos - base) if pos < buf_end else -1
            if nonzero >= 0:
                end_kind, reason, value = _GARBAGE, END_GARBAGE, base + nonzero
                pos = zero_at
                break
            if buf_end >= n:
                end_kind, reason = _CLEAN, END_CLEAN
                pos = zero_at
                break
            pos = buf_end
            state[NEED] = LOOKAHEAD
            status = NEXT_WINDOW
            break
        if pos + _PREFIX > n:
            end_kind, reason = _EOF, END_EOF
            break
        if pos + _PREFIX > buf_end:
            state[NEED] = LOOKAHEAD
            status = NEXT_WINDOW
            break
        ahead = read_ahead(buf, pos - base, ahead, run, streamed)
        length = np.int64(be_i32(buf, pos - base))
        if length == 0:
            mode = IN_ZERO_TAIL
            zero_at = pos
            continue
        if length == fj.PADDING_MARKER and version >= fj.PADDING_MIN_VERSION:
            if pos + fj.PADDING_HEAD_SIZE > n:
                end_kind, reason = _TORN, END_PAD_SHORT
                break
            if pos + fj.PADDING_HEAD_SIZE > buf_end:
                state[NEED] = LOOKAHEAD
                status = NEXT_WINDOW
                break
            pad_length = np.int64(be_i32(buf, pos + _PREFIX - base))
            if pad_length < 0 or pos + fj.PADDING_HEAD_SIZE + pad_length > n:
                end_kind, reason, value = (_TORN if pad_length >= 0 else _INVALID), END_PAD_LENGTH, pad_length
                break
            if n_records >= r_offset.size:
                status = FULL
                break
            r_offset[n_records], r_kind[n_records], r_scope[n_records] = pos, _PAD, zero
            r_ledger[n_records], r_entry[n_records], r_size[n_records] = zero, 0, pad_length
            if r_facts.size > 0:
                r_facts[n_records] = 0
            n_records += 1
            pos += fj.PADDING_HEAD_SIZE + pad_length
            run = 0
            continue
        if length < 0:
            end_kind, reason, value = _INVALID, END_NEGATIVE, length
            break
        if pos + _PREFIX + length > n:
            end_kind, reason, value = _TORN, END_TORN, length
            break
        if pos + _PREFIX + length > buf_end:
            state[NEED] = _PREFIX + length
            status = NEXT_WINDOW
            break
        body = pos + _PREFIX - base
        j = body
        while j + 8 <= body + length and ld_u64le(buf, j) == 0:
            j += 8
        while j < body + length and buf[j] == 0:
            j += 1
        if j == body + length:
            end_kind, reason, value = _TORN, END_ZERO_BODY, length
            break
        ok, kind, scope, ledger, entry = classify_record(buf, body, length, version)
        if ok == 0:
            end_kind, reason = _INVALID, END_CLASSIFY
            break
        if ok < 0:
            end_kind, reason, value = _INVALID, END_VERSION, kind
            break
        if n_records >= r_offset.size:
            status = FULL
            break
        r_offset[n_records], r_kind[n_records], r_scope[n_records] = pos, kind, scope
        r_ledger[n_records], r_entry[n_records], r_size[n_records] = ledger, entry, length
        if r_facts.size > 0:
            r_facts[n_records] = entry_facts(buf, body, length, variant, max_crc) if kind == _DATA else 0
        n_records += 1
        pos += _PREFIX + length
        run = small_run(run, _PREFIX + length)
    if end_kind >= 0:
        mode = MODE_DONE
        state[END_KIND] = end_kind
        state[END_AT] = pos
        state[END_REASON] = reason
        state[END_VALUE] = value
    state[MODE] = mode
    state[POSITION] = pos
    state[RESUME] = pos
    state[ZERO_AT] = zero_at
    state[RECORDS] = n_records
    return status
