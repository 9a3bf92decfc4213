"""The jitted journal scanner against its reference twin, the golden corpora and the writer."""
from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats import journal as fj
from bkdisk.formats.digests import DigestType
from bkdisk.formats.errors import FormatError
from bkdisk.formats.journal import RecordKind
from bkdisk.formats.lastmark import parse_last_mark
from bkdisk.journal.arrays import scan_journal_reference
from bkdisk.journal.reader import EndKind, read_journal
from bkdisk.journal.scan import scan_journal
from bkdisk.journal.writer import JournalWriter

SINGLE = ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage", "dbstorage-v6-bookieid"]
CORPORA = [GOLDEN / c for c in SINGLE] + (sorted((GOLDEN / "cluster-3" / "bookies").glob("*"))
                                           or [GOLDEN / "cluster-3" / "bookies" / "<missing>"])
IDS = [str(c.relative_to(GOLDEN)) for c in CORPORA]
KIND = {"entry": RecordKind.DATA, "master_key": RecordKind.LEDGER_KEY, "fence": RecordKind.FENCE,
        "explicit_lac": RecordKind.EXPLICIT_LAC, "force_ledger": RecordKind.FORCE_LEDGER}


def assert_same_scan(got, want) -> None:
    assert (got.path, got.journal_id, got.version, got.header_size, got.size) == \
        (want.path, want.journal_id, want.version, want.header_size, want.size)
    assert got.records.dtype == want.records.dtype
    assert got.records.tolist() == want.records.tolist()
    assert (got.end_kind, got.end_offset, got.end_detail) == (want.end_kind, want.end_offset, want.end_detail)


def _manifest(corpus: Path) -> dict:
    assert (corpus / "manifest.json").is_file(), f"golden corpus missing: {corpus}"
    return json.loads((corpus / "manifest.json").read_text())


def test_golden_corpora_are_present():
    assert GOLDEN.is_dir(), f"golden folder missing: {GOLDEN}"
    assert all((c / "manifest.json").is_file() for c in CORPORA) and len(CORPORA) == 7


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_scan_equals_reference_and_manifest_on_golden_journals(corpus: Path):
    doc = _manifest(corpus)
    want = {}
    for r in doc["journal_records"]:
        want.setdefault(r["journal_file"], []).append(
            (r["offset"], int(KIND[r["kind"]]), int(r["ledger_id"]), r["entry_id"], r["length"]))
    files = [p for jd in doc["journal_dirs"] for p in sorted((corpus / jd / "current").glob("*.txn"))]
    assert files
    for p in files:
        ref = scan_journal_reference(p)
        for window in (4096, 5000, 1 << 26):
            got = scan_journal(p, window=window)
            assert_same_scan(got, ref)
        rows = [(int(r["offset"]), int(r["kind"]), int(r["ledger"]), int(r["entry"]), int(r["size"]))
                for r in got.records if r["kind"] != RecordKind.PADDING]
        assert rows == want[p.name]
        assert got.version == doc["journal_format_version"]
        assert got.end_kind == EndKind.CLEAN
    assert sum(len(v) for v in want.values()) == len(doc["journal_records"])


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_scan_from_the_golden_last_mark_equals_reference(corpus: Path):
    doc = _manifest(corpus)
    mark = parse_last_mark((corpus / doc["ledger_dirs"][0] / "current" / "lastMark").read_bytes())
    p = corpus / doc["journal_dirs"][0] / "current" / f"{mark.log_id:x}.txn"
    assert p.is_file()
    got = scan_journal(p, mark.offset, window=4096)
    assert_same_scan(got, scan_journal_reference(p, start=mark.offset))
    assert len(got.records) == 0 and got.end_kind == EndKind.CLEAN and got.end_offset == mark.offset


def test_valid_end_after_a_padding_record_is_the_aligned_position():
    """Reference bug fixed: valid_end counted a padding record's 8-byte prefix as 12 bytes."""
    corpus = GOLDEN / "interleaved-v6-hostport"
    doc = _manifest(corpus)
    mark = parse_last_mark((corpus / doc["ledger_dirs"][0] / "current" / "lastMark").read_bytes())
    s = read_journal(corpus / "journal" / "current" / f"{mark.log_id:x}.txn")
    assert s.records[-1].kind == RecordKind.PADDING
    assert s.valid_end == mark.offset == s.end.offset


# --- generated journals ----------------------------------------------------------------------
def _ledger(i: int, rng: random.Random) -> LedgerSpec:
    ledger_id = rng.choice([i, 2 ** 40 + i])
    entries = [rng.randbytes(rng.choice([0, 3, 200, 1500])) for _ in range(rng.randint(1, 5))]
    return LedgerSpec(ledger_id, entries, digest_type=rng.choice(list(DigestType)), password=rng.randbytes(4),
                      scope_id=rng.choice([0, 0, 9, 2 ** 64 - 1]), fenced=rng.random() < 0.4,
                      explicit_lac=0 if rng.random() < 0.3 else None)


def _bookie(seed: int, version: int, d: str):
    rng = random.Random(seed)
    ledgers = [_ledger(i, rng) for i in range(rng.randint(1, 6))]
    spec = BookieSpec(ledgers, journal_version=version, index_version=1 if version >= 6 else 0,
                      journal_group_bytes=rng.choice([300, 2000, 1 << 20]),
                      journal_max_size=rng.choice([3000, 1 << 20]), journal_prealloc_size=8192)
    return write_bookie(spec, d)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), version=st.sampled_from([4, 5, 6]),
       window=st.sampled_from([4096, 9000, 1 << 22]))
def test_scan_equals_reference_and_holds_every_written_entry(seed: int, version: int, window: int):
    with tempfile.TemporaryDirectory() as d:
        wb = _bookie(seed, version, d)
        data_entries = []
        for p in wb.journal_files:
            got = scan_journal(p, window=window)
            assert_same_scan(got, scan_journal_reference(p))
            # a zero length then zeros, or no tail at all when the data fill the preallocation exactly
            assert got.end_kind == EndKind.CLEAN or (got.end_kind == EndKind.EOF and got.end_offset == got.size)
            raw = Path(p).read_bytes()
            for i, r in enumerate(got.records):
                if r["kind"] == RecordKind.DATA:
                    body = got.body(raw, i)
                    if r["scope"]:
                        assert body[0] >= 0x80
                    data_entries.append(bytes(body))
        assert sorted(data_entries) == sorted(wb.entries.values())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), version=st.sampled_from([4, 5, 6]))
def test_scan_equals_reference_under_random_damage(seed: int, version: int):
    rng = random.Random(seed ^ 0x5EED)
    with tempfile.TemporaryDirectory() as d:
        wb = _bookie(seed, version, d)
        p = wb.journal_files[0]
        b = bytearray(Path(p).read_bytes())
        last = read_journal(p).valid_end
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(0, min(len(b), last + 64))
            kind = rng.randrange(7)
            if kind == 0:
                b[at] ^= 1 << rng.randrange(8)
            elif kind == 1:
                del b[at:]
            elif kind == 2:
                q = min(len(b), at + rng.randint(1, 300))
                b[at:q] = bytes(q - at)
            elif kind == 3:
                b[at:at + 4] = rng.randbytes(4)
            elif kind == 4:
                b[at:at + 4] = (-0x100).to_bytes(4, "big", signed=True)
            elif kind == 5 and last < len(b):
                b[rng.randrange(last, len(b))] = 1
            else:
                b[at] = rng.choice([0x80, 0xA0, 0xA3, 0xB0])
            if not b:
                break
        data = bytes(b)
        start = rng.choice([None, None, rng.randrange(0, len(data) + 8)])
        try:
            ref = scan_journal_reference(p, data, start)
        except FormatError as e:  # a damaged version field
            with pytest.raises(FormatError) as got:
                scan_journal(p, start, data=data)
            assert str(got.value) == str(e)
            return
        for window in (4096, 4100, 1 << 22):
            assert_same_scan(scan_journal(p, start, data=data, window=window), ref)


# --- each way a journal ends ------------------------------------------------------------------
def _journal(d: str, version: int = 6) -> tuple[str, bytes, list]:
    p = f"{d}/1a2.txn"
    with JournalWriter(p, version=version, prealloc_size=16384, group_bytes=1 << 20) as w:
        w.append(fj.build_ledger_key_body(7, b"k" * 20))
        offs = [w.append(b"\0" * 7 + bytes([7]) + i.to_bytes(8, "big") + b"\1" * 40) for i in range(5)]
        w.append(fj.build_fence_body(7))
        w.flush_group()
    return p, Path(p).read_bytes(), offs


def _end(p: str, data: bytes, start=None):
    got = scan_journal(p, start, data=data, window=4096)
    assert_same_scan(got, scan_journal_reference(p, data, start))
    return got


def test_clean_end_after_zero_length_and_zero_fill():
    with tempfile.TemporaryDirectory() as d:
        p, data, _ = _journal(d)
        got = _end(p, data)
        assert got.end_kind == EndKind.CLEAN and got.end_offset == read_journal(p).valid_end
        kinds = [RecordKind(int(k)) for k in got.records["kind"]]
        assert kinds == [RecordKind.LEDGER_KEY] + [RecordKind.DATA] * 5 + [RecordKind.FENCE, RecordKind.PADDING]


def test_torn_tail_is_reported_at_the_cut_record():
    with tempfile.TemporaryDirectory() as d:
        p, data, offs = _journal(d)
        got = _end(p, data[:offs[3] + 30])
        assert (got.end_kind, got.end_offset, len(got.records)) == (EndKind.TORN, offs[3], 4)
        zero_body = data[:offs[3] + 4] + bytes(len(data) - offs[3] - 4)  # length landed, body did not
        got = _end(p, zero_body)
        assert (got.end_kind, got.end_offset) == (EndKind.TORN, offs[3])
        assert got.end_detail.endswith("over an all-zero body")
        got = _end(p, data[:offs[3] + 2])
        assert (got.end_kind, got.end_offset) == (EndKind.EOF, offs[3])


def test_garbage_after_a_zero_length_and_invalid_records_are_reported():
    with tempfile.TemporaryDirectory() as d:
        p, data, offs = _journal(d)
        end = read_journal(p).valid_end
        b = bytearray(data)
        b[end + 1000] = 0x55
        got = _end(p, bytes(b))
        assert (got.end_kind, got.end_offset) == (EndKind.GARBAGE, end)
        assert got.end_detail == f"zero length, but non-zero byte at offset {end + 1000}"
        b = bytearray(data)
        b[offs[2]:offs[2] + 4] = (-5).to_bytes(4, "big", signed=True)
        got = _end(p, bytes(b))
        assert (got.end_kind, got.end_offset, got.end_detail) == (EndKind.INVALID, offs[2], "negative record length -5")
        b = bytearray(data)
        b[offs[1] + 4] = 0xB1  # a body starting like a scoped record with bad flags
        got = _end(p, bytes(b))
        assert (got.end_kind, got.end_offset) == (EndKind.INVALID, offs[1]) and "flags" in got.end_detail


def test_scoped_records_need_the_flags_of_their_kind():
    with tempfile.TemporaryDirectory() as d:
        p = f"{d}/7.txn"
        with JournalWriter(p, version=6, prealloc_size=8192) as w:
            ok = w.append(fj.build_fence_body(3, scope_id=5))
            bad = w.append(fj.scoped_prefix(5, flags=0xA3) + fj.build_fence_body(3))  # data flags on a meta record
        got = _end(p, Path(p).read_bytes())
        assert [int(r) for r in got.records["offset"]] == [ok] and int(got.records["scope"][0]) == 5
        assert (got.end_kind, got.end_offset) == (EndKind.INVALID, bad)
        assert got.end_detail.startswith("flags 0xA0 on a scoped meta record")


def test_meta_records_a_journal_version_may_not_hold_are_invalid():
    with tempfile.TemporaryDirectory() as d:
        p = f"{d}/5.txn"
        with JournalWriter(p, version=5, prealloc_size=8192) as w:
            w.append(fj.build_fence_body(3))
            off = w.append(fj.build_explicit_lac_body(3, (3).to_bytes(8, "big") + (1).to_bytes(8, "big") + b"d" * 4))
        got = _end(p, Path(p).read_bytes())
        assert (got.end_kind, got.end_offset) == (EndKind.INVALID, off)
        assert got.end_detail == "EXPLICIT_LAC record in a version 5 journal"


def test_records_larger_than_the_window():
    with tempfile.TemporaryDirectory() as d:
        p = f"{d}/6.txn"
        with JournalWriter(p, version=6, prealloc_size=1 << 20) as w:
            for i in range(4):
                w.append(b"\0" * 7 + b"\1" + i.to_bytes(8, "big") + random.Random(i).randbytes(100_000))
        ref = scan_journal_reference(p)
        for window in (4096, 50_000):
            got = scan_journal(p, window=window)
            assert_same_scan(got, ref)
            assert [int(k) for k in got.records["kind"]].count(int(RecordKind.DATA)) == 4
