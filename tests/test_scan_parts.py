"""A scan given a sink hands its per-record output over part by part as it scans, and the readers take
it back a bounded range at a time: neither ever holds a file's records whole (numpy's allocations, as
tracemalloc sees them, stay far below the size of the records), and both give exactly the rows, digests
and journal facts of a scan held whole. Memory is measured in a process of its own, started for the
measurement: tracemalloc counts every thread's allocations, and threads left by earlier tests (Spark's,
gRPC's) would otherwise count toward the scan's peak."""
from __future__ import annotations

import multiprocessing
import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.digests.plan import DigestPlan
from bkdisk.diskio import scan_sink
from bkdisk.diskio.scan_sink import Room, ScanColumn, ScanSink
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.scan_parts import ChunkedLogScan, log_scan_parts
from bkdisk.formats.digests import DigestType
from bkdisk.formats.lastmark import LastMark
from bkdisk.journal.digests import bad_data_records
from bkdisk.journal.facts import JournalFacts
from bkdisk.journal.scan import scan_journal
from bkdisk.journal.scan_parts import ChunkedJournalScan, data_rows
from tests.fsck_helpers import flip

WINDOW = 4096          # bytes of a file walked at once
PART = 4096            # bytes of rows a scan hands over at once
READ_ROWS = 37         # rows a reader takes at once (not a divisor of the parts handed over)


@pytest.fixture(scope="module")
def small_entries(tmp_path_factory):
    """A bookie of many tiny entries: its journals and logs hold far more record bytes than a window."""
    root = str(tmp_path_factory.mktemp("small") / "bookie")
    ledgers = [LedgerSpec(i + 1, [bytes([i, e % 251]) * 10 for e in range(3000)],
                          digest_type=[DigestType.CRC32C, DigestType.CRC32][i % 2], password=b"pw") for i in range(4)]
    w = write_bookie(BookieSpec(ledgers, entry_log_size_limit=1 << 20, journal_max_size=2 << 20,
                                journal_prealloc_size=2 << 20), root)
    return w


def _small_parts():
    ScanSink.part_bytes = PART
    scan_sink.PART_ROWS = READ_ROWS


@pytest.fixture
def small_parts(monkeypatch, tmp_path):
    monkeypatch.setattr(ScanSink, "part_bytes", PART)
    monkeypatch.setattr(scan_sink, "PART_ROWS", READ_ROWS)
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        yield folder


def _peak(fn):
    """(fn's result, the peak of the memory traced while it ran)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _alone(probe, *args):
    """probe(*args) run in a fresh process (no thread but its own), with the small parts set there."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(probe, args)


def _journal_scan_probe(j, spill):
    _small_parts()
    scan_journal(j, window=WINDOW, digest_facts=True)   # (kernels loaded before the measurement)
    with SpillFolder(MemoryLimit(1, spill)) as folder:
        chunked, peak = _peak(lambda: scan_journal(j, window=WINDOW, digest_facts=True,
                                                   sink=ScanSink(Room(0), folder)))
        assert isinstance(chunked, ChunkedJournalScan) and chunked.spilled
        return peak, chunked.records, chunked.digest_facts, (
            chunked.end_kind, chunked.end_offset, chunked.end_detail, chunked.records_end())


def _log_scan_probe(log, spill):
    _small_parts()
    kw = dict(window=WINDOW, digests=DigestPlan(), digest_facts=True, payload_hash="sha256")
    scan_entry_log(log, **kw)
    with SpillFolder(MemoryLimit(1, spill)) as folder:
        chunked, peak = _peak(lambda: scan_entry_log(log, **kw, sink=ScanSink(Room(0), folder)))
        assert isinstance(chunked, ChunkedLogScan) and chunked.spilled
        parts = list(log_scan_parts(chunked))
        return (peak, chunked.entries, chunked.digests, chunked.payload_hashes, chunked.computed_ledgers_map(),
                max(len(p.entries) for p in parts), np.concatenate([p.digests for p in parts]))


def _journal_readers_probe(j, spill, bad, mark):
    _small_parts()
    whole = scan_journal(j, window=WINDOW, digest_facts=True)
    bad_data_records(whole, DigestPlan(), WINDOW)
    del whole
    with SpillFolder(MemoryLimit(1, spill)) as folder:
        chunked = scan_journal(j, window=WINDOW, digest_facts=True, sink=ScanSink(Room(0), folder))
        got, peak = _peak(lambda: bad_data_records(chunked, DigestPlan(), WINDOW))
        facts = JournalFacts.collect([(chunked.journal_id, j, chunked, mark)])
        return (got, peak, data_rows(chunked, bad), list(facts.pending.tuples()), facts.fenced,
                facts.explicit_lac, facts.master_keys)


def _largest(paths):
    return max(paths, key=os.path.getsize)


def test_a_journal_scan_given_a_sink_never_holds_its_records_whole(small_entries, tmp_path):
    j = _largest(small_entries.journal_files)
    whole = scan_journal(j, window=WINDOW, digest_facts=True)
    assert whole.records.nbytes > 64 * PART, "the journal is too small to tell"
    peak, records, digest_facts, end = _alone(_journal_scan_probe, j, str(tmp_path))
    assert peak < whole.records.nbytes / 4, (peak, whole.records.nbytes)
    assert np.array_equal(records, whole.records)
    assert np.array_equal(digest_facts, whole.digest_facts)
    assert end == (whole.end_kind, whole.end_offset, whole.end_detail, whole.records_end())


def test_an_entry_log_scan_given_a_sink_never_holds_its_entries_whole(small_entries, tmp_path):
    log = _largest(small_entries.entry_log_files)
    whole = scan_entry_log(log, window=WINDOW, digests=DigestPlan(), digest_facts=True, payload_hash="sha256")
    assert whole.entries.nbytes > 64 * PART, "the log is too small to tell"
    peak, entries, digests, hashes, ledgers_map, most_read, read_digests = _alone(_log_scan_probe, log, str(tmp_path))
    assert peak < (whole.entries.nbytes + whole.payload_hashes.raw.nbytes) / 4, (peak, whole.entries.nbytes)
    assert np.array_equal(entries, whole.entries)
    assert np.array_equal(digests, whole.digests)
    assert hashes == whole.payload_hashes
    assert ledgers_map == whole.computed_ledgers_map()
    assert most_read <= READ_ROWS
    assert np.array_equal(read_digests, whole.digests)


@pytest.mark.parametrize("part_windows", [0.5, 0.75, 1, 2])
@pytest.mark.parametrize("room", [0, 1 << 30])
def test_a_table_handed_over_while_its_window_is_checked_keeps_the_rows_the_check_reads(
        small_entries, tmp_path, monkeypatch, part_windows, room):
    """Parts of half a window's entries to two windows', written or held: the digests of each window
    (checked on the second thread while the walk goes on in the table) are those of a scan held whole."""
    log = _largest(small_entries.entry_log_files)
    whole = scan_entry_log(log, window=WINDOW, digests=DigestPlan(), pipeline=True)
    per_window = len(whole.entries) * WINDOW // os.path.getsize(log)
    monkeypatch.setattr(ScanSink, "part_bytes", max(1, int(part_windows * per_window)) * whole.entries.itemsize)
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        got = scan_entry_log(log, window=WINDOW, digests=DigestPlan(), pipeline=True,
                             sink=ScanSink(Room(room), folder))
        assert got.spilled == (room == 0)
        assert np.array_equal(got.entries, whole.entries) and np.array_equal(got.digests, whole.digests)
        got.close()


def test_held_parts_give_the_rows_of_a_scan_held_whole(small_entries, small_parts):
    log = _largest(small_entries.entry_log_files)
    whole = scan_entry_log(log, window=WINDOW, digests=DigestPlan())
    room = Room(1 << 30)
    held = scan_entry_log(log, window=WINDOW, digests=DigestPlan(), sink=ScanSink(room, small_parts))
    assert isinstance(held, ChunkedLogScan) and not held.spilled and room.used > 0
    assert np.array_equal(held.entries, whole.entries) and np.array_equal(held.digests, whole.digests)
    assert held.computed_ledgers_map() == whole.computed_ledgers_map()
    held.close()
    assert room.used == 0


def test_journal_readers_take_a_spilled_scan_a_part_at_a_time(small_entries, tmp_path):
    j = _largest(small_entries.journal_files)
    whole = scan_journal(j, window=WINDOW, digest_facts=True)
    data = np.flatnonzero(whole.records["kind"] == 0)
    want = np.array([3, len(data) // 2, len(data) - 1])   # digests that fail: early, mid-journal, the last record
    for k in want.tolist():
        r = whole.records[data[k]]
        flip(j, int(r["offset"]) + 4 + int(r["size"]) - 3)
    whole = scan_journal(j, window=WINDOW, digest_facts=True)
    assert np.array_equal(bad_data_records(whole, DigestPlan(), WINDOW), want)
    # A mark past the journal's middle: the records after it are pending, those before are not.
    mark = LastMark(whole.journal_id, int(whole.records["offset"][len(whole.records) // 2]))
    got, peak, (at, rows, n), pending, fenced, explicit_lac, master_keys = \
        _alone(_journal_readers_probe, j, str(tmp_path), want, mark)
    assert np.array_equal(got, want)
    assert peak < whole.records.nbytes / 4, (peak, whole.records.nbytes)
    assert n == len(data) and np.array_equal(at, data[want]) and np.array_equal(rows, whole.records[data[want]])
    held = JournalFacts.collect([(whole.journal_id, j, whole, mark)])
    assert pending == list(held.pending.tuples()) and fenced == held.fenced
    assert explicit_lac == held.explicit_lac and master_keys == held.master_keys


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12), st.integers(0, 600), st.data())
def test_a_scan_column_reads_back_what_was_appended_held_or_spilled(tmp_path_factory, sizes, room_bytes, data):
    """Parts appended while the room holds them, then (all of them) in the file: any range reads back the
    rows appended, any range written back is read back, and closing gives the room back."""
    rows = np.zeros(sum(sizes), [("a", "<i8"), ("b", "u1")])
    rows["a"], rows["b"] = np.arange(len(rows)), np.arange(len(rows)) % 251
    room = Room(room_bytes)
    with SpillFolder(MemoryLimit(1, str(tmp_path_factory.mktemp("col")))) as folder:
        col = ScanColumn(rows.dtype, room, folder)
        at = 0
        for n in sizes:
            table = rows[at:at + n].copy()
            col.append(table)
            table[:] = 0   # (the scanner fills its table again: what the column holds is its own)
            at += n
        assert len(col) == len(rows) and col.spilled == (rows.nbytes > room_bytes)
        assert np.array_equal(np.concatenate([col.part(lo, hi) for lo, hi in col.bounds(7)] or [rows[:0]]), rows)
        lo = data.draw(st.integers(0, len(rows)))
        hi = data.draw(st.integers(lo, len(rows)))
        assert np.array_equal(col.part(lo, hi), rows[lo:hi])
        new = rows[lo:hi].copy()
        new["b"] = 255
        col.put(lo, new)
        want = rows.copy()
        want[lo:hi] = new
        assert np.array_equal(col.array(), want)
        col.close()
        assert room.used == 0


def test_scans_whose_room_runs_out_midway_give_the_rows_of_scans_held_whole(small_entries, small_parts):
    """The table left in place while the room holds it, then handed over (and the column spilled) once
    it does not: the same rows, digests and facts."""
    j, log = _largest(small_entries.journal_files), _largest(small_entries.entry_log_files)
    whole_j = scan_journal(j, window=WINDOW, digest_facts=True)
    whole_l = scan_entry_log(log, window=WINDOW, digests=DigestPlan(), payload_hash="sha256")
    room = Room(whole_j.records.nbytes // 3)
    got_j = scan_journal(j, window=WINDOW, digest_facts=True, sink=ScanSink(room, small_parts))
    assert got_j.spilled and np.array_equal(got_j.records, whole_j.records)
    assert np.array_equal(got_j.digest_facts, whole_j.digest_facts)
    room = Room(whole_l.entries.nbytes // 3)
    got_l = scan_entry_log(log, window=WINDOW, digests=DigestPlan(), payload_hash="sha256",
                           sink=ScanSink(room, small_parts))
    assert got_l.spilled and np.array_equal(got_l.entries, whole_l.entries)
    assert np.array_equal(got_l.digests, whole_l.digests) and got_l.payload_hashes == whole_l.payload_hashes
    assert got_l.computed_ledgers_map() == whole_l.computed_ledgers_map()
    got_j.close()
    got_l.close()
    assert room.used == 0


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12), st.integers(0, 600), st.data())
def test_a_column_says_which_ranges_hold_rows_to_look_at_without_reading_them(tmp_path_factory, sizes, room_bytes,
                                                                              data):
    """Held or spilled, after rows are written back: a range holding a row ``look`` picks is always said
    to hold one; a column none of whose rows it picks says so of every range (then nothing is read)."""
    rows = np.zeros(sum(sizes), [("a", "<i8"), ("b", "u1")])
    rows["a"] = np.arange(len(rows))
    rows["b"] = data.draw(st.lists(st.sampled_from([0, 0, 0, 7]), min_size=len(rows), max_size=len(rows)))

    def look(r):
        return r["b"] == 7
    with SpillFolder(MemoryLimit(1, str(tmp_path_factory.mktemp("col")))) as folder:
        col = ScanColumn(rows.dtype, Room(room_bytes), folder, look=look)
        at = 0
        for n in sizes:
            col.append(rows[at:at + n].copy())
            at += n
        lo = data.draw(st.integers(0, len(rows)))
        hi = data.draw(st.integers(lo, len(rows)))
        new = rows[lo:hi].copy()
        new["b"] = data.draw(st.sampled_from([0, 7]))
        col.put(lo, new)
        now = col.array()
        for a in range(0, len(rows) + 1, 3):
            for b in range(a, len(rows) + 1, 5):
                if look(now[a:b]).any():
                    assert col.any_to_look(a, b), (a, b)
        if not look(now).any() and (col.spilled or not look(rows).any()):
            assert not any(col.any_to_look(a, b) for a in range(len(rows)) for b in range(a + 1, len(rows) + 1))
        col.close()


def test_the_digests_of_a_spilled_scan_all_verified_are_not_read_again(small_entries, small_parts, monkeypatch):
    """digest_parts and the recheck pass over the parts whose digests all verified: on a healthy log
    none is read back; a log with one bad entry gives the part that holds it."""
    from bkdisk.digests.kernels import DIGEST_BAD
    from bkdisk.entrylogs.scan_parts import digest_parts, recheck
    log = _largest(small_entries.entry_log_files)
    plan = DigestPlan()
    got = scan_entry_log(log, window=WINDOW, digests=plan, sink=ScanSink(Room(0), small_parts))
    assert isinstance(got, ChunkedLogScan) and got.spilled
    reads = []
    real = ScanColumn.part
    monkeypatch.setattr(ScanColumn, "part", lambda self, lo, hi: reads.append(self.name) or real(self, lo, hi))
    assert list(digest_parts(got)) == [] and recheck(plan, got) == 0
    assert "digests" not in reads
    got.close()
    bad = str(small_parts.get()) + "/bad.log"
    data = bytearray(open(log, "rb").read())
    whole = scan_entry_log(log, window=WINDOW, digests=DigestPlan())
    at = int(whole.entries["offset"][len(whole.entries) // 2]) + 4 + 40   # inside a payload, mid-log
    data[at] ^= 0xFF
    open(bad, "wb").write(bytes(data))
    got = scan_entry_log(bad, window=WINDOW, digests=DigestPlan(), sink=ScanSink(Room(0), small_parts))
    parts_read = [(lo, d) for lo, d in digest_parts(got)]
    assert sum(int((d["status"] == DIGEST_BAD).sum()) for _lo, d in parts_read) == 1
    assert 0 < len(parts_read) < len(list(scan_sink.parts(got.count())))
    got.close()
