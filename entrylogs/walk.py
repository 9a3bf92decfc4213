"""Jitted framing walk over one window of an entry log: entries, skipped records, padding, resync.

Its pure-Python twin is the reference reader, entrylogs/reader.py: ``walk_entry_records`` is the loop
of ``read_entry_log`` (tests compare them record for record), judging records with the twins of its
tests (entrylogs/record_heads.py, entrylogs/resync.py). The walk runs under diskio/windowed.py's
driver: a record is emitted only by a window that holds all of its bytes. Two things look outside the
window, both only after damage: the last non-zero byte before the end of data (asked for with
NEED_LAST_NONZERO, computed once, backwards) and the bytes the resync judges, from a view of the whole
file (asked for with NEED_WHOLE_FILE: a resync reads as far as it must to find an entry that proves
itself, and no window need hold them).
"""
from __future__ import annotations

from bkdisk.digests.kernels import entry_facts
from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.kernels import read_ahead, small_run, unowned
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
from bkdisk.entrylogs.record_heads import entry_header, padding_end
from bkdisk.entrylogs.resync import resync_point
from bkdisk.formats.entry import ENTRY_V2_HEADER_SIZE
from bkdisk.formats.entrylog import DIRECT_ALIGNMENT, DIRECT_PADDING_BYTE, SIZE_PREFIX_SIZE

# The walk's own state slots (after diskio.windowed's MODE, RESUME, NEED).
POSITION = FIRST_OWN_SLOT        # where the walk is
DAMAGE_AT = FIRST_OWN_SLOT + 1   # where framing broke (while resyncing)
DAMAGE_CODE = FIRST_OWN_SLOT + 2
ENTRIES = FIRST_OWN_SLOT + 3     # entries emitted so far
PROBLEMS = FIRST_OWN_SLOT + 4    # framing problems emitted so far
LAST_NONZERO = FIRST_OWN_SLOT + 5
UNPROVED_TO = FIRST_OWN_SLOT + 6  # where resyncs stopped searching for an entry that proves itself
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
_ZERO_SIZE = int(Damage.ZERO_SIZE)
_SKIP_RECORD = SKIP_RECORD


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
            mode = RESYNCING
            continue
        elif mode == RESYNCING:
            if whole_file.size == 0:
                status = NEED_WHOLE_FILE
                break
            if last_nonzero == LAST_NONZERO_UNKNOWN:
                status = NEED_LAST_NONZERO
                break
            resumed, state[UNPROVED_TO] = resync_point(whole_file, damage_at, end, last_nonzero, variant,
                                                       state[UNPROVED_TO])
            added = add_problem(p_offset, p_reason, p_resumed, n_problems, damage_at, damage_code, resumed)
            if added < 0:
                status = FULL
                break
            n_problems = added
            pos = resumed
            run = 0
            mode = WALKING
        else:
            status = DONE
            break
    state[MODE] = mode
    state[POSITION] = pos
    state[RESUME] = pos
    state[DAMAGE_AT] = damage_at
    state[DAMAGE_CODE] = damage_code
    state[ENTRIES] = n_entries
    state[PROBLEMS] = n_problems
    return status
