"""Record arrays an entry-log scan produces, and the reference (pure-Python) way to produce them.

The jitted scanner (entrylogs/scan.py) returns the same EntryLogArrays; tests compare the two.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from bkdisk.digests.payload_hashes import PayloadHashes
from bkdisk.diskio.distinct import distinct, run_starts
from bkdisk.entrylogs.ledgers_map import LedgersMap
from bkdisk.entrylogs.reader import read_entry_log
from bkdisk.formats import entrylog as fe
from bkdisk.formats.errors import FormatError

ENTRY_DTYPE = np.dtype([
    ("offset", "<i8"),      # of the size prefix; the location's position is just past the prefix
    ("size", "<i4"),        # stored entry size (without the prefix)
    ("format", "u1"),       # entry format 1 or 2
    ("scope", "<u8"),
    ("ledger", "<u8"),
    ("entry", "<i8"),
    ("lac", "<i8"),
    ("length", "<i8"),
])
# ENTRY_DTYPE without the LAC and ledger length the entry carries: the rows a check keeps, as no pass
# reads those two after the scan (a digest check that must infer a digest's length reads the length
# from the entry's header). 37 bytes of 53 in every row held, spilled and read back.
CHECK_ENTRY_DTYPE = np.dtype([(name, ENTRY_DTYPE[name]) for name in ENTRY_DTYPE.names or ()
                              if name not in ("lac", "length")])
PROBLEM_DTYPE = np.dtype([("offset", "<i8"), ("reason", "u1"), ("resumed_at", "<i8")])


def distinct_ledgers(ids: np.ndarray) -> np.ndarray:
    """The distinct ids of a column of ledger ids, sorted: one per run first, as a log holds each
    ledger's entries in runs (a log written a ledger at a time is a run each)."""
    if len(ids) == 0:
        return ids[:0]
    return distinct(ids[np.concatenate(([True], ids[1:] != ids[:-1]))])


def ledger_sums(scope: np.ndarray, ledger: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (scope, ledger) of rows, in id order, and the sum of the rows' ``weight`` (int64) for each.
    Each run of one ledger is summed first and only the runs are sorted: a log holds a ledger's
    entries in runs."""
    if len(scope) == 0:
        return scope[:0], ledger[:0], np.zeros(0, np.int64)
    runs = run_starts(scope, ledger)
    scope, ledger, weight = scope[runs], ledger[runs], np.add.reduceat(weight, runs)
    # Where logs interleave ledgers the runs are nearly as many as the rows. One scope (a bookie without
    # scoped ledgers) is one key to sort, a third of the two keys' time; sums need no stable order.
    order = np.argsort(ledger) if not np.any(scope != scope[0]) else np.lexsort((ledger, scope))
    s, l = scope[order], ledger[order]
    first = run_starts(s, l)
    return s[first], l[first], np.add.reduceat(weight[order], first)


@dataclass
class EntryLogArrays:
    path: str
    log_id: int | None
    size: int
    header: fe.EntryLogHeader | None
    header_error: FormatError | None
    ledgers_map: LedgersMap | None
    map_error: FormatError | None
    data_end: int
    entries: np.ndarray      # ENTRY_DTYPE
    problems: np.ndarray     # PROBLEM_DTYPE

    def computed_ledgers_map(self) -> dict[tuple[int, int], int]:
        """Per (scope, ledger): the sum of its entries' sizes, size prefixes included, as the ledgers map says."""
        e = self.entries
        s, l, sums = ledger_sums(e["scope"], e["ledger"], e["size"].astype(np.int64) + fe.SIZE_PREFIX_SIZE)
        return dict(zip(zip(s.tolist(), l.tolist()), sums.tolist()))


@dataclass
class EntryLogScanArrays(EntryLogArrays):
    """EntryLogArrays plus, when digests were checked, one DIGEST_DTYPE row per entry."""

    digests: np.ndarray | None = None
    payload_hashes: PayloadHashes | None = None   # when a payload hash was asked for
    # The entries counted into the ledgers map's rows as the scan went (entrylogs.map_sums.MapCounts),
    # when asked for and every entry's ledger is a row of the map.
    map_counts: tuple | None = None


def scan_entry_log_reference(path: str | os.PathLike, data: bytes | None = None) -> EntryLogArrays:
    """EntryLogArrays built from the reference reader, one Python step per record."""
    s = read_entry_log(path, data)
    ents = np.array([(r.offset, r.size, r.format_version, r.scope_id, r.ledger_id, r.entry_id,
                      r.last_add_confirmed, r.length) for r in s.records], dtype=ENTRY_DTYPE)
    probs = np.array([(p.offset, int(p.reason), p.resumed_at) for p in s.problems], dtype=PROBLEM_DTYPE)
    return EntryLogArrays(s.path, s.log_id, s.size, s.header, s.header_error, s.ledgers_map, s.map_error,
                          s.data_end, ents, probs)
