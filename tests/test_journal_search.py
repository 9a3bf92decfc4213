"""The jitted search for records past a journal's end (fsck's torn-tail test) against its pure-Python twin."""
from __future__ import annotations

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
from bkdisk.journal.scan import scan_journal
from bkdisk.journal.search import find_record_pair, find_record_pair_reference, lone_records, lone_records_reference

GOLDEN_JOURNALS = sorted(GOLDEN.glob("*/journal*/current/*.txn")) + sorted(
    GOLDEN.glob("cluster-3/bookies/*/journal*/current/*.txn"))


def _starts(scan, count: int = 12) -> list[int]:
    offs = [int(o) for o in scan.records["offset"][:count]]
    return sorted({0, scan.header_size, scan.end_offset + 1} | {o + 1 for o in offs} | set(offs))


def _compare(path: Path, starts: list[int], windows=(4096, 1 << 20)) -> list[int]:
    data = path.read_bytes()
    found = []
    for start in starts:
        want = find_record_pair_reference(data, start)
        for window in windows:
            assert find_record_pair(path, start, window=window) == want, (path, start, window)
        found.append(want)
    return found


def test_golden_journals_exist():
    assert len(GOLDEN_JOURNALS) >= 4, f"golden journals missing under {GOLDEN}"


@pytest.mark.parametrize("path", GOLDEN_JOURNALS, ids=[str(p.relative_to(GOLDEN)) for p in GOLDEN_JOURNALS])
def test_search_equals_its_twin_on_golden_journals(path: Path):
    scan = scan_journal(path)
    found = _compare(path, _starts(scan))
    # from a record's first byte the pair starts right there; past a clean end nothing follows
    if len(scan.records) >= 2 and scan.records["kind"][0] != fj.RecordKind.PADDING:
        assert found[_starts(scan).index(int(scan.records["offset"][0]))] == int(scan.records["offset"][0])
    if scan.end_kind.name == "CLEAN":
        assert found[_starts(scan).index(scan.end_offset + 1)] == -1


def _writer_journal(tmp: Path) -> Path:
    rnd = random.Random(7)
    ledgers = [LedgerSpec(i + 1, [rnd.randbytes(rnd.randint(1, 300)) for _ in range(6)]) for i in range(4)]
    wb = write_bookie(BookieSpec(ledgers, bookie_id="search-test:3181"), tmp / "bookie")
    return Path(wb.journal_files[0])


@pytest.mark.parametrize("damage", ["zeroed-middle", "flipped-length", "torn-tail", "garbage-tail"])
def test_search_equals_its_twin_on_damaged_writer_journals(tmp_path: Path, damage: str):
    src = _writer_journal(tmp_path)
    scan = scan_journal(src)
    data = bytearray(src.read_bytes())
    offs = [int(o) for o in scan.records["offset"]]
    mid = offs[len(offs) // 2]
    if damage == "zeroed-middle":
        data[mid:mid + 200] = bytes(200)
    elif damage == "flipped-length":
        data[mid] ^= 0x40
    elif damage == "torn-tail":
        data[offs[-1] + 8:scan.end_offset] = bytes(scan.end_offset - offs[-1] - 8)
    else:
        data[scan.end_offset + 700:scan.end_offset + 720] = random.Random(3).randbytes(20)
    path = tmp_path / "damaged.txn"
    path.write_bytes(bytes(data))
    _compare(path, sorted({mid, mid + 1, offs[-1] + 1, scan.end_offset + 1, scan.header_size}))


def _record(kind: str, rnd: random.Random) -> bytes:
    length = fj.RECORD_LENGTH
    if kind == "padding":
        pad = rnd.randint(0, 40)
        return fj.PADDING_RECORD.build(dict(padding_length=pad, padding=bytes(pad)))
    entry = {"data": rnd.randint(0, 9), "key": fj.META_LEDGER_KEY, "fence": fj.META_FENCE,
             "lac": fj.META_EXPLICIT_LAC, "force": fj.META_FORCE_LEDGER, "bad": -rnd.randint(1, 9)}[kind]
    body = fj.FORCE_LEDGER_BODY.ledger_id.build(rnd.randint(0, 5)) + \
        fj.FORCE_LEDGER_BODY.entry_id.subcon.subcon.build(entry) + rnd.randbytes(rnd.randint(0, 30))
    return length.build(len(body) + rnd.choice([0, 0, 0, 5, -3])) + body


def _generated(tmp_path: Path, parts, seed: int) -> tuple[bytes, str]:
    rnd = random.Random(seed)
    data = b"".join(_record(p, rnd) if isinstance(p, str) else p for p in parts)
    with tempfile.NamedTemporaryFile(dir=tmp_path, suffix=".txn", delete=False) as f:
        f.write(data)
    return data, f.name


_PARTS = st.lists(st.one_of(st.sampled_from(["data", "key", "fence", "lac", "force", "bad", "padding"]),
                            st.binary(min_size=0, max_size=40), st.sampled_from([bytes(4), bytes(9)])),
                  min_size=0, max_size=12)


# Each windowed search and its one-offset-at-a-time twin.
_SEARCHES = {"pair": (find_record_pair, find_record_pair_reference),
             "lone": (lambda path, start, window: list(lone_records(path, start, window=window)),
                      lone_records_reference)}


@pytest.mark.parametrize("search", sorted(_SEARCHES))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=_PARTS, seed=st.integers(0, 1 << 16), start=st.integers(0, 64))
def test_searches_equal_their_twins_on_generated_bytes(tmp_path: Path, search: str, parts, seed: int, start: int):
    data, path = _generated(tmp_path, parts, seed)
    windowed, reference = _SEARCHES[search]
    want = reference(data, start)
    for window in (1, 7, 64, 4096):
        assert windowed(path, start, window=window) == want


def test_a_last_record_is_lone_and_one_record_among_others_is_not(tmp_path: Path):
    fence = fj.RECORD_LENGTH.build(16) + fj.build_fence_body(3, 0)
    data = fj.RECORD_LENGTH.build(40) + (3).to_bytes(8, "big") + (0).to_bytes(8, "big") + bytes(24)
    path = tmp_path / "j.txn"
    path.write_bytes(fence + data + fence + bytes(64))
    assert list(lone_records(path, 0)) == [len(fence) + len(data)]
    padding = fj.PADDING_RECORD.build(dict(padding_length=8, padding=bytes(8)))   # (a flush's, after the last)
    path.write_bytes(fence + data + fence + padding + bytes(64))
    assert list(lone_records(path, 0)) == [len(fence) + len(data)]
