"""Digest verification of a journal's data records, window by window, through diskio/digests.py.

Windows hold whole records, so resident memory stays bounded on multi-GiB journals; a record larger
than a window is streamed through its digest alone. Each data record's entry header is read from
the window for what the digest check needs: its entry format and its cumulative length.
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import kernel
from bkdisk.diskio.digests import DIGEST_BAD, DigestPlan, verify_entry_digests, verify_streamed
from bkdisk.diskio.kernels import be_i64
from bkdisk.diskio.mapped import map_window
from bkdisk.formats.entry import V1_LENGTH_AT, V2_MARKER, V2_PREFIX_SIZE
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.journal import RECORD_LENGTH_SIZE, RecordKind
from bkdisk.journal.arrays import JournalArrays

JOURNAL_WINDOW = 64 << 20
# The entries the digest check takes: the journal record's prefix and size, the entry's ids, format, length.
ENTRY_FIELDS = np.dtype([("offset", "<i8"), ("size", "<i4"), ("format", "u1"), ("scope", "<u8"), ("ledger", "<u8"),
                         ("entry", "<i8"), ("length", "<i8")])
# A journal record and an entry-log record are both a 4-byte length, then the entry.
assert RECORD_LENGTH_SIZE == SIZE_PREFIX_SIZE


def data_records(records: np.ndarray) -> np.ndarray:
    """Indices of the data records (the records that hold entries) among a journal's ``records``."""
    return np.flatnonzero(records["kind"] == RecordKind.DATA)


def bad_data_records(scan: JournalArrays, plan: DigestPlan, window: int = JOURNAL_WINDOW) -> np.ndarray:
    """The rows among ``scan``'s data records whose digest is bad (``plan`` is updated with what
    sniffing decides), verified over windows of at most ``window`` bytes of whole records."""
    records = scan.records   # (read once: a spilled scan reads its file at each access)
    idx = data_records(records)
    if len(idx) == 0:
        return np.zeros(0, np.int64)
    window = min(JOURNAL_WINDOW, window)
    # The data records are taken a window's worth at a time, not copied whole.
    starts = records["offset"][idx].astype(np.int64, copy=False)
    ends = starts + RECORD_LENGTH_SIZE + records["size"][idx]
    big = ends - starts > window   # a record no window holds is streamed through its digest alone
    huge = np.flatnonzero(big)
    bad_parts = []
    i = 0
    while i < len(idx):
        if big[i]:
            r = records[idx[i]]
            if verify_streamed(scan.path, int(r["offset"]), int(r["size"]), (int(r["scope"]), int(r["ledger"])),
                               plan) == DIGEST_BAD:
                bad_parts.append(np.array([i]))
            i += 1
            continue
        w0 = int(starts[i])
        j = max(i + 1, int(np.searchsorted(ends, w0 + window, side="right")))
        nxt = np.searchsorted(huge, i)
        if nxt < len(huge):
            j = min(j, int(huge[nxt]))
        with map_window(scan.path, w0, int(ends[j - 1]) - w0) as arr:
            rows, _ = verify_entry_digests(arr, _entries(arr, records[idx[i:j]], w0), plan, base=w0)
            bad_parts.append(i + np.flatnonzero(rows["status"] == DIGEST_BAD))
            del arr
        i = j
    return np.concatenate(bad_parts) if bad_parts else np.zeros(0, np.int64)


def _entries(arr: np.ndarray, part: np.ndarray, base: int) -> np.ndarray:
    """ENTRY_FIELDS rows of the data records ``part``, whose bytes ``arr`` holds from file offset ``base``."""
    ents = np.empty(len(part), dtype=ENTRY_FIELDS)
    ents["offset"], ents["size"] = part["offset"], part["size"]
    ents["scope"], ents["ledger"], ents["entry"] = part["scope"], part["ledger"], part["entry"]
    _format_and_length(arr, base, ents["offset"], ents["format"], ents["length"])
    return ents


@kernel
def _format_and_length(arr, base, offset, out_format, out_length):
    """Each record's entry format (a V2 header is the V1 fields behind a prefix) and cumulative length."""
    for i in range(offset.size):
        body = offset[i] + RECORD_LENGTH_SIZE - base
        fields = body
        out_format[i] = 1
        if arr[body] >= V2_MARKER:
            out_format[i] = 2
            fields = body + V2_PREFIX_SIZE
        out_length[i] = be_i64(arr, fields + V1_LENGTH_AT)
