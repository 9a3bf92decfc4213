"""The scans a check keeps between passes, within the memory limit.

Each entry log's and journal's scan is kept whole while the per-entry arrays of all kept scans fit in
their share of ``--memory-limit``; past it, a scan's per-entry arrays (entries, digests, payload
hashes; a journal's records) go to the check's spill folder and are read back, one file's worth, each
time a pass asks for them. A pass reads one file's scan at a time, so the check holds at most one
file's arrays beyond the share. The arrays read back are the ones written: every pass gives the same
findings either way.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import numpy as np

from bkdisk.diskio.array_file import ArrayFile
from bkdisk.diskio.payload_hashes import PayloadHashes
from bkdisk.diskio.spill import SpillFolder
from bkdisk.entrylogs.scan import EntryLogScanArrays
from bkdisk.journal.arrays import JournalArrays

LOG_SHARE = 0.10        # of --memory-limit: entry-log scans kept in memory
JOURNAL_SHARE = 0.15    # journal scans: room for a 2 GiB journal of small records at the default limit
LOCATION_SHARE = 0.10   # the index files' locations (fsck.context.index_inventory)


class SpilledLogScan(EntryLogScanArrays):
    """An entry log's scan whose per-entry arrays are in the spill folder (each access reads them)."""

    _files: dict

    @property
    def entries(self) -> np.ndarray:   # type: ignore[override]
        return self._files["entries"].load()

    @property
    def digests(self) -> np.ndarray | None:   # type: ignore[override]
        f = self._files.get("digests")
        return None if f is None else f.load()

    @property
    def payload_hashes(self) -> PayloadHashes | None:   # type: ignore[override]
        f = self._files.get("hashes")
        if f is None:
            return None
        return PayloadHashes(f.load(), self._files["hashed"].load())

    def recheck(self, plan) -> int:
        """The digest plan's recheck on the arrays read back, written back when it changed a row."""
        whole = held(self)
        n = plan.recheck(whole)
        if n:
            self._files["digests"].store(whole.digests)
            if whole.payload_hashes is not None:
                self._files["hashes"].store(whole.payload_hashes.raw)
                self._files["hashed"].store(whole.payload_hashes.present)
        return n


class SpilledJournalScan(JournalArrays):
    _files: dict

    @property
    def records(self) -> np.ndarray:   # type: ignore[override]
        return self._files["records"].load()

    @property
    def digest_facts(self) -> np.ndarray | None:   # type: ignore[override]
        f = self._files.get("facts")
        return None if f is None else f.load()


def held(scan: SpilledLogScan) -> EntryLogScanArrays:
    """The scan with its arrays read back, as a scan kept in memory is."""
    fields = {k: v for k, v in vars(scan).items() if k != "_files"}
    fields.update(entries=scan.entries, digests=scan.digests, payload_hashes=scan.payload_hashes)
    return EntryLogScanArrays(**fields)


def _log_bytes(scan: EntryLogScanArrays) -> int:
    n = scan.entries.nbytes + (scan.digests.nbytes if scan.digests is not None else 0)
    h = scan.payload_hashes
    return n + (h.raw.nbytes + h.present.nbytes if h is not None else 0)


class ScanStore:
    """Keeps finished scans while their arrays fit in ``limit`` bytes; spills the ones after."""

    def __init__(self, folder: SpillFolder, limit: int):
        self.folder, self.limit, self.held = folder, limit, 0
        self.lock = threading.Lock()
        self.spilled = 0

    def _fits(self, n: int) -> bool:
        with self.lock:
            if self.held + n <= self.limit:
                self.held += n
                return True
            self.spilled += 1
            return False

    def keep_log(self, scan):
        if not isinstance(scan, EntryLogScanArrays) or len(scan.entries) == 0 or self._fits(_log_bytes(scan)):
            return scan
        out = object.__new__(SpilledLogScan)
        out.__dict__.update({k: v for k, v in vars(scan).items() if k not in ("entries", "digests", "payload_hashes")})
        files = {"entries": ArrayFile(self.folder, scan.entries, "entries")}
        if scan.digests is not None:
            files["digests"] = ArrayFile(self.folder, scan.digests, "digests")
        if scan.payload_hashes is not None:
            h = scan.payload_hashes
            files["hashes"] = ArrayFile(self.folder, h.raw, "hashes")
            files["hashed"] = ArrayFile(self.folder, h.present, "hashed")
        out._files = files
        return out

    def keep_journal(self, scan):
        if not isinstance(scan, JournalArrays):
            return scan
        facts = scan.digest_facts
        if self._fits(scan.records.nbytes + (0 if facts is None else facts.nbytes)):
            return scan
        out = object.__new__(SpilledJournalScan)
        out.__dict__.update({k: v for k, v in vars(scan).items() if k not in ("records", "digest_facts")})
        out._files = {"records": ArrayFile(self.folder, scan.records, "journal")}
        if facts is not None:
            out._files["facts"] = ArrayFile(self.folder, facts, "journal-facts")
        return out


def log_scan_parts(scan: EntryLogScanArrays, rows: int) -> Iterator[EntryLogScanArrays]:
    """The scan in parts of at most ``rows`` entries, in order: the same scan with its per-entry arrays
    (entries, digests, payload hashes) cut to the part's rows. A spilled scan's parts are read from
    the spill folder one at a time, so a caller holds one part beyond what the check keeps."""
    n = entry_count(scan)
    for lo in range(0, n, max(1, rows)):
        hi = min(n, lo + max(1, rows))
        if isinstance(scan, SpilledLogScan):
            files = scan._files
            part = {k: f.load(lo, hi) for k, f in files.items()}
            fields = {k: v for k, v in vars(scan).items() if k != "_files"}
            hashes = PayloadHashes(part["hashes"], part["hashed"]) if "hashes" in part else None
            fields.update(entries=part["entries"], digests=part.get("digests"), payload_hashes=hashes)
            yield EntryLogScanArrays(**fields)
        else:
            h = scan.payload_hashes
            yield dataclasses.replace(
                scan, entries=scan.entries[lo:hi], digests=None if scan.digests is None else scan.digests[lo:hi],
                payload_hashes=None if h is None else PayloadHashes(h.raw[lo:hi], h.present[lo:hi]))


def entry_count(scan: EntryLogScanArrays) -> int:
    """Entries of a scan, without reading a spilled one's arrays back."""
    return len(scan._files["entries"]) if isinstance(scan, SpilledLogScan) else len(scan.entries)


def recheck(plan, scan) -> int:
    """``plan.recheck(scan)`` for a scan kept either way."""
    return scan.recheck(plan) if isinstance(scan, SpilledLogScan) else plan.recheck(scan)
