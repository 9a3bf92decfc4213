"""Each file of the bookie read once per check: the entry logs (their digests checked with the shared
plan), the journals, the lastMark files, the .idx tree; CheckContext keeps each result for every pass.

The scans write their per-record arrays into sinks of the check's ScanStores (fsck.scan_store), which
keep them within their share of ``--memory-limit`` and spill the rest part by part as they scan.
With ``--jobs`` above 1 the log and journal scans run on background lanes (fsck.lanes); a scan there
reports progress through the lanes, never the callback.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING

from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.failures import without_frames
from bkdisk.diskio.mapped import DiskError, read_bytes
from bkdisk.entrylogs.arrays import CHECK_ENTRY_DTYPE, ENTRY_DTYPE
from bkdisk.entrylogs.map_check import map_differences
from bkdisk.entrylogs.scan import EntryLogScanArrays, scan_entry_log
from bkdisk.entrylogs.scan_parts import recheck
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.lastmark import LastMark, parse_last_mark
from bkdisk.formats.paths import CURRENT_DIR, parse_index_name
from bkdisk.fsck import scan_store
from bkdisk.fsck.digest_decisions import DigestDecisions
from bkdisk.fsck.placed_locations import PlacedCheck, log_sizes
from bkdisk.indexfiles import scan as index_scan
from bkdisk.indexfiles.arrays import LOCATION_DTYPE, IndexInventory
from bkdisk.journal.arrays import JournalArrays
from bkdisk.journal.facts import RecordFacts
from bkdisk.journal.scan import scan_journal

if TYPE_CHECKING:
    from bkdisk.fsck.context import CheckContext, LogFile


def scan_logs(ctx: CheckContext) -> dict[str, EntryLogScanArrays | Exception]:
    """Every entry log scanned (``--jobs`` threads over files), digests checked with the shared plan."""
    files = ctx.log_files
    plan = ctx.digest_plan if ctx.options.verify_digests else None
    entry_dtype = ENTRY_DTYPE if ctx.options.entry_lengths else CHECK_ENTRY_DTYPE
    progress = ctx.lanes.background_progress if ctx.lanes.on_background() else ctx.progress
    # A log's digests get a thread of their own only where the cores outnumber the scans run at once;
    # else the walk checks each window itself, its entries still in cache, instead of a thread more
    # per log contending for the same cores and reading the window again.
    together = ctx.options.jobs > 1 and len(files) > 1
    pipeline = usable_cores() > (min(ctx.options.jobs, len(files)) if together else 1)

    def one(lf: LogFile) -> EntryLogScanArrays | Exception:
        ctx.keep_going()
        sink = ctx.scan_store.sink()
        light = lf.path in ctx.options.light_logs
        hints, asked = ctx.read_ahead.claim(lf.path)
        if light and not asked and ctx.options.light_hints is not None:   # (asked: the state's were looked at)
            hints = ctx.options.light_hints(lf.path)
        try:
            scan = scan_entry_log(lf.path, digests=None if light else plan, window=ctx.options.memory.window,
                                  payload_hash=None if light else ctx.options.payload_hash, digest_facts=True,
                                  count_map=True, sink=sink, header_hints=hints, hints_asked=asked,
                                  entry_dtype=entry_dtype, pipeline=pipeline)
        except (DiskError, FormatError) as e:
            sink.close()
            return without_frames(e)   # (kept as the log's result: its frames would keep the scan's arrays)
        if scan.ledgers_map is not None and scan.map_error is None and scan.size:
            ctx.map_differences[lf.path] = map_differences(scan)   # (while its last part may still be held)
        return scan

    out: dict[str, EntryLogScanArrays | Exception] = {}
    progress("entry logs", 0, len(files))
    if together:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(ctx.options.jobs, initializer=yielding_thread) as pool:
            for i, (lf, res) in enumerate(zip(files, pool.map(one, files))):
                out[lf.path] = res
                progress("entry logs", i + 1, len(files))
    else:
        for i, lf in enumerate(files):
            out[lf.path] = one(lf)
            progress("entry logs", i + 1, len(files))
    if plan is not None:
        # Entries seen before sniffing decided their ledger (in an earlier file) are checked now.
        for res in out.values():
            if isinstance(res, EntryLogScanArrays):   # (a scan without digests has nothing to recheck)
                recheck(plan, res)
        with plan.lock:
            ctx.lanes.results["log_digest_decisions"] = DigestDecisions.of(plan)
    return out


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# How far the entry-log scan threads yield to the check's other threads (Linux nice, per thread).
SCAN_NICE = 10


def yielding_thread() -> None:
    """Lower this thread's priority (and that of the threads it starts: the digest thread of each log,
    which inherits it) by SCAN_NICE. With more threads than cores, the passes' thread and the journal
    lane get a core first: the check ends when they do (the index read as it is listed, the journals'
    facts that passes 3 and 6 wait for), while the entry logs' scans fill whatever core is left; alone
    on a core a thread runs as fast at any priority. Linux only (elsewhere a priority is the process's)."""
    if sys.platform != "linux":
        return
    me = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + SCAN_NICE))
    except OSError:   # (a limit on priorities: the scan runs as it would have)
        pass


def scan_journals(ctx: CheckContext) -> dict[str, JournalArrays | Exception]:
    out: dict[str, JournalArrays | Exception] = {}
    for jf in ctx.journal_files:
        ctx.keep_going()
        # The journal's facts taken from its records as the scan hands them over (read once).
        facts = RecordFacts(jf.journal_id, jf.path, ctx.effective_last_mark(jf.dir_index))
        sink = ctx.journal_store.sink().tap("records", facts)
        try:
            out[jf.path] = scan_journal(jf.path, window=ctx.options.memory.window,
                                        digest_facts=ctx.options.verify_digests, sink=sink)
        except (DiskError, FormatError) as e:
            sink.close()
            out[jf.path] = without_frames(e)
        else:
            ctx.journal_record_facts[jf.path] = facts
    return out


def index_inventory(ctx: CheckContext) -> IndexInventory:
    """The .idx files' headers and locations (the locations within their share, else spilled, pass 3's
    check of where they point made as they go)."""
    sink = ChunkedArray(LOCATION_DTYPE, ctx.options.memory.share(scan_store.LOCATION_SHARE), ctx.spill, "locations",
                        tap=PlacedCheck(log_sizes(ctx.log_files)))
    dirs, ahead = ctx.dirs.effective_index_dirs, ctx.options.index_listing
    listing = ahead.take(dirs) if ahead is not None else None   # (None: listed here, as the files are read)
    return index_scan.walk_index_dirs(dirs, sink=sink, listing=listing)


def relocation_leftovers(inv: IndexInventory) -> dict[LedgerId, str]:
    """``<hex>.idx.rloc`` files whose ledger has no ``.idx``: BookKeeper renames them to ``.idx``
    at startup (IndexPersistenceMgr), so they are that ledger's index."""
    if not any(path.endswith(".idx.rloc") for path, _why in inv.strays):
        return {}
    indexed = {LedgerId(int(r["scope"]), int(r["ledger"])) for r in inv.files[inv.files["named"]]}
    out: dict[LedgerId, str] = {}
    for path, _why in inv.strays:
        name = os.path.basename(path)
        if name.endswith(".idx.rloc"):
            lid = parse_index_name(name[:-5])
            if lid is not None and lid not in indexed:
                out[lid] = path
    return out


def read_last_marks(ctx: CheckContext) -> dict[str, LastMark | Exception]:
    """Every lastMark file in the ledger dirs (``lastMark`` or ``lastMark.<i>``)."""
    out: dict[str, LastMark | Exception] = {}
    for d in ctx.dirs.ledger_dirs:
        names = ctx.listing(d)
        if ctx.not_listed(d):   # BookKeeper opens its lastMark files by name
            names = [n for n in ctx.last_mark_names if os.path.isfile(os.path.join(d, CURRENT_DIR, n))]
        for n in names:
            if n == "lastMark" or (n.startswith("lastMark.") and n[9:].isdigit()):
                p = os.path.join(d, CURRENT_DIR, n)
                try:
                    out[p] = parse_last_mark(read_bytes(p), path=p)
                except (DiskError, FormatError) as e:
                    out[p] = without_frames(e)
    return out
