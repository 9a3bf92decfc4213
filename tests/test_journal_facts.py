"""The journals' facts (master keys, fences, explicit LACs, records after lastMark) against the same
facts taken from the reference reader's records, one record at a time."""
from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.diskio.scan_sink import Room, ScanSink
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.formats import journal as fj
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import RecordKind
from bkdisk.formats.lastmark import LastMark
from bkdisk.journal import facts as facts_module
from bkdisk.journal.facts import JournalFacts, RecordFacts
from bkdisk.journal.reader import read_journal
from bkdisk.journal.scan import scan_journal
from bkdisk.journal.writer import JournalWriter

JOURNAL_ID = 0x1A2


def _data_body(ledger: int, entry: int, n: int) -> bytes:
    return ledger.to_bytes(8, "big") + entry.to_bytes(8, "big") + b"\1" * max(n, 16)


def _write(path: str, records: list[tuple]) -> None:
    with JournalWriter(path, version=6, prealloc_size=4096, group_bytes=1 << 14) as w:
        for kind, scope, ledger, value in records:
            if kind == "key":
                w.append(fj.build_ledger_key_body(ledger, value, scope))
            elif kind == "lac":
                w.append(fj.build_explicit_lac_body(ledger, value, scope))
            elif kind == "fence":
                w.append(fj.build_fence_body(ledger, scope))
            else:
                w.append(_data_body(ledger, 0, value))
        w.flush_group()


def _reference(path: str, mark: LastMark | None) -> tuple[dict, dict, dict, list, tuple[dict, dict]]:
    """The facts as one pass over the reference reader's records gives them."""
    keys: dict[LedgerId, bytes] = {}
    replayed_keys: dict[LedgerId, list[bytes]] = {}
    replayed_key_at: dict[LedgerId, list[tuple[str, int]]] = {}
    replayed_lacs: dict[LedgerId, bytes] = {}
    replayed_lac_at: dict[LedgerId, tuple[str, int]] = {}
    fenced: dict[LedgerId, bool] = {}
    lacs: dict[LedgerId, bytes | None] = {}
    pending = []
    for r in read_journal(path).records:
        lid = LedgerId(r.scope_id, r.ledger_id)
        after = mark is None or (JOURNAL_ID, r.offset) >= (mark.log_id, mark.offset)
        if r.kind == RecordKind.LEDGER_KEY:
            keys.pop(lid, None) if lid not in keys else None
            keys[lid] = r.master_key   # (the last record's key; the ledger's place is where first met)
            if after and r.master_key not in replayed_keys.setdefault(lid, []):
                replayed_keys[lid].append(r.master_key)
                replayed_key_at.setdefault(lid, []).append((path, r.offset))
        elif r.kind == RecordKind.FENCE:
            fenced[lid] = fenced.get(lid, False) or not after
        elif r.kind == RecordKind.EXPLICIT_LAC:
            lacs[lid] = None if after else r.lac_body   # (a restart replays it into storage)
            if after and r.lac_body is not None:
                replayed_lacs[lid], replayed_lac_at[lid] = r.lac_body, (path, r.offset)
        elif r.kind == RecordKind.DATA and after:
            pending.append((path, r.offset, lid, r.entry_id))
    return keys, fenced, lacs, pending, (replayed_keys, replayed_key_at, replayed_lacs, replayed_lac_at)


_record = st.one_of(
    st.tuples(st.just("key"), st.sampled_from([0, 0, 5]), st.integers(1, 6),
              st.sampled_from([b"", b"k" * 20, b"pw", b"q" * 20, b"\x80" * 3])),
    st.tuples(st.just("lac"), st.sampled_from([0, 5]), st.integers(1, 6),
              st.binary(min_size=fj.MIN_LAC_BODY_LENGTH, max_size=40)),
    st.tuples(st.just("fence"), st.sampled_from([0, 5]), st.integers(1, 6), st.none()),
    st.tuples(st.just("data"), st.just(0), st.integers(1, 6), st.sampled_from([16, 300, 5000])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_record, max_size=60), st.sampled_from([(64, 1024, 100), (4096, 1 << 20, 4 << 20)]), st.data())
def test_the_facts_are_those_of_the_records_one_at_a_time(monkeypatch, records, reads, data):
    """Keys read a run of records at a time (runs cut by gaps and by spans of the file, batches of
    runs), whatever lies between the keyed records: the reference's keys, in the order first met."""
    monkeypatch.setattr(facts_module, "RUN_GAP", reads[0])
    monkeypatch.setattr(facts_module, "RUN_BYTES", reads[1])
    monkeypatch.setattr(facts_module, "READ_BYTES", reads[2])
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{JOURNAL_ID:x}.txn")
        _write(path, records)
        scan = scan_journal(path, window=4096)
        offsets = scan.records["offset"].tolist()
        mark = data.draw(st.one_of(st.none(), st.sampled_from([LastMark(JOURNAL_ID, o) for o in offsets] or [None]),
                                   st.sampled_from([LastMark(JOURNAL_ID - 1, 0), LastMark(JOURNAL_ID + 1, 0)])))
        got = JournalFacts.collect([(JOURNAL_ID, path, scan, mark)])
        keys, fenced, lacs, pending, replayed = _reference(path, mark)
        assert list(got.master_keys) == list(keys) and dict(got.master_keys) == keys
        assert (got.replayed_keys, got.replayed_key_at, got.replayed_lacs, got.replayed_lac_at) == replayed
        assert got.fenced == fenced and got.explicit_lac == lacs and list(got.pending.tuples()) == pending
        # The same facts taken as a spilling scan hands its records over (a window's records at a time),
        # none of its records read back.
        with SpillFolder(MemoryLimit(1, d)) as folder, monkeypatch.context() as m:
            m.setattr(ScanSink, "part_bytes", 64)
            taken = RecordFacts(JOURNAL_ID, path, mark)
            tapped = scan_journal(path, window=4096, sink=ScanSink(Room(0), folder).tap("records", taken))
            m.setattr(facts_module, "record_parts", _no_read_back)
            again = JournalFacts.collect([(JOURNAL_ID, path, tapped, mark)], {path: taken})
            assert tapped.spilled or len(offsets) == 0
        assert list(again.master_keys) == list(keys) and dict(again.master_keys) == keys
        assert (again.replayed_keys, again.replayed_key_at, again.replayed_lacs, again.replayed_lac_at) == replayed
        assert again.fenced == fenced and again.explicit_lac == lacs and list(again.pending.tuples()) == pending


def _no_read_back(*_a, **_k):
    raise AssertionError("a journal's records read back for its facts")


def test_journals_merge_in_order_and_a_failed_one_tells_nothing(tmp_path):
    """Three journals, the middle one's scan failed: the first and last journals' facts, the later one's
    record last (a key's bytes, an explicit LAC), a fence before the mark in either counted."""
    paths = [str(tmp_path / f"{JOURNAL_ID + i:x}.txn") for i in range(3)]
    _write(paths[0], [("key", 0, 1, b"a" * 20), ("fence", 0, 2, None), ("lac", 0, 3, b"x" * 40),
                      ("data", 0, 1, 300), ("key", 0, 4, b"a" * 20)])
    _write(paths[2], [("key", 0, 1, b"b" * 20), ("lac", 0, 3, b"y" * 40), ("fence", 0, 5, None),
                      ("data", 0, 4, 300)])
    scans = [scan_journal(p) for p in (paths[0], paths[2])]
    mark = LastMark(JOURNAL_ID + 2, int(scans[1].records["offset"][2]))
    sources = [(JOURNAL_ID, paths[0], scans[0], mark), (JOURNAL_ID + 1, paths[1], FormatError("x", "y"), mark),
               (JOURNAL_ID + 2, paths[2], scans[1], mark)]
    read_back = JournalFacts.collect(sources)
    taken = {}
    for (jid, path, scan, m) in (sources[0], sources[2]):
        taken[path] = RecordFacts(jid, path, m)
        taken[path].add(0, scan.records)
    tapped = JournalFacts.collect(sources, taken)
    for got in (read_back, tapped):
        assert list(got.master_keys.pairs()) == [(LedgerId(0, 1), b"b" * 20), (LedgerId(0, 4), b"a" * 20)]
        assert got.fenced == {LedgerId(0, 2): True, LedgerId(0, 5): False}
        assert got.explicit_lac == JournalFacts.collect([sources[2]]).explicit_lac and len(got.explicit_lac) == 1
        assert [(p, lid, e) for p, _o, lid, e in got.pending.tuples()] == [(paths[2], LedgerId(0, 4), 0)]


def test_replayed_keys_and_lacs_are_placed_at_the_record_where_each_was_first_met(tmp_path):
    """Every record replayed (the mark at the first journal's start): a ledger's distinct keys in the
    order met, each at its first record, whichever journal holds it; the newest LAC at its record."""
    paths = [str(tmp_path / f"{JOURNAL_ID + i:x}.txn") for i in range(2)]
    _write(paths[0], [("key", 0, 1, b"a" * 20), ("key", 0, 1, b"a" * 20), ("lac", 0, 3, b"x" * 40)])
    _write(paths[1], [("data", 0, 1, 300), ("key", 0, 1, b"b" * 20), ("key", 0, 1, b"a" * 20),
                      ("lac", 0, 3, b"y" * 40)])
    scans = [scan_journal(p) for p in paths]
    at = [s.records["offset"].tolist() for s in scans]
    mark = LastMark(JOURNAL_ID, 0)
    got = JournalFacts.collect([(JOURNAL_ID + i, paths[i], scans[i], mark) for i in range(2)])
    assert got.replayed_keys == {LedgerId(0, 1): [b"a" * 20, b"b" * 20]}
    assert got.replayed_key_at == {LedgerId(0, 1): [(paths[0], at[0][0]), (paths[1], at[1][1])]}
    assert list(got.replayed_lacs) == [LedgerId(0, 3)] and got.replayed_lac_at == {LedgerId(0, 3): (paths[1], at[1][3])}


def test_ledger_keys_side_by_side_are_read_in_few_reads(monkeypatch):
    """200 ledger-key records one after the other, between data: one read, not one per record."""
    records = [("data", 0, 1, 300)] * 20 + [("key", 0, i, b"k" * 20) for i in range(200)] + [("data", 0, 1, 300)] * 20
    reads = []
    real = os.pread
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{JOURNAL_ID:x}.txn")
        _write(path, records)
        scan = scan_journal(path)
        monkeypatch.setattr(os, "pread", lambda fd, n, off: reads.append(n) or real(fd, n, off))
        got = JournalFacts.collect([(JOURNAL_ID, path, scan, None)])
    assert len(got.master_keys) == 200 and got.master_keys[LedgerId(0, 199)] == b"k" * 20
    assert len(reads) == 1


def test_a_journal_cut_short_after_its_scan_is_one_line_naming_it():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{JOURNAL_ID:x}.txn")
        _write(path, [("data", 0, 1, 300), ("key", 0, 3, b"k" * 20)])
        scan = scan_journal(path)
        key_at = int(scan.records["offset"][1])
        os.truncate(path, key_at + 10)
        with pytest.raises(FormatError) as e:
            JournalFacts.collect([(JOURNAL_ID, path, scan, None)])
    assert path in str(e.value) and f"offset {key_at + fj.RECORD_LENGTH_SIZE}" in str(e.value)
    assert "shorter than when it was scanned" in str(e.value) and "\n" not in str(e.value)


def test_a_key_record_changed_after_its_scan_is_one_line_naming_it():
    """A key length the scan did not see (the bookie wrote while the check ran): no traceback."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{JOURNAL_ID:x}.txn")
        _write(path, [("data", 0, 1, 300), ("key", 0, 3, b"k" * 20), ("key", 0, 4, b"k" * 20)])
        scan = scan_journal(path)
        key_at = int(scan.records["offset"][2])
        with open(path, "r+b") as fh:
            fh.seek(key_at + fj.RECORD_LENGTH_SIZE + fj.KEY_LENGTH_AT)
            fh.write(b"\xff\xff\xff\xf0")   # a negative key length
        with pytest.raises(FormatError) as e:
            JournalFacts.collect([(JOURNAL_ID, path, scan, None)])
    assert path in str(e.value) and f"offset {key_at}:" in str(e.value) and "changed since" in str(e.value)
