"""What a check spilled is read back once (by pass 5's join), not again by the steps that only look
at each row: a log's ledgers map is compared with its entries counted as the scan handed them over,
pass 3 finds the index locations that point into no log, or past one's end, as the index walk
spilled them, and a journal's facts are taken as its scan hands its records over (pass 6's digests
read them back). Each gives what reading the rows back gives: the same sums, facts and findings."""
from __future__ import annotations

import glob
import os
import shutil

import numpy as np
import pytest

from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.diskio import scan_sink
from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.scan_sink import Room, ScanSink
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.entrylogs import map_sums
from bkdisk.entrylogs.arrays import ENTRY_DTYPE, PROBLEM_DTYPE, EntryLogArrays
from bkdisk.entrylogs.map_check import map_differences
from bkdisk.entrylogs.map_sums import MapCounter, map_rows
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.formats.digests import DigestType
from bkdisk.formats.errors import FormatError
from bkdisk.fsck import context as fsck_context
from bkdisk.fsck import scans as fsck_scans
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.passes import p3_index
from bkdisk.fsck.placed_locations import NUMBERED, SHORTEST_ENTRY_END, PlacedCheck
from bkdisk.indexfiles import scan as index_scan
from bkdisk.indexfiles.arrays import LOCATION_DTYPE
from bkdisk.journal import digests as journal_digests
from bkdisk.journal import facts as journal_facts
from bkdisk.journal.pending import PendingRecords
from tests.conftest import GOLDEN

WINDOW = 4096


@pytest.fixture(scope="module")
def many_ledgers(tmp_path_factory):
    """Logs of many small entries of 40 ledgers (ids over the 64-bit range), each closed with its map."""
    root = str(tmp_path_factory.mktemp("maps") / "bookie")
    rng = np.random.default_rng(7)
    ids = sorted({int(x) for x in rng.integers(1, 2**63 - 1, 40, dtype=np.int64)})
    ledgers = [LedgerSpec(lid, [bytes([i % 251]) * int(rng.integers(1, 90)) for _e in range(150)],
                          digest_type=[DigestType.CRC32C, DigestType.CRC32][i % 2], password=b"pw")
               for i, lid in enumerate(ids)]
    return write_bookie(BookieSpec(ledgers, entry_log_size_limit=96 << 10), root)


def _logs_with_maps(root: str) -> list[str]:
    return [p for p in sorted(glob.glob(os.path.join(root, "**", "*.log"), recursive=True))
            if scan_entry_log(p).ledgers_map is not None]


def _read_back(scan):
    """The map's rows, and the sums and counts of their entries as a dict of the finished scan's says."""
    scope, ledger, size = map_rows(scan.ledgers_map)
    got = scan.computed_ledgers_map()   # (size prefixes included, as the map counts them)
    per = {k: 0 for k in got}
    for (s, lg) in zip(scan.entries["scope"].tolist(), scan.entries["ledger"].tolist()):
        per[(s, lg)] += 1
    keys = list(zip(scope.tolist(), ledger.tolist()))
    return (scope, ledger, size, np.array([got.get(k, 0) for k in keys], np.int64),
            np.array([per.get(k, 0) for k in keys], np.int64))


@pytest.mark.parametrize("room", [None, 0, 1 << 30])
def test_a_scan_counts_its_entries_into_its_map_as_the_reading_back_does(many_ledgers, monkeypatch, tmp_path, room):
    monkeypatch.setattr(ScanSink, "part_bytes", 2048)
    monkeypatch.setattr(scan_sink, "PART_ROWS", 37)
    logs = _logs_with_maps(many_ledgers.root) + _logs_with_maps(os.path.join(GOLDEN, "interleaved-v4-smallpage"))
    assert len(logs) >= 6
    spilled = 0
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        for p in logs:
            sink = None if room is None else ScanSink(Room(room), folder)
            scan = scan_entry_log(p, window=WINDOW, count_map=True, sink=sink)
            spilled += bool(getattr(scan, "spilled", False))
            assert scan.map_counts is not None, p
            for got, want in zip(scan.map_counts, _read_back(scan)):
                assert np.array_equal(got, want), p
            differ = map_differences(scan)
            scan.map_counts = None
            assert differ == map_differences(scan) == [], p
            if sink is not None:
                sink.close()
    assert spilled == (len(logs) if room == 0 else 0)


def _entries(rows: list[tuple[int, int, int]]) -> np.ndarray:
    e = np.zeros(len(rows), ENTRY_DTYPE)
    for i, (s, lg, size) in enumerate(rows):
        e[i]["scope"], e[i]["ledger"], e[i]["size"] = s, lg, size
    return e


def _scan_of(e: np.ndarray) -> EntryLogArrays:
    return EntryLogArrays("0.log", 0, 1 << 20, None, None, None, None, 1 << 19, e, np.zeros(0, PROBLEM_DTYPE))


def test_a_counter_gives_up_where_the_map_cannot_hold_the_entries():
    """An entry of a ledger the map lacks, a size past 64 bits: no counts (the comparison reads the
    entries, and names what differs); a map whose ledgers hold every entry: counted, a part at a time."""
    m = {(0, 5): 30, (1, 2**64 - 1): 9, (0, 2): 0}
    c = MapCounter.of_map(m)
    c.add(_entries([(0, 5, 10), (1, 2**64 - 1, 1)]))
    c.add(_entries([(0, 5, 12)]))
    scope, ledger, size, sums, counts = c.counts()
    assert list(zip(scope.tolist(), ledger.tolist(), size.tolist(), sums.tolist(), counts.tolist())) == [
        (0, 2, 0, 0, 0), (0, 5, 30, 30, 2), (1, 2**64 - 1, 9, 5, 1)]
    c.add(_entries([(0, 6, 1)]))
    assert c.counts() is None
    c.add(_entries([(0, 5, 1)]))   # (nothing counts once it gave up)
    assert c.counts() is None
    assert MapCounter.of_map({(0, 1): 2**64}) is None   # (a size past 64 bits: compared as Python ints)
    assert MapCounter.of_map({(0, 1): 5}).add_parts(_scan_of(_entries([(0, 1, 1), (0, 2, 1)]))).counts() is None


def test_a_spilled_check_compares_each_map_without_reading_the_entries_back(many_ledgers, monkeypatch, tmp_path):
    dirs = discover(many_ledgers.root)
    held = check_bookie(dirs, CheckOptions())
    want = [f.to_json() for f in held.findings]
    held.close()

    def read_back(_scan, *_a, **_k):
        raise AssertionError("a log's entries read back to compare its map")
    monkeypatch.setattr(map_sums, "entry_parts", read_back)
    compared = []
    real = fsck_scans.map_differences
    monkeypatch.setattr(fsck_scans, "map_differences", lambda scan: compared.append(scan.spilled) or real(scan))
    spilled = check_bookie(dirs, CheckOptions(memory=MemoryLimit(1 / 256, str(tmp_path))))
    try:
        assert spilled.context.scan_store.spilled > 0
        assert len(compared) == len(_logs_with_maps(many_ledgers.root)) >= 3 and all(compared)
        assert [f.to_json() for f in spilled.findings] == want
    finally:
        spilled.close()


def test_a_spilled_check_takes_the_journals_facts_as_it_scans_them(many_ledgers, monkeypatch, tmp_path):
    """Journals whose records spill: their facts (keys, fences, LACs, records after the mark) taken as the
    scan hands the records over, the same as a held check's; the records read back once, by pass 6."""
    dirs = discover(many_ledgers.root)
    held = check_bookie(dirs, CheckOptions())
    want, want_facts = [f.to_json() for f in held.findings], held.context.journal_facts
    journals = len(held.context.journal_files)
    held.close()
    monkeypatch.setattr(journal_facts, "record_parts", _no_read_back)
    monkeypatch.setattr(fsck_context, "JOURNAL_SHARE", 1e-9)
    monkeypatch.setattr(ScanSink, "part_bytes", 2048)
    read = []
    real = journal_digests.record_parts
    monkeypatch.setattr(journal_digests, "record_parts", lambda scan, *a: read.append(scan.path) or real(scan, *a))
    spilled = check_bookie(dirs, CheckOptions(memory=MemoryLimit(1 / 256, str(tmp_path))))
    try:
        scans = spilled.context.journal_scans
        assert journals >= 1 and all(s.spilled for s in scans.values())
        assert sorted(read) == sorted(scans) and len(read) == journals   # (pass 6's digests)
        got = spilled.context.journal_facts
        assert spilled.context.journal_record_facts == {}   # (moved into the facts, not kept beside them)
        assert list(got.master_keys.pairs()) == list(want_facts.master_keys.pairs()) and len(got.master_keys) == 40
        assert got.fenced == want_facts.fenced and got.explicit_lac == want_facts.explicit_lac
        assert np.array_equal(got.pending.rows, want_facts.pending.rows)
        assert [f.to_json() for f in spilled.findings] == want
    finally:
        spilled.close()


def _no_read_back(*_a, **_k):
    raise AssertionError("a journal's records read back for its facts")


def test_a_journal_that_changed_under_its_facts_stops_the_check_in_one_line(many_ledgers, monkeypatch):
    """Its key records no longer where the scan read them (taken as the scan goes): the check stops
    naming the journal and the offset, as it did reading the records back, and the journal's scan
    stands (not a journal with a bad header)."""
    def shorter(_fd, path, offsets, _sizes):
        raise FormatError("100 bytes of ledger-key and explicit-LAC records",
                          "0 (the journal is shorter than when it was scanned)", path=path, offset=offsets[0])
    monkeypatch.setattr(journal_facts, "_read_runs", shorter)
    for jobs in (1, 2):
        with pytest.raises(FormatError) as e:
            check_bookie(discover(many_ledgers.root), CheckOptions(jobs=jobs))
        assert ".txn: offset" in str(e.value) and "shorter than when it was scanned" in str(e.value)


def test_records_after_the_mark_are_moved_into_the_facts_not_copied():
    """A journal's pending rows are taken into the facts as they are (their journal numbers made the
    facts'), in journal order; the journal's own table is left empty."""
    def one(path: str, n: int) -> PendingRecords:
        p = PendingRecords()
        p.add(path, np.arange(n), np.zeros(n, np.uint64), np.arange(n, dtype=np.uint64), np.arange(n))
        return p
    first, later = one("a.txn", 2), one("b.txn", 3)
    merged = PendingRecords()
    part = first.rows
    merged.extend(first)
    assert np.shares_memory(merged.rows, part) and len(first) == 0
    merged.extend(later)
    assert merged.paths == ["a.txn", "b.txn"] and merged.rows["journal"].tolist() == [0, 0, 1, 1, 1]
    assert merged.rows["ledger"].tolist() == [0, 1, 0, 1, 2] and len(later) == 0


def _locations(rng, n: int) -> np.ndarray:
    locs = np.zeros(n, LOCATION_DTYPE)
    locs["log"] = rng.integers(0, 6, n)
    locs["pos"] = rng.integers(0, 1200, n)
    locs["entry"] = np.arange(n)
    return locs


def test_placed_locations_given_in_any_chunks_are_those_of_one_look():
    rng = np.random.default_rng(3)
    locs = _locations(rng, 5000)
    sizes = {0: 1000, 2: 1100, 3: 0, 5: 50}
    whole = PlacedCheck(sizes)
    whole.add(0, locs)
    missing, past = whole.found()
    assert set(missing["loc"]["log"].tolist()) == {1, 4}
    near_end = locs["pos"].astype(np.int64) + SHORTEST_ENTRY_END
    logs = locs["log"].tolist()
    want_past = [k for k, lg in enumerate(logs) if lg in sizes and near_end[k] > sizes[lg]]
    assert past["k"].tolist() == want_past and np.array_equal(past["loc"], locs[want_past])
    assert np.array_equal(missing["loc"], locs[missing["k"]]) and (np.diff(missing["k"]) > 0).all()
    for _ in range(5):
        cuts = np.sort(rng.integers(0, len(locs), 6))
        check = PlacedCheck(sizes)
        check.add(0, locs[:100])
        check.clear()   # (a reader that starts again)
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(locs)]):
            check.add(lo, locs[lo:hi])
        for got, want in zip(check.found(), (missing, past)):
            assert got.dtype == NUMBERED and np.array_equal(got, want)
    with pytest.raises(ValueError):
        check.add(10, locs[:3])


def test_a_spilled_check_finds_misplaced_locations_without_reading_them_back(many_ledgers, monkeypatch, tmp_path):
    """Locations into a log that is gone and past the end of one cut short: the held check's findings,
    from the spilled check, whose pass 3 reads no location back."""
    root = str(tmp_path / "bookie")
    shutil.copytree(many_ledgers.root, root, symlinks=True)
    logs = sorted(glob.glob(os.path.join(root, "**", "*.log"), recursive=True))
    os.unlink(logs[0])
    os.truncate(logs[1], os.path.getsize(logs[1]) // 2)
    dirs = discover(root)
    held = check_bookie(dirs, CheckOptions())
    want = [f.to_json() for f in held.findings]
    held.close()
    codes = {f["code"] for f in want}
    assert {"INDEX_LOCATION_MISSING_LOG", "INDEX_LOCATION_OUT_OF_RANGE"} <= codes

    def read_back(*_a):
        raise AssertionError("pass 3 read the spilled locations back")
    monkeypatch.setattr(p3_index, "_read_and_placed", read_back)
    walk = index_scan.walk_index_dirs   # (files read a few at a time: the locations spill as they come)
    monkeypatch.setattr(index_scan, "walk_index_dirs", lambda dirs, **kw: walk(dirs, batch_bytes=4096, **kw))
    os.mkdir(tmp_path / "tmp")
    spilled = check_bookie(dirs, CheckOptions(memory=MemoryLimit(1 / 256, str(tmp_path / "tmp"))))
    try:
        assert spilled.context.index_inventory.locations.spilled
        assert [f.to_json() for f in spilled.findings] == want
    finally:
        spilled.close()


def test_a_spilling_array_gives_its_tap_every_row_in_order_and_says_when_it_is_emptied(tmp_path):
    rng = np.random.default_rng(5)
    locs = _locations(rng, 900)
    sizes = {0: 600, 3: 900}
    want = PlacedCheck(sizes)
    want.add(0, locs)
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        arr = ChunkedArray(LOCATION_DTYPE, 1000, folder, "locations", tap=PlacedCheck(sizes))
        arr.write(locs[:300])
        arr.clear()   # (a reader that starts again: what the tap saw goes too)
        for lo in range(0, len(locs), 128):
            arr.append(locs[lo:lo + 128])
        assert arr.spilled and arr.tap.rows == len(arr) == len(locs)
        for got, expected in zip(arr.tap.found(), want.found()):
            assert np.array_equal(got, expected)
        arr.clear()
