"""What the passes share: the bookie's dirs, the options, and each fact of the check computed once
and kept (the file lists, the scans of fsck.scans, the journals' facts, the metadata, the digest plan).

With ``--jobs`` above 1, fsck.api starts the heavy scans as the check begins, on two background
lanes (fsck.lanes; ``prefetch``: the journal scans; the entry-log scans then the journals' digests);
the passes that need them wait for them (``shared``), while passes 1-3 walk and read the .idx files
on the calling thread.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from bkdisk.bookie.layout import BookieDirs
from bkdisk.digests.plan import DigestPlan
from bkdisk.diskio.failures import without_frames
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.entrylogs.scan import EntryLogScanArrays
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.lastmark import LastMark
from bkdisk.formats.paths import CURRENT_DIR, parse_entry_log_name, parse_journal_name
from bkdisk.fsck import scans
from bkdisk.fsck.digest_decisions import DigestDecisions
from bkdisk.fsck.index_hints import INDEX_HINT_BYTES, INDEX_HINT_SHARE, IndexHints
from bkdisk.fsck.lanes import Lanes, Progress
from bkdisk.fsck.log_read_ahead import LogReadAhead
from bkdisk.fsck.scan_store import HASHED_LOG_SHARE, JOURNAL_SHARE, LOG_SHARE, ScanStore
from bkdisk.indexfiles.arrays import IndexInventory
from bkdisk.journal.arrays import JournalArrays
from bkdisk.journal.facts import JournalFacts, RecordFacts

if TYPE_CHECKING:   # the metadata formats (protobuf) load only when metadata is read
    from collections.abc import Mapping

    import numpy as np

    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.indexfiles.listing_ahead import ListingAhead


@dataclass
class CheckOptions:
    metadata_dir: str | None = None
    metadata: Mapping[LedgerId, LedgerMetadata] | None = None   # a mapping: a dict, or a MetadataView (audit)
    verify_digests: bool = True
    payload_hash: str | None = None   # also hash each entry's payload in the one entry-log scan (the audit)
    # keep each entry's LAC and ledger length in the log scans' rows (the audit's replica rows read them;
    # no pass does: a check alone keeps entrylogs.arrays.CHECK_ENTRY_DTYPE)
    entry_lengths: bool = False
    # Entry logs (paths) walked without digests or payload hashes: the scrub's light check reads their
    # entry headers only, not the payload pages (audit/scrub_task.py)
    light_logs: frozenset[str] = frozenset()
    # A light log's record offsets from its last deep read (None: not known), asked ahead of its walk
    light_hints: Callable[[str], np.ndarray | None] | None = None
    jobs: int = 1
    progress: Progress | None = None
    memory: MemoryLimit = field(default_factory=MemoryLimit)   # --memory-limit, --tmp-dir
    # The index dirs' listing, being made by another process as the check starts (the command's)
    index_listing: ListingAhead | None = None


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
    # Per scanned log with a ledgers map, its differences from the entries (entrylogs.map_check), found
    # by the log's scan thread as each scan ends: pass 4 reads them instead of counting after every scan.
    map_differences: dict[str, list] = field(default_factory=dict)
    # Per journal scanned whole, its facts, taken by the scan as it handed its records over (a spilled
    # journal is then read back once, by pass 6's digests, not also for its facts).
    journal_record_facts: dict[str, RecordFacts] = field(default_factory=dict)

    @cached_property
    def spill(self) -> SpillFolder:
        """Where what does not fit in memory goes (refused in the bookie's dirs; removed by ``close``)."""
        return SpillFolder(self.options.memory, self.dirs.all_dirs)

    @cached_property
    def scan_store(self) -> ScanStore:
        share = LOG_SHARE if self.options.payload_hash is None else HASHED_LOG_SHARE
        return ScanStore(self.spill, self.options.memory.share(share))

    @cached_property
    def journal_store(self) -> ScanStore:
        return ScanStore(self.spill, self.options.memory.share(JOURNAL_SHARE))

    def close(self) -> None:
        self.__dict__["spill"].close() if "spill" in self.__dict__ else None

    # --- files -------------------------------------------------------------------------------
    def listing(self, d: str) -> list[str]:
        try:
            return sorted(os.listdir(os.path.join(d, CURRENT_DIR)))
        except OSError as e:
            # What was not listed is unknown: pass 1 reports it, repair plans refuse to act on it.
            self.unlisted[os.path.join(d, CURRENT_DIR)] = without_frames(e)
            return []

    def not_listed(self, d: str) -> bool:
        """Whether dir ``d``'s ``current`` folder could not be listed (``listing`` met an error)."""
        return os.path.join(d, CURRENT_DIR) in self.unlisted

    @cached_property
    def log_files(self) -> list[LogFile]:
        out = []
        for di, d in enumerate(self.dirs.ledger_dirs):
            for n in self.listing(d):
                lid = parse_entry_log_name(n)
                if lid is not None:
                    out.append(LogFile(di, lid, os.path.join(d, CURRENT_DIR, n)))
        return out

    @cached_property
    def journal_files(self) -> list[JournalFile]:
        out = []
        for di, d in enumerate(self.dirs.journal_dirs):
            ids = sorted((i, n) for n in self.listing(d) if (i := parse_journal_name(n)) is not None)
            out += [JournalFile(di, i, os.path.join(d, CURRENT_DIR, n)) for i, n in ids]
        return out

    @property
    def per_dir_log_ids(self) -> bool:
        """DbLedgerStorage numbers entry logs per ledger dir; index-file storage numbers them globally."""
        return self.dirs.storage_kind == "rocksdb"

    # --- scans (each file once) -----------------------------------------------------------------
    @property
    def log_scans(self) -> dict[str, EntryLogScanArrays | Exception]:
        return self.shared("log_scans", self.scan_logs)

    @property
    def journal_scans(self) -> dict[str, JournalArrays | Exception]:
        return self.shared("journal_scans", self.scan_journals)

    @property
    def log_digest_decisions(self) -> DigestDecisions:
        """The digest plan's decisions as the entry-log scans left them (before the journals' checks
        decide more): what pass 4 reports as sniffed."""
        self.shared("log_scans", self.scan_logs)   # (waited for: the scans record the decisions)
        return self.lanes.results.get("log_digest_decisions") or DigestDecisions.of(None)

    def scan_logs(self) -> dict[str, EntryLogScanArrays | Exception]:
        return scans.scan_logs(self)

    def scan_journals(self) -> dict[str, JournalArrays | Exception]:
        return scans.scan_journals(self)

    # --- background lanes (--jobs > 1) ---------------------------------------------------------------
    lanes: Lanes = field(default_factory=Lanes, repr=False)

    def shared(self, name: str, compute: Callable[[], Any]) -> Any:
        """The result ``name``: the background's when ``prefetch`` started it (waited for here; its
        exception raised here), else ``compute()`` on this thread, once."""
        return self.lanes.shared(name, compute, self.progress)

    def prefetch(self, lanes: list[list[tuple[str, Callable[[], Any]]]]) -> None:
        """Run each lane's tasks (name, work) in order on a thread of its own; ``shared(name)`` waits.

        The caller orders the tasks that share the digest plan in one lane, as a sequential check runs
        them, so every result is the one a sequential check computes. What the tasks read of this
        context (the file lists, the digest plan with its metadata) is computed here first."""
        # Computed on this thread before the lanes read them (``unlisted`` is filled here).
        ready = [self.journal_files, self.log_files, self.scan_store, self.journal_store]
        if self.options.verify_digests:
            ready.append(self.digest_plan)
        self.lanes.start(lanes)

    def keep_going(self) -> None:
        """Raise (on a background thread) when the check has stopped: the work left is not wanted."""
        self.lanes.keep_going()

    def stop_background(self) -> None:
        """Stop the background after the file it is on, and wait for it (a check that failed)."""
        ahead = self.__dict__.get("read_ahead")
        if ahead is not None:   # first: a lane's walk may wait for the log it is asking for
            ahead.stop(wait=False)
        self.lanes.stop()
        if ahead is not None:
            ahead.stop()

    def computed(self, name: str) -> bool:
        """Whether the cached property ``name`` was computed already."""
        return name in self.__dict__

    @cached_property
    def read_ahead(self) -> LogReadAhead:
        """The entry logs' pages asked for ahead of their walks (``start``ed as the check begins)."""
        hints = self.index_hints
        return LogReadAhead([lf.path for lf in self.log_files], self.options.light_logs, self.options.light_hints,
                            index_hints=hints.of if hints is not None else None)

    @cached_property
    def index_hints(self) -> IndexHints | None:
        """Where the records of the logs walked light start, from the .idx files' locations (index-file
        storage: pass 1 walks them)."""
        light = self.options.light_logs
        if not light or self.dirs.storage_kind == "rocksdb":
            return None
        logs = []
        for lf in self.log_files:
            if lf.path in light:
                try:
                    logs.append((lf.path, lf.log_id, os.stat(lf.path).st_size))
                except OSError:   # (its walk reports it)
                    continue
        hints = IndexHints(logs, self.options.memory.share(INDEX_HINT_SHARE) // INDEX_HINT_BYTES)
        if self.computed("index_inventory"):
            hints.give(self.index_inventory.locations)
        return hints

    @cached_property
    def index_inventory(self) -> IndexInventory:
        """The one walk of the .idx hierarchy, each file read as it is listed (pass 1's symlinks,
        passes 2, 3 and 5)."""
        inv = None
        try:
            inv = scans.index_inventory(self)
            return inv
        finally:   # (a walk that failed gives no offsets)
            hints = self.__dict__.get("index_hints")
            if hints is not None:
                hints.give(None if inv is None else inv.locations)

    @cached_property
    def relocation_leftovers(self) -> dict[LedgerId, str]:
        return scans.relocation_leftovers(self.index_inventory)

    @cached_property
    def last_marks(self) -> dict[str, LastMark | Exception]:
        return scans.read_last_marks(self)

    @property
    def last_mark_names(self) -> list[str]:
        """The lastMark files BookKeeper reads, per journal dir: ``lastMark`` with one journal dir,
        ``lastMark.<i>`` with several (Journal's LastLogMark, one per journal); it reads no other."""
        n = len(self.dirs.journal_dirs)
        return ["lastMark"] if n <= 1 else [f"lastMark.{i}" for i in range(n)]

    def effective_last_mark(self, journal_dir_index: int) -> LastMark | None:
        """The largest mark over the ledger dirs for one journal dir, as BookKeeper's readLog keeps."""
        want = self.last_mark_names[journal_dir_index] if journal_dir_index < len(self.last_mark_names) else None
        marks = [m for p, m in self.last_marks.items() if os.path.basename(p) == want and isinstance(m, LastMark)]
        return max(marks) if marks else None

    # --- facts from the journals -----------------------------------------------------------------
    @cached_property
    def journal_facts(self) -> JournalFacts:
        return JournalFacts.collect(((jf.journal_id, jf.path, self.journal_scans.get(jf.path),
                                      self.effective_last_mark(jf.dir_index)) for jf in self.journal_files),
                                    self.journal_record_facts)

    @cached_property
    def metadata(self) -> Mapping[LedgerId, LedgerMetadata] | None:
        """Ledger metadata. A folder is streamed once, keeping the ledgers that place entries on this
        bookie; any other ledger is read from its file when a pass asks for it (a bookie of a cluster
        with millions of ledgers holds only its own). Iterating gives the ledgers kept."""
        if self.options.metadata is not None:
            return self.options.metadata
        if self.options.metadata_dir is None:
            return None
        from bkdisk.bookie.layout import bookie_id_of
        from bkdisk.bookie.metadata_dir import bookie_metadata_dir
        md, errors = bookie_metadata_dir(self.options.metadata_dir, bookie_id_of(self.dirs))
        if errors:   # its ledger would look deleted from metadata (an orphan, its entries garbage): stop
            raise errors[0]
        return md

    @cached_property
    def digest_plan(self) -> DigestPlan:
        """Digest type and password per ledger from metadata; the scanner sniffs the rest (CRC32C,
        CRC32) and records what it decided, shared by every file of this check."""
        if not self.metadata:
            return DigestPlan()   # digest_plan({}), without importing the metadata formats
        from bkdisk.bookie.metadata_dir import digest_plan
        return digest_plan(self.metadata)

    def progress(self, what: str, done: int, total: int) -> None:
        if self.options.progress is not None:
            self.options.progress(what, done, total)

