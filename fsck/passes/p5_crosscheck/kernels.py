"""Jitted steps of pass 5's join of index locations with the entries the entry-log scans found
(fsck/passes/p5_crosscheck/): each one loop over the rows where numpy took several passes and a
temporary array per step. The rows they fill are the pass's ENTRY_ROW and LOCATION_ROW fields."""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.kernels import first_at_least, prefetch_item, unowned
from bkdisk.diskio.ledger_table import row_of
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.index import POSITION_BITS

LOOKUP_AHEAD = 32   # match_log: locations whose rows are asked for before they are looked up
# match_locations' verdict per location (UNMATCHED: not looked up yet)
SAME, OTHER_ENTRY, NO_ENTRY, UNMATCHED = 0, 1, 2, 3
BY_IDS_BLOCK = 64   # match_by_ids: entries whose locations are asked for before any is compared
NO_RANGE = 255      # locations_per_log: a location that points into no scanned log


@kernel(any_layout=True)
def entry_rows(offset, scope, ledger, entry, log_id, out_key, out_scope, out_ledger, out_entry, out_log):
    """A log's entries as rows: each entry's location (the log id, the position past its size prefix)
    and its ids."""
    high = np.uint64(log_id) << np.uint64(POSITION_BITS)
    for i in range(offset.size):
        out_key[i] = high | np.uint64(offset[i] + SIZE_PREFIX_SIZE)
        out_scope[i] = scope[i]
        out_ledger[i] = ledger[i]
        out_entry[i] = entry[i]
        out_log[i] = log_id


@kernel(any_layout=("l_key",))
def parts_holding(l_key, rows, firsts, out_part):
    """For each location ``l_key[rows[i]]``: the part of a log holding its position, the last part
    whose first entry's offset (``firsts``, ascending) is at or before the position's size prefix
    (the first part when none is)."""
    l_key, rows, firsts = unowned(l_key), unowned(rows), unowned(firsts)
    mask = np.uint64((1 << POSITION_BITS) - 1)
    for i in range(rows.size):
        at = np.int64(l_key[rows[i]] & mask) - SIZE_PREFIX_SIZE
        out_part[i] = max(first_at_least(firsts, at + 1, 0, firsts.size) - 1, 0)


@kernel(any_layout=("l_key",))
def position_buckets(l_key, rows, first, bits, buckets, out_bucket):
    """For each location ``l_key[rows[i]]``: which ``2**bits`` bytes of the log, from offset ``first``,
    hold its size prefix (clipped to 0 .. ``buckets`` - 1)."""
    l_key, rows = unowned(l_key), unowned(rows)
    mask = np.uint64((1 << POSITION_BITS) - 1)
    for i in range(rows.size):
        at = np.int64(l_key[rows[i]] & mask) - SIZE_PREFIX_SIZE - first
        out_bucket[i] = min(max(at >> bits, 0), buckets - 1)


@inline_kernel
def _first_at_least_near(keys, k, p):
    """first_at_least over all ``keys``, searched outwards from index ``p`` (where the previous key
    was found): a ledger's locations come in position order, so the next one is a little further on."""
    n = keys.size
    if keys[p] < k:   # at or past p + 1: gallop forward
        lo, step = p + 1, 1
        while lo + step < n and keys[lo + step - 1] < k:
            lo += step
            step <<= 1
        hi = min(n, lo + step)
    else:             # at or before p: gallop backward
        hi, step = p, 1
        while hi - step >= 0 and keys[hi - step] >= k:
            hi -= step
            step <<= 1
        lo = max(0, hi - step)
    return first_at_least(keys, k, lo, hi)


@inline_kernel
def _put_row(i, n, k0, c_file, c_entry, c_log, c_pos, out_k, out_key, out_entry, out_file):
    """Location ``i`` (numbered ``k0 + i``) as row ``n``: number, location, entry id, file row."""
    out_k[n] = k0 + i
    out_key[n] = (np.uint64(c_log[i]) << np.uint64(POSITION_BITS)) | np.uint64(c_pos[i])
    out_entry[n] = c_entry[i]
    out_file[n] = c_file[i]


@kernel(any_layout=("c_file", "c_entry", "c_log", "c_pos", "out_k", "out_key", "out_entry", "out_file"))
def routed_rows(c_file, c_entry, c_log, c_pos, ids, sizes, log_range, k0, at, out_k, out_key, out_entry, out_file):
    """The locations (LOCATION_DTYPE fields ``c_*``, the first numbered ``k0``) that point into a
    scanned log (sorted ``ids``) before its end (``sizes``), as rows (number, location, entry id, file
    row) grouped by range: range ``r``'s are the locations into the logs ``ids[w]`` whose ``log_range[w]``
    is ``r``, in location order, rows ``at[r]:at[r + 1]`` (``at``, a slot per range and one more, is
    filled here). Returns the rows written."""
    ids, log_range = unowned(ids), unowned(log_range)
    ranges = at.size - 1
    where = np.empty(c_file.size, np.int64)   # each location's range, -1 for none
    at[:] = 0
    for i in range(c_file.size):
        where[i] = -1
        if ids.size == 0:
            continue
        log = np.uint64(c_log[i])
        w = min(first_at_least(ids, log, 0, ids.size), ids.size - 1)
        if ids[w] == log and np.int64(c_pos[i]) < sizes[w]:
            where[i] = log_range[w]
            at[log_range[w] + 1] += 1
    for r in range(ranges):
        at[r + 1] += at[r]
    fill = at[:ranges].copy()
    for i in range(c_file.size):
        r = where[i]
        if r >= 0:
            _put_row(i, fill[r], k0, c_file, c_entry, c_log, c_pos, out_k, out_key, out_entry, out_file)
            fill[r] += 1
    return at[ranges]


@kernel(any_layout=("c_log", "c_pos"))
def locations_per_log(c_log, c_pos, ids, sizes, log_range, out_count, out_range):
    """How many locations point into each scanned log (sorted ``ids``) before its end (``sizes``):
    ``out_count[w]`` for ``ids[w]``, added to; and the range of each location (``log_range[w]`` of its
    log, NO_RANGE for one that points into no scanned log or past its end) in ``out_range``."""
    ids = unowned(ids)
    for i in range(c_log.size):
        out_range[i] = NO_RANGE
        if ids.size == 0:
            continue
        log = np.uint64(c_log[i])
        w = min(first_at_least(ids, log, 0, ids.size), ids.size - 1)
        if ids[w] == log and np.int64(c_pos[i]) < sizes[w]:
            out_count[w] += 1
            out_range[i] = log_range[w]


@kernel(any_layout=("c_file", "c_entry", "c_log", "c_pos", "out_k", "out_key", "out_entry", "out_file"))
def range_rows_of(c_range, r, c_file, c_entry, c_log, c_pos, k0, out_k, out_key, out_entry, out_file):
    """The rows (as routed_rows makes them) of the locations whose range (locations_per_log's
    ``c_range``) is ``r``, the first location numbered ``k0``. Returns the rows written."""
    c_range = unowned(c_range)
    n = 0
    for i in range(c_range.size):
        if c_range[i] == r:
            _put_row(i, n, k0, c_file, c_entry, c_log, c_pos, out_k, out_key, out_entry, out_file)
            n += 1
    return n


@inline_kernel
def _verdict(there, same_ids, w, pointed):
    """A location's verdict: an entry starts where it points (``there``) with its ids (``same_ids``):
    SAME, and entry ``w`` is pointed at; of other ids: OTHER_ENTRY; none: NO_ENTRY."""
    if not there:
        return NO_ENTRY
    if same_ids:
        pointed[w] = True
        return SAME
    return OTHER_ENTRY


@kernel(any_layout=("t_key", "t_scope", "t_ledger", "t_entry", "l_key", "l_scope", "l_ledger", "l_entry"))
def match_locations(t_key, t_scope, t_ledger, t_entry, l_key, l_scope, l_ledger, l_entry, out_slot, out_verdict,
                    pointed):
    """Each location (``l_*``) looked up among the entries (``t_*``, by ``t_key`` ascending): the slot
    of the first entry at or past its key (the last slot when none is), and the verdict: SAME (the
    entry of its ids starts there; ``pointed`` marks it), OTHER_ENTRY or NO_ENTRY."""
    t_key = unowned(t_key)
    pointed = unowned(pointed)
    n = t_key.size
    w = 0
    for i in range(l_key.size):
        if n == 0:
            out_slot[i] = 0
            out_verdict[i] = NO_ENTRY
            continue
        k = l_key[i]
        w = min(_first_at_least_near(t_key, k, w), n - 1)
        out_slot[i] = w
        out_verdict[i] = _verdict(t_key[w] == k, t_scope[w] == l_scope[i] and t_ledger[w] == l_ledger[i]
                                  and t_entry[w] == l_entry[i], w, pointed)


@kernel(any_layout=("e_offset", "e_scope", "e_ledger", "e_entry", "l_key", "l_entry", "l_file", "f_scope", "f_ledger"))
def match_log(e_offset, e_scope, e_ledger, e_entry, l_key, l_entry, l_file, f_scope, f_ledger, rows, every,
              out_slot, out_verdict, pointed):
    """match_locations over one log's entries as its scan gives them (``e_*``, ``e_offset``
    ascending), for the locations ``rows`` of ``l_*`` (every row when ``every``), all pointing into
    that log: a location at position p looks for the entry whose size prefix is at p - 4; its
    (scope, ledger) are those of its file row ``l_file`` in ``f_*``. The slot is the entry's index."""
    e_offset = unowned(e_offset)
    pointed = unowned(pointed)
    n = e_offset.size
    mask = (np.uint64(1) << np.uint64(POSITION_BITS)) - np.uint64(1)
    w = 0
    m = l_key.size if every else rows.size
    for j in range(m):
        i = j if every else rows[j]
        if not every and j + LOOKUP_AHEAD < m:
            # Rows taken out of index order: each lookup starts from the slot the one before found, so
            # it would wait on its row's cache miss; the row LOOKUP_AHEAD on is asked for now.
            prefetch_item(l_key, rows[j + LOOKUP_AHEAD])
        if n == 0:
            out_slot[i] = 0
            out_verdict[i] = NO_ENTRY
            continue
        at = np.int64(l_key[i] & mask) - SIZE_PREFIX_SIZE
        w = min(_first_at_least_near(e_offset, at, w), n - 1)
        out_slot[i] = w
        f = l_file[i]
        out_verdict[i] = _verdict(e_offset[w] == at, e_scope[w] == f_scope[f] and e_ledger[w] == f_ledger[f]
                                  and e_entry[w] == l_entry[i], w, pointed)


@kernel(any_layout=("l_file", "l_entry"))
def file_runs(l_file, l_entry, out_start, out_first):
    """Where each file row's locations start in rows ordered by (file row, entry id) (``out_start``:
    one more than the file rows, a row without locations an empty run) and the first entry id of each
    run (``out_first``). Returns False when the rows are not in that order (nothing is then filled)."""
    n = l_file.size
    for i in range(1, n):
        if l_file[i] < l_file[i - 1] or (l_file[i] == l_file[i - 1] and l_entry[i] <= l_entry[i - 1]):
            return False
    f = 0
    for i in range(n):
        while f <= l_file[i]:
            out_start[f] = i
            out_first[f] = l_entry[i]
            f += 1
    while f < out_start.size:
        out_start[f] = n
        f += 1
    return True


@kernel(any_layout=("e_offset", "e_scope", "e_ledger", "e_entry", "f_scope", "f_ledger", "l_key", "l_entry"))
def match_by_ids(e_offset, e_scope, e_ledger, e_entry, log_id, f_scope, f_ledger, table, f_start, f_first,
                 l_key, l_entry, verdict, pointed, at, run):
    """The locations SAME as match_log finds them, looked for from the entries' side: an entry of one
    log (``e_*``, its id ``log_id``) is looked up by its own ids, its (scope, ledger) in ``table``
    (diskio.ledger_table's, of the file rows ``f_*``), its entry id in that file row's run of the
    locations (``f_start``, ``f_first``: file_runs'); when that location points at the entry, both are
    marked (``verdict`` SAME, ``pointed``). One lookup of a location per entry, asked for a block
    ahead (``at``, ``run``: BY_IDS_BLOCK int64 each, the caller's, as an allocation here would load
    numba's arrays with the kernel); what this does not mark, match_log looks up by position. Returns
    the entries marked."""
    e_offset, pointed, verdict = unowned(e_offset), unowned(pointed), unowned(verdict)
    high = np.uint64(log_id) << np.uint64(POSITION_BITS)
    n = e_offset.size
    marked = 0
    for b0 in range(0, n, BY_IDS_BLOCK):
        b1 = min(n, b0 + BY_IDS_BLOCK)
        for j in range(b0, b1):   # each entry's location guessed and asked for
            f = row_of(f_scope, f_ledger, table, e_scope[j], e_ledger[j])
            g = -1
            if f >= 0 and f_start[f + 1] > f_start[f]:
                # a run of consecutive entry ids holds entry e at its place; else it is searched for
                g = min(max(f_start[f] + (e_entry[j] - f_first[f]), f_start[f]), f_start[f + 1] - 1)
                prefetch_item(l_key, g)
                prefetch_item(verdict, g)
            at[j - b0], run[j - b0] = g, f
        for j in range(b0, b1):   # then compared
            g, e = at[j - b0], e_entry[j]
            if g < 0:
                continue
            if l_entry[g] != e:
                f = run[j - b0]
                g = first_at_least(l_entry, e, f_start[f], f_start[f + 1])
                if g == f_start[f + 1] or l_entry[g] != e:
                    continue
            if l_key[g] == (high | np.uint64(e_offset[j] + SIZE_PREFIX_SIZE)):
                verdict[g] = SAME
                pointed[j] = True
                marked += 1
    return marked
