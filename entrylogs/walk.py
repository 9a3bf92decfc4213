"""Jitted framing walk over one window of an entry log: entries, skipped records, padding, resync.

Its pure-Python twin is the reference reader, entrylogs/reader.py: ``entry_header`` is
``header_at``, ``padding_end`` is ``padding_end``, ``successor_ok`` the successor test of
``plausible_at``, and ``walk_entry_records`` the loop of ``read_entry_log`` (tests compare them
record for record). The walk runs under diskio/windowed.py's driver: a record is emitted only by a
window that holds all of its bytes. Two things may look outside the window, both rare and both only
while resyncing after damage: the last non-zero byte before the end of data (asked for with
NEED_LAST_NONZERO, computed once, backwards) and the header of a resync candidate's successor (read
from a view of the whole file, asked for with NEED_WHOLE_FILE, touching one page).
"""
from __future__ import annotations

import numpy as np

from bkdisk.digests.kernels import entry_facts
from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.kernels import be_i32, be_i64, be_u64, read_ahead, small_run, unowned
from bkdisk.diskio.windowed import (
    DONE,
    FIRST_OWN_SLOT,
    FIRST_OWN_STATUS,
    FULL,
    MODE,
    MODE_DONE,
    NEED,
    NEXT_WINDOW,
    RESUME,
)
from bkdisk.entrylogs.reader import SKIP_RECORD, Damage
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import (
    ENTRY_V1_HEADER_SIZE,
    ENTRY_V2_HEADER_SIZE,
    V1_ENTRY_AT,
    V1_LAC_AT,
    V1_LEDGER_AT,
    V1_LENGTH_AT,
    V2_DIGEST_MASK,
    V2_FLAGS_BASE,
    V2_MARKER,
    V2_PREFIX_SIZE,
    V2_SCOPE_AT,
    V2_VERSION_MASK,
)
from bkdisk.formats.entrylog import (
    DIRECT_ALIGNMENT,
    DIRECT_PADDING_BYTE,
    MAX_ENTRY_SIZE,
    MIN_SANE_ENTRY_SIZE,
    SIZE_PREFIX_SIZE,
)

# The walk's own state slots (after diskio.windowed's MODE, RESUME, NEED).
POSITION = FIRST_OWN_SLOT        # where the walk is
DAMAGE_AT = FIRST_OWN_SLOT + 1   # where framing broke (while resyncing)
DAMAGE_CODE = FIRST_OWN_SLOT + 2
CANDIDATE = FIRST_OWN_SLOT + 3   # the resync candidate being judged
ENTRIES = FIRST_OWN_SLOT + 4     # entries emitted so far
PROBLEMS = FIRST_OWN_SLOT + 5    # framing problems emitted so far
LAST_NONZERO = FIRST_OWN_SLOT + 6
STATE_SLOTS = 7
LAST_NONZERO_UNKNOWN = -2
# Modes (MODE slot).
WALKING, RESYNCING = 0, 1
# The walk's own requests.
NEED_LAST_NONZERO = FIRST_OWN_STATUS
NEED_WHOLE_FILE = FIRST_OWN_STATUS + 1

HEADER_LOOKAHEAD = SIZE_PREFIX_SIZE + ENTRY_V2_HEADER_SIZE   # bytes a header check may read
# A log's records are sparse when they are this many bytes apart on average, or more: then the pages of
# their headers, asked for ahead of a light walk, are a small part of the log.
SPARSE_RECORD_BYTES = 8192
_ZERO_SIZE, _BAD_SIZE, _BAD_HEADER, _TRUNCATED = (int(Damage.ZERO_SIZE), int(Damage.BAD_SIZE),
                                                  int(Damage.BAD_HEADER), int(Damage.TRUNCATED))
_SKIP_RECORD = SKIP_RECORD
_MARKER_BYTES = V1_LEDGER_AT + 8   # a skipped record's ledger id: eight 0xFF bytes
_MIN_DIGEST_CODE, _MAX_DIGEST_CODE = int(min(DigestType)), int(max(DigestType))


@inline_kernel
def padding_end(buf, base, pos, end):
    """The reference reader's padding_end (0 when none); ``buf`` must hold the bytes up to the boundary."""
    into = pos % DIRECT_ALIGNMENT
    boundary = pos + DIRECT_ALIGNMENT - into
    if into == 0 or boundary > end:
        return 0
    for k in range(pos - base, boundary - base):
        if buf[k] != DIRECT_PADDING_BYTE:
            return 0
    return boundary


@inline_kernel
def entry_header(buf, base, pos, end):
    """The reference reader's header_at: (damage code or 0, size, format, scope, ledger, entry, lac, length)."""
    zero = np.uint64(0)
    if pos + SIZE_PREFIX_SIZE > end:
        return _TRUNCATED, 0, 0, zero, zero, 0, 0, 0
    i = pos - base
    size = np.int64(be_i32(buf, i))
    if size <= 0:
        return _ZERO_SIZE, size, 0, zero, zero, 0, 0, 0
    body = i + SIZE_PREFIX_SIZE
    if size >= MIN_SANE_ENTRY_SIZE and pos + SIZE_PREFIX_SIZE + size <= end:
        skip = True
        for k in range(V1_LEDGER_AT, _MARKER_BYTES):
            if buf[body + k] != 0xFF:
                skip = False
                break
        if skip:
            return _SKIP_RECORD, size, 0, zero, zero, 0, 0, 0
    if size < ENTRY_V1_HEADER_SIZE or size > MAX_ENTRY_SIZE or pos + SIZE_PREFIX_SIZE + size > end:
        return _BAD_SIZE, size, 0, zero, zero, 0, 0, 0
    flags = buf[body]
    fmt = 1
    scope = zero
    if flags >= V2_MARKER:
        digest_code = flags & V2_DIGEST_MASK
        if (size < ENTRY_V2_HEADER_SIZE or (flags & V2_VERSION_MASK) != V2_FLAGS_BASE
                or digest_code < _MIN_DIGEST_CODE or digest_code > _MAX_DIGEST_CODE):
            return _BAD_HEADER, size, 0, zero, zero, 0, 0, 0
        fmt = 2
        scope = be_u64(buf, body + V2_SCOPE_AT)
        body += V2_PREFIX_SIZE
    ledger = be_u64(buf, body + V1_LEDGER_AT)
    entry = be_i64(buf, body + V1_ENTRY_AT)
    lac = be_i64(buf, body + V1_LAC_AT)
    length = be_i64(buf, body + V1_LENGTH_AT)
    if entry < 0 or lac < -1 or lac >= entry or length < 0:
        return _BAD_HEADER, size, 0, zero, zero, 0, 0, 0
    return 0, size, fmt, scope, ledger, entry, lac, length


@inline_kernel
def successor_ok(buf, base, nxt, end):
    """The successor test of the reference plausible_at, zero tail aside: an entry, a skipped
    record or flush padding at ``nxt`` (``buf`` holds its header and any padding)."""
    code = entry_header(buf, base, nxt, end)[0]
    if code == 0 or code == _SKIP_RECORD:
        return True
    return buf[nxt - base] == DIRECT_PADDING_BYTE and padding_end(buf, base, nxt, end) > 0


@inline_kernel
def add_problem(p_offset, p_reason, p_resumed, n, at, reason, resumed):
    """Row ``n`` of the problem columns: damage at ``at`` of kind ``reason``, walk resumed at
    ``resumed``. Returns the next row, or -1 when the columns are full (nothing written: the caller
    reports FULL and the same problem is added again once they have grown)."""
    if n >= p_offset.size:
        return -1
    p_offset[n] = at
    p_reason[n] = reason
    p_resumed[n] = resumed
    return n + 1


@kernel
def walk_entry_records(buf, base, whole_file, end, has_map, state, e_offset, e_size, e_format, e_scope, e_ledger,
                       e_entry, e_lac, e_length, p_offset, p_reason, p_resumed, e_facts, variant):
    """Walk records from ``state`` through ``buf`` (file bytes [base, base + buf.size)), filling the
    entry columns ``e_*`` and the problem columns ``p_*``; returns a diskio.windowed status or
    NEED_LAST_NONZERO (set state[LAST_NONZERO]) or NEED_WHOLE_FILE (pass ``whole_file``). When
    ``e_facts`` is not empty (as long as ``e_offset``), each entry's digest facts go into it
    (digests.kernels.entry_facts, CRCs with ``variant``) while its bytes are in cache."""
    buf = unowned(buf)
    buf_end = base + buf.size
    mode = state[MODE]
    pos = state[POSITION]
    damage_at = state[DAMAGE_AT]
    damage_code = state[DAMAGE_CODE]
    candidate = state[CANDIDATE]
    n_entries = state[ENTRIES]
    n_problems = state[PROBLEMS]
    last_nonzero = state[LAST_NONZERO]
    ahead = pos - base
    run = 0                       # bytes of the run of small entries the walk is in (read_ahead's reach)
    streamed = e_facts.size > 0   # the walk reads every entry's bytes in order
    status = DONE
    while True:
        if mode == WALKING:
            if pos >= end:
                mode = MODE_DONE
                status = DONE
                break
            if min(pos + HEADER_LOOKAHEAD, end) > buf_end:
                state[NEED] = HEADER_LOOKAHEAD
                status = NEXT_WINDOW
                break
            ahead = read_ahead(buf, pos - base, ahead, run, streamed)
            if buf[pos - base] == DIRECT_PADDING_BYTE and pos % DIRECT_ALIGNMENT != 0:
                boundary = pos + DIRECT_ALIGNMENT - pos % DIRECT_ALIGNMENT
                if boundary <= end:
                    if boundary > buf_end:  # the padding runs past this window: judge it in the next
                        state[NEED] = boundary - pos
                        status = NEXT_WINDOW
                        break
                    if padding_end(buf, base, pos, end) > 0:
                        pos = boundary
                        run = 0
                        continue
            code, size, fmt, scope, ledger, entry, lac, length = entry_header(buf, base, pos, end)
            if code == 0:
                if pos + SIZE_PREFIX_SIZE + size > buf_end:
                    state[NEED] = SIZE_PREFIX_SIZE + size
                    status = NEXT_WINDOW
                    break
                if n_entries >= e_offset.size:
                    status = FULL
                    break
                e_offset[n_entries] = pos
                e_size[n_entries] = size
                e_format[n_entries] = fmt
                e_scope[n_entries] = scope
                e_ledger[n_entries] = ledger
                e_entry[n_entries] = entry
                e_lac[n_entries] = lac
                e_length[n_entries] = length
                if e_facts.size > 0:
                    e_facts[n_entries] = entry_facts(buf, pos + SIZE_PREFIX_SIZE - base, size, variant, size)
                n_entries += 1
                pos += SIZE_PREFIX_SIZE + size
                run = small_run(run, SIZE_PREFIX_SIZE + size)
                continue
            if code == _SKIP_RECORD:
                pos += SIZE_PREFIX_SIZE + size
                run = 0
                continue
            if code == _ZERO_SIZE:
                if last_nonzero == LAST_NONZERO_UNKNOWN:
                    status = NEED_LAST_NONZERO
                    break
                if last_nonzero < pos:  # zeros to the end of data
                    if has_map:
                        added = add_problem(p_offset, p_reason, p_resumed, n_problems, pos, _ZERO_SIZE, end)
                        if added < 0:
                            status = FULL
                            break
                        n_problems = added
                    mode = MODE_DONE
                    status = DONE
                    break
            damage_at = pos
            damage_code = code
            candidate = pos + 1
            mode = RESYNCING
            continue
        elif mode == RESYNCING:
            found = -1
            stop = DONE
            while candidate + SIZE_PREFIX_SIZE + ENTRY_V1_HEADER_SIZE <= end:
                if min(candidate + HEADER_LOOKAHEAD, end) > buf_end:
                    state[NEED] = HEADER_LOOKAHEAD
                    stop = NEXT_WINDOW
                    break
                code, size, fmt, scope, ledger, entry, lac, length = entry_header(buf, base, candidate, end)
                if code != 0:
                    candidate += 1
                    continue
                nxt = candidate + SIZE_PREFIX_SIZE + size
                if nxt == end:
                    found = candidate
                    break
                # the bytes that judge the successor: its header, and up to the next 4096 boundary
                # when it may be flush padding
                need_end = min(nxt + HEADER_LOOKAHEAD, end)
                if nxt % DIRECT_ALIGNMENT != 0 and (nxt >= buf_end or buf[nxt - base] == DIRECT_PADDING_BYTE):
                    need_end = max(need_end, min(nxt + DIRECT_ALIGNMENT - nxt % DIRECT_ALIGNMENT, end))
                if need_end <= buf_end:
                    if successor_ok(buf, base, nxt, end):
                        found = candidate
                        break
                    if last_nonzero == LAST_NONZERO_UNKNOWN:
                        stop = NEED_LAST_NONZERO
                        break
                    if last_nonzero < nxt:
                        found = candidate
                        break
                    candidate += 1
                    continue
                if last_nonzero == LAST_NONZERO_UNKNOWN:
                    stop = NEED_LAST_NONZERO
                    break
                if last_nonzero < nxt:
                    found = candidate
                    break
                if whole_file.size == 0:
                    stop = NEED_WHOLE_FILE
                    break
                if successor_ok(whole_file, 0, nxt, end):
                    found = candidate
                    break
                candidate += 1
            if stop != DONE:
                status = stop
                break
            resumed = found if found >= 0 else end
            added = add_problem(p_offset, p_reason, p_resumed, n_problems, damage_at, damage_code, resumed)
            if added < 0:
                status = FULL
                break
            n_problems = added
            pos = resumed
            mode = WALKING
        else:
            status = DONE
            break
    state[MODE] = mode
    state[POSITION] = pos
    state[RESUME] = candidate if mode == RESYNCING else pos
    state[DAMAGE_AT] = damage_at
    state[DAMAGE_CODE] = damage_code
    state[CANDIDATE] = candidate
    state[ENTRIES] = n_entries
    state[PROBLEMS] = n_problems
    return status
