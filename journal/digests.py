"""Digest verification of a journal's data records, window by window, through digests/verify.py.

Windows hold whole records, so resident memory stays bounded on multi-GiB journals; a record larger
than a window is streamed through its digest alone. Each data record's entry header is read from
the window for what the digest check needs: its entry format and its cumulative length.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import numpy as np

from bkdisk.digests.entry_bytes import format_and_length
from bkdisk.digests.kernels import DIGEST_BAD, FACT_V2
from bkdisk.digests.plan import DigestPlan
from bkdisk.digests.verify import digests_by_facts, verify_entry_digests, verify_streamed
from bkdisk.diskio.config import kernel
from bkdisk.diskio.mapped import map_window
from bkdisk.diskio.windowed import concat_rows
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.journal import RECORD_LENGTH_SIZE, RecordKind
from bkdisk.journal.arrays import JournalArrays
from bkdisk.journal.scan_parts import record_parts

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
    window = min(JOURNAL_WINDOW, window)
    bad_parts = []
    for i, part, facts in data_record_windows(scan, window):
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
            status = _verify_by_facts(scan.path, part, facts, plan, w0, length)
        bad_parts.append(i + np.flatnonzero(status == DIGEST_BAD))
    return np.concatenate(bad_parts) if bad_parts else np.zeros(0, np.int64)


def data_record_windows(scan: JournalArrays, window: int) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
    """The scan's data records in runs whose bytes span at most ``window`` (a larger record is a run of
    its own), in order: (the run's first row among the data records, its records, their digest facts
    or None). The records are read a part at a time; a run that may go on past a part takes what it
    needs of the next (a part of data records only, the usual, is cut where it lies: no copy)."""
    carry: tuple[np.ndarray, np.ndarray | None] | None = None
    first = 0   # the carried run's first row among the data records
    for _lo, recs, facts in record_parts(scan):
        idx = data_records(recs)
        if len(idx) == len(recs):
            data, data_facts = recs, facts
        else:
            data, data_facts = np.take(recs, idx), None if facts is None else np.take(facts, idx)
        if len(data) == 0:
            continue
        if carry is not None:
            k = _run_goes_on(carry[0], data, window)
            run = concat_rows([carry[0], data[:k]], data.dtype)
            run_facts = None if data_facts is None or carry[1] is None else np.concatenate([carry[1], data_facts[:k]])
            if k == len(data):   # (the whole part is in the carried run)
                carry = (run, run_facts)
                continue
            yield first, run, run_facts
            first += len(run)
            data, data_facts, carry = data[k:], None if data_facts is None else data_facts[k:], None
        cuts = np.zeros(len(data) + 1, np.int64)
        n_cuts = _window_cuts(data["offset"], data["size"], np.arange(len(data)), window, cuts)
        for i, j in zip(cuts[:n_cuts - 2].tolist(), cuts[1:n_cuts - 1].tolist()):
            yield first + i, data[i:j], None if data_facts is None else data_facts[i:j]
        last = int(cuts[n_cuts - 2])
        carry, first = (data[last:], None if data_facts is None else data_facts[last:]), first + last
    if carry is not None and len(carry[0]):
        yield first, carry[0], carry[1]


def _run_goes_on(run: np.ndarray, data: np.ndarray, window: int) -> int:
    """How many of the first ``data`` records the run ``run`` (records before them) takes: those whose
    bytes end within ``window`` of the run's start (none after a first record larger than that)."""
    w0 = int(run["offset"][0])
    # (ascending: the records follow each other in the file)
    ends = data["offset"] + RECORD_LENGTH_SIZE + data["size"].astype(np.int64)
    return int(np.searchsorted(ends, w0 + window, side="right"))


@kernel(any_layout=("offset", "size"))
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
    plan learns, as the general check would (digests.verify.digests_by_facts); otherwise the general
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

        rows, _ = verify_entry_digests(window, ents, plan, base=w0, facts=facts)
        mapped.clear()
    return rows["status"]


def _entries(arr: np.ndarray, part: np.ndarray, base: int) -> np.ndarray:
    """ENTRY_FIELDS rows of the data records ``part``, whose bytes ``arr`` holds from file offset ``base``."""
    ents = np.empty(len(part), dtype=ENTRY_FIELDS)
    ents["offset"], ents["size"] = part["offset"], part["size"]
    ents["scope"], ents["ledger"], ents["entry"] = part["scope"], part["ledger"], part["entry"]
    format_and_length(arr, base, ents["offset"], ents["format"], ents["length"])
    return ents
