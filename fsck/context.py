"""What the passes share: the bookie's dirs, the options, and each file scanned once.

With ``--jobs`` above 1, fsck.api starts the heavy scans as the check begins, on two background
threads (``prefetch``: the journal scans; the entry-log scans then the journals' digests); the passes
that need them wait for them (``shared``), while passes 1-3 walk and read the .idx files on the
calling thread.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable


from bookie.layout import BookieDirs
from diskio.mapped import DiskError, read_bytes
from diskio.spill import ChunkedArray, MemoryLimit, SpillFolder
from entrylogs.arrays import EntryLogArrays
from entrylogs.scan import DigestPlan, scan_entry_log
from formats.errors import FormatError
from formats.ids import LedgerId
from formats.lastmark import LastMark, parse_last_mark
from formats.paths import CURRENT_DIR, parse_entry_log_name, parse_journal_name
from fsck import scan_store
from fsck.journal_facts import JournalFacts
from indexfiles.arrays import IndexInventory
from indexfiles import scan as index_scan
from indexfiles.listing import IndexListing
from journal.arrays import JournalArrays
from journal.scan import scan_journal

if TYPE_CHECKING:   # the metadata formats (protobuf) load only when metadata is read
    from collections.abc import Mapping
    from concurrent.futures import Future

    from formats.metadata import LedgerMetadata

Progress = Callable[[str, int, int], None]   # (what, done, total)


@dataclass
class CheckOptions:
    metadata_dir: str | None = None
    metadata: Mapping[LedgerId, LedgerMetadata] | None = None   # a mapping: a dict, or a MetadataView (audit)
    verify_digests: bool = True
    payload_hash: str | None = None   # also hash each entry's payload in the one entry-log scan (the audit)
    jobs: int = 1
    progress: Progress | None = None
    memory: MemoryLimit = field(default_factory=MemoryLimit)   # --memory-limit, --tmp-dir


@dataclass
class LogFile:
    dir_index: int
    log_id: int
    path: str


@dataclass
class JournalFile:
    dir_index: int
    journal_id: int
    path: str


@dataclass
class CheckContext:
    dirs: BookieDirs
    options: CheckOptions = field(default_factory=CheckOptions)
    unreadable: dict[str, str] = field(default_factory=dict)   # path -> reason, reported once in pass 1
    unlisted: dict[str, OSError] = field(default_factory=dict)  # <dir>/current folders that could not be listed

    @cached_property
    def spill(self) -> SpillFolder:
        """Where what does not fit in memory goes (refused in the bookie's dirs; removed by ``close``)."""
        return SpillFolder(self.options.memory, self.dirs.all_dirs)

    @cached_property
    def scan_store(self) -> scan_store.ScanStore:
        return scan_store.ScanStore(self.spill, self.options.memory.share(scan_store.LOG_SHARE))

    @cached_property
    def journal_store(self) -> scan_store.ScanStore:
        return scan_store.ScanStore(self.spill, self.options.memory.share(scan_store.JOURNAL_SHARE))

    def close(self) -> None:
        self.__dict__["spill"].close() if "spill" in self.__dict__ else None

    # --- files -------------------------------------------------------------------------------
    def _listing(self, d: str) -> list[str]:
        try:
            return sorted(os.listdir(os.path.join(d, CURRENT_DIR)))
        except OSError as e:
            # What was not listed is unknown: pass 1 reports it, repair plans refuse to act on it.
            self.unlisted[os.path.join(d, CURRENT_DIR)] = e
            return []

    @cached_property
    def log_files(self) -> list[LogFile]:
        out = []
        for di, d in enumerate(self.dirs.ledger_dirs):
            for n in self._listing(d):
                lid = parse_entry_log_name(n)
                if lid is not None:
                    out.append(LogFile(di, lid, os.path.join(d, CURRENT_DIR, n)))
        return out

    @cached_property
    def journal_files(self) -> list[JournalFile]:
        out = []
        for di, d in enumerate(self.dirs.journal_dirs):
            ids = sorted((parse_journal_name(n), n) for n in self._listing(d) if parse_journal_name(n) is not None)
            out += [JournalFile(di, i, os.path.join(d, CURRENT_DIR, n)) for i, n in ids]
        return out

    @property
    def per_dir_log_ids(self) -> bool:
        """DbLedgerStorage numbers entry logs per ledger dir; index-file storage numbers them globally."""
        return self.dirs.storage_kind == "rocksdb"

    # --- scans (each file once) -----------------------------------------------------------------
    @property
    def log_scans(self) -> dict[str, EntryLogArrays | Exception]:
        return self.shared("log_scans", self.scan_logs)

    @property
    def journal_scans(self) -> dict[str, JournalArrays | Exception]:
        return self.shared("journal_scans", self.scan_journals)

    @property
    def log_digest_decisions(self) -> dict[tuple[int, int], tuple[int, int]]:
        """The digest plan's decisions as the entry-log scans left them (before the journals' checks
        decide more): what pass 4 reports as sniffed."""
        self.log_scans
        return self._results.get("log_digest_decisions", {})

    def scan_logs(self) -> dict[str, EntryLogArrays | Exception]:
        """Every entry log scanned (``--jobs`` threads over files), digests checked with the shared plan."""
        files = self.log_files
        plan = self.digest_plan if self.options.verify_digests else None
        progress = self._background_progress if self._on_background() else self._progress

        def one(lf: LogFile) -> EntryLogArrays | Exception:
            self.keep_going()
            try:
                return self.scan_store.keep_log(scan_entry_log(lf.path, digests=plan, window=self.options.memory.window,
                                                               payload_hash=self.options.payload_hash))
            except (DiskError, FormatError) as e:
                return e

        out: dict[str, EntryLogArrays | Exception] = {}
        progress("entry logs", 0, len(files))
        if self.options.jobs > 1 and len(files) > 1:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(self.options.jobs) as pool:
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
                if isinstance(res, EntryLogArrays) and getattr(res, "digests", None) is not None:
                    scan_store.recheck(plan, res)
            with plan.lock:
                self._results["log_digest_decisions"] = dict(plan.decided)
        return out

    def scan_journals(self) -> dict[str, JournalArrays | Exception]:
        out: dict[str, JournalArrays | Exception] = {}
        for jf in self.journal_files:
            self.keep_going()
            try:
                out[jf.path] = self.journal_store.keep_journal(scan_journal(jf.path, window=self.options.memory.window))
            except (DiskError, FormatError) as e:
                out[jf.path] = e
        return out

    # --- background threads (--jobs > 1) -----------------------------------------------------------
    _results: dict[str, Any] = field(default_factory=dict, repr=False)
    _futures: dict[str, "Future"] = field(default_factory=dict, repr=False)
    _stop: Any = field(default=None, repr=False)          # threading.Event: the check failed, stop
    _threads: list = field(default_factory=list, repr=False)
    _owner: Any = field(default=None, repr=False)         # the thread that runs the passes
    _done: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)   # progress from the background

    def shared(self, name: str, compute: Callable[[], Any]) -> Any:
        """The result ``name``: the background's when ``prefetch`` started it (waited for here; its
        exception raised here), else ``compute()`` on this thread, once."""
        fut = self._futures.get(name)
        if fut is not None:
            self._wait(fut)   # (at once when done)
        elif name not in self._results:
            self._results[name] = compute()
        return self._results[name]

    def prefetch(self, lanes: list[list[tuple[str, Callable[[], Any]]]]) -> None:
        """Run each lane's tasks (name, work) in order on a thread of its own; ``shared(name)`` waits.

        A task that needs another's result waits for it like a pass does. The caller orders the tasks
        that share the digest plan in one lane, as a sequential check runs them, so every result is
        the one a sequential check computes. What the tasks read of this context (the file lists, the
        digest plan with its metadata) is computed here first. An exception ends its lane; ``shared``
        raises it for that task and every later one of the lane."""
        import threading
        from concurrent.futures import Future
        self.journal_files, self.log_files   # listed on this thread (``unlisted`` is filled here)
        self.scan_store, self.journal_store
        if self.options.verify_digests:
            self.digest_plan
        self._stop, self._owner = threading.Event(), threading.current_thread()
        for lane in lanes:
            work = [(name, fn, Future()) for name, fn in lane]
            self._futures.update((name, fut) for name, _fn, fut in work)
            self._threads.append(threading.Thread(target=self._run_lane, args=(work,), name="fsck-scans"))
        for t in self._threads:
            t.start()

    def _run_lane(self, work: list) -> None:
        for i, (name, fn, fut) in enumerate(work):
            fut.set_running_or_notify_cancel()
            try:
                self._results[name] = fn()
            except BaseException as e:   # noqa: BLE001 (raised again on the thread that waits)
                for _n, _f, later in work[i:]:
                    later.set_exception(e)
                return
            fut.set_result(None)

    def keep_going(self) -> None:
        """Raise (on a background thread) when the check has stopped: the work left is not wanted."""
        if self._stop is not None and self._stop.is_set() and self._on_background():
            raise _Stopped()

    def stop_background(self) -> None:
        """Stop the background after the file it is on, and wait for it (a check that failed)."""
        if self._stop is not None:
            self._stop.set()
        for t in self._threads:
            t.join()

    def _on_background(self) -> bool:
        import threading
        return self._owner is not None and threading.current_thread() is not self._owner

    def _background_progress(self, what: str, done: int, total: int) -> None:
        self._done[what] = (done, total)   # shown by the waiting thread: the progress callback is not shared

    def _wait(self, fut: "Future") -> None:
        from concurrent.futures import wait
        mine = not self._on_background()   # only the passes' thread calls the progress callback
        while not wait([fut], timeout=0.2).done:
            for what, (done, total) in list(self._done.items()) if mine else ():
                self._progress(what, done, total)
        for what in list(self._done) if mine else ():   # the last state, shown once
            self._progress(what, *self._done.pop(what))
        fut.result()

    @cached_property
    def index_listing(self) -> IndexListing:
        """The one directory walk of the .idx hierarchy (pass 1's symlinks, passes 2, 3 and 5)."""
        return index_scan.list_index_tree(self.dirs.effective_index_dirs)

    @cached_property
    def index_inventory(self) -> IndexInventory:
        from indexfiles.arrays import LOCATION_DTYPE
        sink = ChunkedArray(LOCATION_DTYPE, self.options.memory.share(scan_store.LOCATION_SHARE), self.spill, "locations")
        return index_scan.walk_index_dirs(self.dirs.effective_index_dirs, listing=self.index_listing, sink=sink)

    @cached_property
    def relocation_leftovers(self) -> dict[LedgerId, str]:
        """``<hex>.idx.rloc`` files whose ledger has no ``.idx``: BookKeeper renames them to ``.idx``
        at startup (IndexPersistenceMgr), so they are that ledger's index."""
        from formats.paths import parse_index_name
        inv = self.index_inventory
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

    @cached_property
    def last_marks(self) -> dict[str, LastMark | Exception]:
        """Every lastMark file in the ledger dirs (``lastMark`` or ``lastMark.<i>``)."""
        out: dict[str, LastMark | Exception] = {}
        for d in self.dirs.ledger_dirs:
            for n in self._listing(d):
                if n == "lastMark" or (n.startswith("lastMark.") and n[9:].isdigit()):
                    p = os.path.join(d, CURRENT_DIR, n)
                    try:
                        out[p] = parse_last_mark(read_bytes(p), path=p)
                    except (DiskError, FormatError) as e:
                        out[p] = e
        return out

    def effective_last_mark(self, journal_dir_index: int) -> LastMark | None:
        """The largest mark over the ledger dirs for one journal dir, as BookKeeper's readLog keeps."""
        want = "lastMark" if len(self.dirs.journal_dirs) <= 1 else f"lastMark.{journal_dir_index}"
        marks = [m for p, m in self.last_marks.items() if os.path.basename(p) == want and isinstance(m, LastMark)]
        return max(marks) if marks else None

    # --- facts from the journals -----------------------------------------------------------------
    @cached_property
    def journal_facts(self) -> JournalFacts:
        return JournalFacts.collect(self)

    @cached_property
    def metadata(self) -> Mapping[LedgerId, LedgerMetadata] | None:
        """Ledger metadata. A folder is streamed once, keeping the ledgers that place entries on this
        bookie; any other ledger is read from its file when a pass asks for it (a bookie of a cluster
        with millions of ledgers holds only its own). Iterating gives the ledgers kept."""
        if self.options.metadata is not None:
            return self.options.metadata
        if self.options.metadata_dir is None:
            return None
        from bookie.layout import bookie_id_of
        from bookie.metadata_dir import bookie_metadata_dir
        md, errors = bookie_metadata_dir(self.options.metadata_dir, bookie_id_of(self.dirs))
        self.metadata_errors = errors
        return md

    metadata_errors: list[FormatError] = field(default_factory=list)

    @cached_property
    def digest_plan(self) -> DigestPlan:
        """Digest type and password per ledger from metadata; the scanner sniffs the rest (CRC32C,
        CRC32) and records what it decided, shared by every file of this check."""
        if not self.metadata:
            return DigestPlan()   # digest_plan({}), without importing the metadata formats
        from bookie.metadata_dir import digest_plan
        return digest_plan(self.metadata)

    def _progress(self, what: str, done: int, total: int) -> None:
        if self.options.progress is not None:
            self.options.progress(what, done, total)


class _Stopped(Exception):
    """The check stopped (it failed elsewhere): the background leaves the rest of its work."""
