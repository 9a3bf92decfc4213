"""Jitted entry-log scanner: header and ledgers map, the framing walk with resync, every entry's digest.

``scan_entry_log`` returns the same EntryLogArrays as ``entrylogs.arrays.scan_entry_log_reference``
(its pure-Python twin, which tests compare it to), without Python work per record. The walk kernel
is entrylogs/walk.py; diskio/windowed.py drives it window by window (``map_window``, default
64 MiB), so memory stays bounded whatever the file size. A record is emitted only by a window that
holds all of its bytes, which lets the digest check (digests/verify.py, shared with the
journal checks) run on the same window.

Compiled kernels are cached (see diskio/config.py for NUMBA_CACHE_DIR / BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import numpy as np

from bkdisk.digests.payload_hashes import PayloadHashes
from bkdisk.digests.plan import DigestPlan
from bkdisk.digests.verify import DIGEST_DTYPE, recheck_digests, verify_entry_digests
from bkdisk.diskio.kernels import readonly
from bkdisk.diskio.scan_sink import ScanSink
from bkdisk.diskio.windowed import (
    DEFAULT_WINDOW,
    MIN_WINDOW,
    MODE,
    RESUME,
    Columns,
    FileSource,
    concat_rows,
    grown_beside,
    new_state,
    walk_windows,
)
from bkdisk.entrylogs.arrays import ENTRY_DTYPE, PROBLEM_DTYPE, EntryLogScanArrays
from bkdisk.entrylogs.map_sums import MapCounter
from bkdisk.entrylogs.reader import read_frame
from bkdisk.entrylogs.scan_parts import ChunkedLogScan, LogOutput
from bkdisk.entrylogs.walk import (
    ENTRIES,
    HEADER_LOOKAHEAD,
    LAST_NONZERO,
    LAST_NONZERO_UNKNOWN,
    NEED_LAST_NONZERO,
    NEED_WHOLE_FILE,
    POSITION,
    PROBLEMS,
    STATE_SLOTS,
    WALKING,
    walk_entry_records,
)
from bkdisk.formats import entrylog as fe
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE
from bkdisk.formats.paths import parse_entry_log_name

__all__ = ["DEFAULT_WINDOW", "EntryLogScanArrays", "scan_entry_log"]

_SMALLEST_RECORD = fe.SIZE_PREFIX_SIZE + ENTRY_V1_HEADER_SIZE


DIGEST_THREAD = "entry-log-digests"   # the name of a scan's digest-checking thread


def _table_rows(sink: ScanSink, last: int, row_bytes: int) -> int:
    """Rows of the table a scan goes on in after handing ``last`` rows over to be held: as many again
    and an eighth (so the next part seldom grows its table), at least a part's."""
    return max(sink.part_bytes // row_bytes, last + last // 8)


def scan_entry_log(path: str | os.PathLike, *, window: int = DEFAULT_WINDOW, data=None,
                   digests: DigestPlan | None = None, payload_hash: str | None = None,
                   pipeline: bool | None = None, digest_facts: bool = False,
                   sink: ScanSink | None = None, header_hints: np.ndarray | None = None,
                   hints_asked: bool = False, entry_dtype: np.dtype = ENTRY_DTYPE,
                   count_map: bool = False) -> EntryLogScanArrays:
    """Scan one entry log: header, ledgers map, every framed entry, damage and resync.

    Equal to ``scan_entry_log_reference(path, data)`` in every field it shares with it. ``window``
    bounds the bytes mapped at once (a record larger than it gets a window of its own size).
    ``data`` scans in-memory bytes instead of reading ``path``. With ``digests`` (a DigestPlan,
    updated in place) or ``payload_hash``, every entry's digest is checked too (``.digests``), by
    default on a second thread window by window while the walk goes on (``pipeline``: None for
    when the machine has more than one CPU). ``digest_facts``: the walk also takes each entry's
    digest facts (digests.kernels.entry_facts) while the entry is in cache, and the check of a
    window reads its bytes again only for what they do not settle: less work in all, more of it on
    the walk's thread (for callers that run several scans at once).

    ``sink``: the per-entry arrays (entries, digests, payload hashes) go to the sink's columns part
    by part as the walk goes, within the room it gives (diskio.scan_sink), and the result is a
    ``ChunkedLogScan`` (entrylogs.scan_parts) that reads them back a range at a time: no array of
    every entry of the log is made.

    ``header_hints``: where the log's records were found before (sorted offsets, e.g. by the scrub's
    last deep read of this same file). A walk without digests touches each record's header only:
    their pages are asked of the kernel at once, and no other page is read ahead (a log of large
    entries is not read whole to walk its headers). Only advice: the walk and its result are the same.
    ``hints_asked``: their pages were asked for already (fsck.log_read_ahead); the walk only reads no
    other page ahead.

    ``entry_dtype``: the entries' rows, ENTRY_DTYPE or some of its fields (CHECK_ENTRY_DTYPE: a check
    keeps no LAC or ledger length); the walk's other fields are not kept.

    ``count_map``: the entries are counted into the rows of the log's ledgers map as they are handed
    over (``map_counts``, entrylogs.map_sums): a comparison of the map with them reads nothing back.
    """
    p = os.fspath(path)
    window = max(int(window), MIN_WINDOW)
    if pipeline is None:
        pipeline = (os.cpu_count() or 1) > 1
    check = digests is not None or payload_hash is not None
    plan = digests if digests is not None else (DigestPlan() if check else None)
    with ExitStack() as stack:
        src = FileSource(p, data, stack)
        res = EntryLogScanArrays(p, parse_entry_log_name(os.path.basename(p)), src.size, None, None, None, None, 0,
                                 np.zeros(0, entry_dtype), np.zeros(0, PROBLEM_DTYPE))
        if check:
            res.digests = np.zeros(0, DIGEST_DTYPE)
            res.payload_hashes = PayloadHashes.empty() if payload_hash else None
        if src.size == 0:
            return res  # a preallocated log that was never written
        frame = read_frame(src.read, src.size, p)
        res.header, res.header_error, res.ledgers_map, res.map_error = frame.header, frame.header_error, \
            frame.ledgers_map, frame.map_error
        end = res.data_end = frame.data_end
        if header_hints is not None and not check:
            src.will_need(header_hints[header_hints < end], HEADER_LOOKAHEAD, asked=hints_asked)
        has_map = res.ledgers_map is not None

        state = new_state(STATE_SLOTS)
        state[MODE], state[POSITION], state[RESUME] = WALKING, fe.HEADER_SIZE, fe.HEADER_SIZE
        state[LAST_NONZERO] = LAST_NONZERO_UNKNOWN
        # about one entry per 2 KiB of a window to start with (a sink's table, handed over past a part:
        # two parts), grown when full; never more than the log can hold
        row_bytes = entry_dtype.itemsize
        first = max(1024, min(window, end) // 2048, 2 * sink.part_bytes // row_bytes if sink else 0)
        capacity = int(min(max(end - fe.HEADER_SIZE, 0) // _SMALLEST_RECORD + 1, first))
        entries, problems = Columns(entry_dtype, capacity, kernel=ENTRY_DTYPE), Columns(PROBLEM_DTYPE, 16)
        whole_file = [readonly(np.zeros(0, np.uint8))]   # mapped only when a resync needs it
        out = LogOutput(sink, check, payload_hash is not None, entry_dtype)
        if count_map and has_map:
            out.counter = MapCounter.of_map(res.ledgers_map)
        if sink is not None and res.ledgers_map is not None:
            sink.take(res.ledgers_map.nbytes)
        emitted = [0]
        # Each entry's digest facts, taken by the walk while the entry is in cache: the digest check
        # of its window reads the bytes again only for what they do not settle.
        with_facts = check and digest_facts
        facts = [np.zeros(len(entries.arrays[0]) if with_facts else 0, np.uint8)]
        variant = plan.crc_variant if plan is not None else 0

        def run_kernel(buf: np.ndarray, base: int) -> int:
            return walk_entry_records(buf, base, whole_file[0], end, has_map, state, *entries.arrays,
                                      *problems.arrays, facts[0], variant)

        def on_request(status: int) -> None:
            if status == NEED_LAST_NONZERO:
                state[LAST_NONZERO] = src.last_nonzero(end, window)
            elif status == NEED_WHOLE_FILE:
                whole_file[0] = src.whole()
            else:   # FULL
                used = int(state[ENTRIES])
                # (with a sink, projected for the file only as far as the room has left; once the entries
                # spill the table holds a part: doubled, never projected)
                most = out.rows_to_hold(used)
                walked = int(state[POSITION]) - fe.HEADER_SIZE if sink is None or most is not None else 0
                entries.grow_if_full(used, walked, end - fe.HEADER_SIZE, most)
                problems.grow_if_full(int(state[PROBLEMS]))
                if with_facts:
                    facts[0] = grown_beside(facts[0], entries, used)

        def new_table(rows: int) -> None:
            """A table of ``rows`` to go on in (the job of a window keeps the views it was given)."""
            entries.restart(rows)
            if with_facts:
                facts[0] = np.zeros(len(entries.arrays[0]), np.uint8)

        def after_window(buf: np.ndarray, base: int):
            lo, hi = emitted[0], int(state[ENTRIES])
            emitted[0] = hi
            # A view: growing the columns while the job runs moves later rows, never these.
            table, table_facts = entries.table(lo, hi), facts[0][lo:hi] if with_facts else None
            if sink is not None and hi * row_bytes >= sink.part_bytes:
                if out.holds(entries.table(0, hi)):
                    # The table's rows become a held part as they are (the job reads them there) and the
                    # walk goes on in a new table: a log's entries are never copied to grow one table.
                    out.keep_entries(entries.table(0, hi))
                    new_table(_table_rows(sink, hi, row_bytes))
                else:
                    # The table is filled again from its first row: the job keeps a copy of its rows.
                    table = table.copy()
                    table_facts = None if table_facts is None else table_facts.copy()
                    out.add_entries(entries.table(0, hi))
                    if len(entries.arrays[0]) * row_bytes > 2 * sink.part_bytes:   # (grown while held)
                        new_table(sink.part_bytes // row_bytes)
                state[ENTRIES] = emitted[0] = 0
            if hi == lo or not check:
                return None

            def job() -> None:
                rows, hashes = verify_entry_digests(buf, table, plan, base=base, payload_hash=payload_hash,
                                                    facts=table_facts)
                out.add_digests(rows, hashes)
            return job

        # The digests of one window are checked on a second thread while the next window is walked
        # (both kernels release the GIL); one thread, so the plan sees the windows in order.
        background = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix=DIGEST_THREAD)) \
            if check and pipeline else None
        walk_windows(src, state, end, window, HEADER_LOOKAHEAD, run_kernel, on_request,
                     after_window if check or sink is not None else None, background)
        res.problems = problems.finished(int(state[PROBLEMS]))
        if sink is None:
            res.entries = entries.finished(int(state[ENTRIES]))
            if out.counter is not None:
                out.counter.add(res.entries)
                res.map_counts = out.counter.counts()
            if plan is not None:
                res.digests = concat_rows(out.digest_parts, DIGEST_DTYPE)
                res.payload_hashes = PayloadHashes.concat(out.hash_parts) if payload_hash else None
                # entries checked in a window before a later window decided their ledger's type
                recheck_digests(res, plan, src.whole)
            return res
        out.last_entries(entries.finished(int(state[ENTRIES])))
        if out.counter is not None:
            res.map_counts = out.counter.counts()
        chunked = ChunkedLogScan.of(res, sink)
        if plan is not None:
            chunked.recheck(plan, src.whole)
        return chunked
