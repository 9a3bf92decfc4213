"""What the passes share: the bookie's dirs, the options, and each file scanned once."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from bookie.layout import BookieDirs
from diskio.kernels import be_i32_at
from diskio.mapped import DiskError, read_bytes
from entrylogs.arrays import EntryLogArrays
from entrylogs.scan import DigestPlan, scan_entry_log
from formats.errors import FormatError
from formats.ids import LedgerId
from formats.entry import V2_MARKER
from formats.journal import KEY_AT, KEY_LENGTH_AT, SCOPED_PREFIX_SIZE, RecordKind, classify_body
from formats.lastmark import LastMark, parse_last_mark
from formats.metadata import LedgerMetadata
from formats.paths import CURRENT_DIR, parse_entry_log_name, parse_journal_name
from indexfiles.arrays import IndexInventory
from indexfiles import scan as index_scan
from indexfiles.listing import IndexListing
from journal.arrays import JournalArrays
from journal.scan import scan_journal

Progress = Callable[[str, int, int], None]   # (what, done, total)


@dataclass
class CheckOptions:
    metadata_dir: str | None = None
    metadata: dict[LedgerId, LedgerMetadata] | None = None   # from a metadata service (audit)
    verify_digests: bool = True
    jobs: int = 1
    progress: Progress | None = None


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
    @cached_property
    def log_scans(self) -> dict[str, EntryLogArrays | Exception]:
        files = self.log_files

        plan = self.digest_plan if self.options.verify_digests else None

        def one(lf: LogFile) -> EntryLogArrays | Exception:
            try:
                return scan_entry_log(lf.path, digests=plan)
            except (DiskError, FormatError) as e:
                return e

        out: dict[str, EntryLogArrays | Exception] = {}
        self._progress("entry logs", 0, len(files))
        if self.options.jobs > 1 and len(files) > 1:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(self.options.jobs) as pool:
                for i, (lf, res) in enumerate(zip(files, pool.map(one, files))):
                    out[lf.path] = res
                    self._progress("entry logs", i + 1, len(files))
        else:
            for i, lf in enumerate(files):
                out[lf.path] = one(lf)
                self._progress("entry logs", i + 1, len(files))
        if plan is not None:
            # Entries seen before sniffing decided their ledger (in an earlier file) are checked now.
            for res in out.values():
                if isinstance(res, EntryLogArrays) and getattr(res, "digests", None) is not None:
                    plan.recheck(res)
        return out

    @cached_property
    def journal_scans(self) -> dict[str, JournalArrays | Exception]:
        out: dict[str, JournalArrays | Exception] = {}
        for jf in self.journal_files:
            try:
                out[jf.path] = scan_journal(jf.path)
            except (DiskError, FormatError) as e:
                out[jf.path] = e
        return out

    @cached_property
    def index_listing(self) -> IndexListing:
        """The one directory walk of the .idx hierarchy (pass 1's symlinks, passes 2, 3 and 5)."""
        return index_scan.list_index_tree(self.dirs.effective_index_dirs)

    @cached_property
    def index_inventory(self) -> IndexInventory:
        return index_scan.walk_index_dirs(self.dirs.effective_index_dirs, listing=self.index_listing)

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
    def journal_facts(self) -> "JournalFacts":
        return JournalFacts.collect(self)

    @cached_property
    def metadata(self) -> dict[LedgerId, LedgerMetadata] | None:
        if self.options.metadata is not None:
            return self.options.metadata
        if self.options.metadata_dir is None:
            return None
        from bookie.metadata_dir import load_metadata_dir
        md, errors = load_metadata_dir(self.options.metadata_dir)
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


@dataclass
class JournalFacts:
    """Per ledger, what the journals say: master key, fenced (before lastMark or not), explicit LAC."""

    master_keys: dict[LedgerId, bytes] = field(default_factory=dict)
    fenced: dict[LedgerId, bool] = field(default_factory=dict)       # value: fence record before lastMark
    explicit_lac: dict[LedgerId, bytes] = field(default_factory=dict)
    pending: list[tuple[str, int, LedgerId, int]] = field(default_factory=list)  # after lastMark: (path, off, lid, eid)

    @classmethod
    def collect(cls, ctx: CheckContext) -> "JournalFacts":
        f = cls()
        for jf in ctx.journal_files:
            scan = ctx.journal_scans.get(jf.path)
            if not isinstance(scan, JournalArrays):
                continue
            mark = ctx.effective_last_mark(jf.dir_index)
            recs = scan.records
            kinds = recs["kind"]
            after = _after_mark(jf.journal_id, recs["offset"], mark)
            scope, ledger = recs["scope"], recs["ledger"]
            # Each kind fills its own table, in record order: the same tables as one pass over every record.
            fences = np.flatnonzero(kinds == RecordKind.FENCE)
            for s, l, a in zip(scope[fences].tolist(), ledger[fences].tolist(), after[fences].tolist()):
                lid = LedgerId(s, l)
                f.fenced[lid] = f.fenced.get(lid, False) or not a
            keyed = np.flatnonzero((kinds == RecordKind.LEDGER_KEY) | (kinds == RecordKind.EXPLICIT_LAC))
            if len(keyed):
                f._read_keys(jf.path, recs[keyed])
            data = np.flatnonzero((kinds == RecordKind.DATA) & after)
            f.pending.extend((jf.path, o, LedgerId(s, l), e) for o, s, l, e in zip(
                recs["offset"][data].tolist(), scope[data].tolist(), ledger[data].tolist(), recs["entry"][data].tolist()))
        return f

    def _read_keys(self, path: str, recs: np.ndarray) -> None:
        """Master keys and explicit LACs of the ledger-key and explicit-LAC records ``recs`` of one journal."""
        # The scanner already classified and bounds-checked each record. A positioned read of just its
        # body keeps memory flat (mapping pulls in read-around pages).
        offsets, sizes = recs["offset"].tolist(), recs["size"].tolist()
        with open(path, "rb", buffering=0) as fh:
            fd = fh.fileno()
            bodies = [os.pread(fd, n, off + 4) for off, n in zip(offsets, sizes)]
        starts = np.cumsum([0] + sizes[:-1], dtype=np.int64)
        joined = b"".join(bodies)
        raw = np.frombuffer(joined, np.uint8)
        at = np.where(raw[np.minimum(starts, max(len(raw) - 1, 0))] >= V2_MARKER, SCOPED_PREFIX_SIZE, 0) \
            if len(raw) else np.zeros(len(starts), np.int64)
        # (clipped into the bytes: only the ledger-key records' values are used, and those hold them)
        key_lengths = be_i32_at(raw, np.minimum(starts + at + KEY_LENGTH_AT, len(raw) - 4)).tolist() \
            if len(raw) >= 4 else [0] * len(starts)
        for body, kind, s, l, off, a, n in zip(bodies, recs["kind"].tolist(), recs["scope"].tolist(),
                                               recs["ledger"].tolist(), offsets, at.tolist(), key_lengths):
            lid = LedgerId(s, l)
            if kind == RecordKind.LEDGER_KEY:
                self.master_keys[lid] = body[a + KEY_AT:a + KEY_AT + n]
            else:
                self.explicit_lac[lid] = classify_body(body, offset=off, path=path).lac_body


def _after_mark(journal_id: int, offsets: np.ndarray, mark: LastMark | None) -> np.ndarray:
    """Which records a restart would replay: every record at or after (mark journal, mark offset)."""
    if mark is None:
        return np.ones(len(offsets), dtype=bool)
    if journal_id < mark.log_id:
        return np.zeros(len(offsets), dtype=bool)
    if journal_id > mark.log_id:
        return np.ones(len(offsets), dtype=bool)
    return offsets >= mark.offset
