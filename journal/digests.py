"""Digest verification of a journal's data records, window by window, through diskio/digests.py.

Windows hold whole records, so resident memory stays bounded on multi-GiB journals; a record larger
than a window is streamed through its digest alone. Each data record's entry header is read from
the window for what the digest check needs: its entry format and its cumulative length.
"""
from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from bkdisk.diskio.config import kernel
from bkdisk.diskio.digest_kernels import FACT_V2
from bkdisk.diskio.digests import DIGEST_BAD, DigestPlan, digests_by_facts, verify_entry_digests, verify_streamed
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
# The same without the length, for a check from the records' digest facts (the length is read only when asked).
FACT_FIELDS = np.dtype([("offset", "<i8"), ("size", "<i4"), ("format", "u1"), ("scope", "<u8"), ("ledger", "<u8"),
                        ("entry", "<i8")])
# A journal record and an entry-log record are both a 4-byte length, then the entry.
assert RECORD_LENGTH_SIZE == SIZE_PREFIX_SIZE


def data_records(records: np.ndarray) -> np.ndarray:
    """Indices of the data records (the records that hold entries) among a journal's ``records``."""
    return np.flatnonzero(records["kind"] == RecordKind.DATA)


def bad_data_records(scan: JournalArrays, plan: DigestPlan, window: int = JOURNAL_WINDOW) -> np.ndarray:
    """The rows among ``scan``'s data records whose digest is bad (``plan`` is updated with what
    sniffing decides), verified over windows of at most ``window`` bytes of whole records."""
    records = scan.records   # (read once: a spilled scan reads its file at each access)
    facts = scan.digest_facts
    idx = data_records(records)
    if len(idx) == 0:
        return np.zeros(0, np.int64)
    window = min(JOURNAL_WINDOW, window)
    # The data records are taken a window's worth at a time, not copied whole.
    cuts = np.zeros(len(idx) + 1, np.int64)
    n_cuts = _window_cuts(records["offset"], records["size"], idx, window, cuts)
    bad_parts = []
    for i, j in zip(cuts[:n_cuts - 1].tolist(), cuts[1:n_cuts].tolist()):
        part = np.take(records, idx[i:j])
        w0 = int(part["offset"][0])
        length = int(part["offset"][-1]) + RECORD_LENGTH_SIZE + int(part["size"][-1]) - w0
        if length > window:   # a record no window holds is streamed through its digest alone
            r = part[0]
            if verify_streamed(scan.path, int(r["offset"]), int(r["size"]), (int(r["scope"]), int(r["ledger"])),
                               plan) == DIGEST_BAD:
                bad_parts.append(np.array([i]))
            continue
        if facts is None:
            with map_window(scan.path, w0, length) as arr:
                rows, _ = verify_entry_digests(arr, _entries(arr, part, w0), plan, base=w0)
                del arr
            status = rows["status"]
        else:
            status = _verify_by_facts(scan.path, part, np.take(facts, idx[i:j]), plan, w0, length)
        bad_parts.append(i + np.flatnonzero(status == DIGEST_BAD))
    return np.concatenate(bad_parts) if bad_parts else np.zeros(0, np.int64)


@kernel
def _window_cuts(offset, size, idx, window, cuts):
    """Cut the data records ``idx`` into runs whose bytes span at most ``window`` (a record larger than
    that is a run of its own): ``cuts[:n]`` are the runs' bounds (in ``idx``), n returned."""
    n = 0
    i = 0
    cuts[n] = 0
    n += 1
    while i < idx.size:
        w0 = offset[idx[i]]
        j = i + 1
        if offset[idx[i]] + RECORD_LENGTH_SIZE + size[idx[i]] - w0 <= window:
            while j < idx.size and offset[idx[j]] + RECORD_LENGTH_SIZE + size[idx[j]] <= w0 + window:
                j += 1
        cuts[n] = j
        n += 1
        i = j
    return n


def _verify_by_facts(path: str, part: np.ndarray, facts: np.ndarray, plan: DigestPlan, w0: int,
                     length: int) -> np.ndarray:
    """The digest statuses verify_entry_digests gives the data records ``part``, from their digest
    facts; the window of the journal that holds them [w0, w0 + length) is mapped only for what the
    facts do not settle.

    When the facts settle every status (every V1 record's ledger decided, the usual case once the
    entry logs are checked, or shown CRC32C by its first records), one kernel gives them and what the
    plan learns, as the general check would (diskio.digests.digests_by_facts); otherwise the general
    check decides (and sniffs) in order."""
    settled = digests_by_facts(plan, part["size"], facts & FACT_V2, part["ledger"], facts)
    if settled is not None:
        return settled[2]
    ents = np.empty(len(part), dtype=FACT_FIELDS)
    ents["offset"], ents["size"] = part["offset"], part["size"]
    ents["scope"], ents["ledger"], ents["entry"] = part["scope"], part["ledger"], part["entry"]
    ents["format"] = np.where(facts & FACT_V2, 2, 1)
    with ExitStack() as stack:
        mapped: list[np.ndarray] = []

        def window() -> np.ndarray:
            if not mapped:
                mapped.append(stack.enter_context(map_window(path, w0, length)))
            return mapped[0]

        def lengths() -> np.ndarray:
            return _entries(window(), part, w0)["length"]

        rows, _ = verify_entry_digests(window, ents, plan, base=w0, facts=facts, lengths=lengths)
        mapped.clear()
    return rows["status"]


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
