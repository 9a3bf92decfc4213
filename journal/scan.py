"""Jitted journal scanner: every record (data, ledger key, fence, force, explicit LAC, padding) and the end.

``scan_journal`` returns the same JournalArrays as ``journal.arrays.scan_journal_reference`` (its
pure-Python twin; tests compare them). The walk kernel is journal/walk.py; diskio/windowed.py
drives it window by window (``map_window``), the position carried across windows. The end of the
journal is classified like the reference reader: clean (a zero length then zeros), end of file, torn
tail, invalid record, or garbage after a zero length. The one piece of text not built from numbers,
the reason a record body does not classify, is taken from the reference ``classify_body`` for that
single body.

Compiled kernels are cached (see diskio/config.py for NUMBA_CACHE_DIR / BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

import os
from contextlib import ExitStack

import numpy as np

from bkdisk.diskio.config import crc_variant
from bkdisk.diskio.scan_sink import ScanSink
from bkdisk.diskio.windowed import (
    DEFAULT_WINDOW,
    MIN_WINDOW,
    MODE,
    MODE_DONE,
    NEXT_WINDOW,
    RESUME,
    Columns,
    FileSource,
    grown_beside,
    new_state,
    read_head,
    room_worth_freeing,
    walk_windows,
)
from bkdisk.formats import journal as fj
from bkdisk.formats.errors import FormatError
from bkdisk.formats.journal import RecordKind
from bkdisk.formats.paths import parse_journal_name
from bkdisk.journal.arrays import JOURNAL_DTYPE, JournalArrays
from bkdisk.journal.digests import JOURNAL_WINDOW
from bkdisk.journal.reader import EndKind
from bkdisk.journal.scan_parts import ChunkedJournalScan
from bkdisk.journal.walk import (
    END_AT,
    END_CLASSIFY,
    END_CLEAN,
    END_EOF,
    END_GARBAGE,
    END_KIND,
    END_NEGATIVE,
    END_PAD_LENGTH,
    END_PAD_SHORT,
    END_REASON,
    END_TORN,
    END_VALUE,
    END_VERSION,
    END_ZERO_BODY,
    IN_ZERO_TAIL,
    LOOKAHEAD,
    POSITION,
    RECORDS,
    STATE_SLOTS,
    WALKING,
    walk_journal_records,
)

__all__ = ["DEFAULT_WINDOW", "scan_journal"]


def _end_text(state: np.ndarray, n: int, body: bytes | None, version: int, path: str) -> str:
    """The reference reader's text for how the journal ends."""
    reason, pos, value = int(state[END_REASON]), int(state[END_AT]), int(state[END_VALUE])
    left = n - pos - fj.RECORD_LENGTH_SIZE
    texts = {
        END_EOF: "end of file",
        END_CLEAN: "zero length, zero-filled tail",
        END_GARBAGE: f"zero length, but non-zero byte at offset {value}",
        END_PAD_SHORT: "padding record cut short",
        END_PAD_LENGTH: f"padding length {value} with {n - pos - fj.PADDING_HEAD_SIZE} bytes left",
        END_NEGATIVE: f"negative record length {value}",
        END_TORN: f"record length {value} with {left} bytes left",
        END_ZERO_BODY: f"record length {value} over an all-zero body",
    }
    if reason in texts:
        return texts[reason]
    if reason == END_VERSION:
        return f"{RecordKind(value).name} record in a version {version} journal"
    assert body is not None, "a record that does not classify has its body read"
    try:
        fj.classify_body(body, offset=pos, path=path)
    except FormatError as e:
        return f"{e.expected}, found {e.found}"
    raise AssertionError(f"{path}: record at {pos}: jitted and reference classification disagree")


def scan_journal(path: str | os.PathLike, start: int | None = None, *, window: int = DEFAULT_WINDOW,
                 data=None, digest_facts: bool = False, sink: ScanSink | None = None) -> JournalArrays:
    """Scan a journal from its first record (or byte offset ``start``, e.g. a lastMark) to its end.

    Equal to ``scan_journal_reference(path, data, start)``. ``data`` scans in-memory bytes instead.
    A journal version outside 1..6 raises FormatError, as the reference does. ``digest_facts``: also
    take each data record's digest facts (digests.kernels.entry_facts) from the window that
    holds it, so that its digest check (journal/digests.py) need not read the journal again.
    ``sink``: the records (and facts) go to the sink's columns part by part as the walk goes, within
    the room it gives (diskio.scan_sink), and the result is a ``ChunkedJournalScan``
    (journal.scan_parts) that reads them back a range at a time.
    """
    p = os.fspath(path)
    window = max(int(window), MIN_WINDOW)
    head, n = read_head(p, data, fj.JOURNAL_VERSION_HEADER.sizeof())   # DiskError for a FIFO or device
    version = fj.parse_header(head, path=p)
    header_size = fj.header_size(version)
    pos = header_size if start is None else int(start)
    if pos < 0:
        raise ValueError(f"journal scan start {pos} is negative")
    state = new_state(STATE_SLOTS)
    state[MODE], state[POSITION], state[RESUME] = WALKING, pos, pos
    records = Columns(JOURNAL_DTYPE, 1024)
    unclassified: list[bytes] = []
    # (a record larger than the digest check's window is streamed by it, facts or not)
    max_crc, variant = min(window, JOURNAL_WINDOW), crc_variant()
    facts = [np.zeros(len(records.arrays[0]) if digest_facts else 0, np.uint8)]   # beside the records

    def run_kernel(buf: np.ndarray, base: int) -> int:
        status = walk_journal_records(buf, base, n, version, state, *records.arrays, facts[0], variant, max_crc)
        if status == NEXT_WINDOW and state[MODE] == IN_ZERO_TAIL:
            # Zeros so far: a hole (of a sparse file) reads as zeros, so the check resumes after it.
            state[POSITION] = state[RESUME] = max(int(state[POSITION]), src.next_data(int(state[POSITION])))
        return status

    columns = (sink.column("records", JOURNAL_DTYPE), sink.column("facts", np.uint8) if digest_facts else None) \
        if sink is not None else None

    def grow(_status: int) -> None:
        used = int(state[RECORDS])
        # (with a sink, projected for the journal only as far as the room has left; once the records
        # spill the table holds a part: doubled, never projected)
        most = None if columns is None else columns[0].rows_to_hold(used)
        walked = int(state[POSITION]) - pos if columns is None or most is not None else 0
        records.grow_if_full(used, walked, n - pos, most)
        if digest_facts:
            facts[0] = grown_beside(facts[0], records, used)

    def hand_over(least: int) -> None:
        """The records so far to the sink's columns when they are ``least`` bytes or more and the columns
        do not leave them in the table (ScanColumn.holds); the table is then filled again from its first row."""
        used = int(state[RECORDS])
        if columns is None or used == 0 or used * JOURNAL_DTYPE.itemsize < least:
            return
        held = [columns[0].holds(records.table(0, used)), columns[1] is None or columns[1].holds(facts[0][:used])]
        if all(held):
            return
        columns[0].append(records.table(0, used))
        if columns[1] is not None:
            columns[1].append(facts[0][:used])
        state[RECORDS] = 0
        if len(records.arrays[0]) * JOURNAL_DTYPE.itemsize > 2 * least:   # (grown while held)
            records.restart(least // JOURNAL_DTYPE.itemsize)
            if digest_facts:
                facts[0] = np.zeros(len(records.arrays[0]), np.uint8)

    def keep_unclassified_body(buf: np.ndarray, base: int) -> None:
        if state[MODE] == MODE_DONE and state[END_REASON] == END_CLASSIFY:
            at = int(state[END_AT]) - base
            length = fj.RECORD_LENGTH.parse(buf[at:at + fj.RECORD_LENGTH_SIZE].tobytes())
            body_at = at + fj.RECORD_LENGTH_SIZE
            unclassified.append(buf[body_at:body_at + length].tobytes())
        hand_over(sink.part_bytes if sink is not None else 0)

    with ExitStack() as stack:
        src = FileSource(p, data, stack)
        walk_windows(src, state, n, window, LOOKAHEAD, run_kernel, grow, keep_unclassified_body)
    if columns is not None:   # the last records: the table is not filled again
        columns[0].append(records.finished(int(state[RECORDS])), copy=False)
        if columns[1] is not None:
            columns[1].append(facts[0][:int(state[RECORDS])], copy=False)
        state[RECORDS] = 0
    count = int(state[RECORDS])
    body = unclassified[0] if unclassified else None
    out = JournalArrays(p, parse_journal_name(os.path.basename(p)), version, header_size, n,
                        records.finished(count), EndKind(int(state[END_KIND])),
                        int(state[END_AT]), _end_text(state, n, body, version, p))
    if sink is not None:
        return ChunkedJournalScan.of(out, sink)
    if digest_facts:
        out.digest_facts = facts[0][:count].copy() if room_worth_freeing(len(facts[0]), count) else facts[0][:count]
    return out
