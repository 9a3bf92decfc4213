"""Pass 4's comparison of an entry log's ledgers map with the sums of its entries: the same ledgers,
in the same order, with the same sizes, as comparing the two as dicts, and without a dict per ledger."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.entrylogs.arrays import ENTRY_DTYPE, PROBLEM_DTYPE, EntryLogArrays
from bkdisk.formats.entrylog import EntryLogHeader
from bkdisk.fsck.passes import p4_entrylogs

LEDGERS = st.tuples(st.sampled_from([0, 1, 2**64 - 1]), st.integers(0, 6) | st.just(2**64 - 2))


def _scan(entries: list[tuple[tuple[int, int], int]], ledgers_map: dict) -> EntryLogArrays:
    e = np.zeros(len(entries), ENTRY_DTYPE)
    for i, ((s, l), size) in enumerate(entries):
        e[i]["offset"], e[i]["scope"], e[i]["ledger"], e[i]["size"] = 1024 + 64 * i, s, l, size
    return EntryLogArrays("0.log", 0, 1 << 20, EntryLogHeader(1, 1 << 19, len(ledgers_map)), None, ledgers_map,
                          None, 1 << 19, e, np.zeros(0, PROBLEM_DTYPE))


def _as_dicts(scan: EntryLogArrays) -> list[tuple[tuple[int, int], int | None, int | None]]:
    got, m = scan.computed_ledgers_map(), scan.ledgers_map
    return [(k, m.get(k), got.get(k)) for k in sorted(set(got) | set(m)) if m.get(k) != got.get(k)]


@settings(max_examples=200, deadline=None)
@given(entries=st.lists(st.tuples(LEDGERS, st.integers(0, 3)), max_size=12),
       edits=st.lists(st.tuples(LEDGERS, st.integers(-1, 40) | st.just(2**63 - 1) | st.just(2**64)), max_size=4),
       dropped=st.sets(LEDGERS, max_size=3))
def test_the_map_differences_are_those_of_comparing_dicts(entries, edits, dropped):
    scan = _scan(entries, {})
    m = scan.computed_ledgers_map()
    for k, v in edits:
        m[k] = v
    for k in dropped:
        m.pop(k, None)
    scan.ledgers_map = m
    want = _as_dicts(scan)
    assert p4_entrylogs._map_differences(scan) == want
    findings = list(p4_entrylogs._check_log(scan, SimpleNamespace(map_differences={}), 0))
    assert [(f.code.name, f.scope, f.ledger) for f in findings] == [("LEDGERS_MAP_MISMATCH", *k) for k, _a, _b in want]
    assert [f.detail for f in findings] == [f"ledger {p4_entrylogs.LedgerId(*k)}: map says {a} bytes, the entries "
                                            f"add up to {b}" for k, a, b in want]


def test_a_map_of_many_ledgers_is_compared_without_a_dict_of_the_entries(monkeypatch):
    n = 50_000
    entries = [((0, l), 100 + l % 7) for l in range(n)]
    scan = _scan(entries, {})
    m = scan.computed_ledgers_map()
    m[(0, 17)] += 1
    del m[(0, 40_000)]
    m[(0, n + 5)] = 9
    scan.ledgers_map = m

    def refused(self):
        raise AssertionError("a dict per ledger of the entries")
    monkeypatch.setattr(EntryLogArrays, "computed_ledgers_map", refused)
    got = [(f.ledger, f.detail) for f in p4_entrylogs._check_log(scan, SimpleNamespace(map_differences={}), 0)]
    assert got == [(17, "ledger 17: map says 108 bytes, the entries add up to 107"),
                   (40_000, "ledger 40000: map says None bytes, the entries add up to 106"),
                   (n + 5, f"ledger {n + 5}: map says 9 bytes, the entries add up to None")]


def test_interleaved_entries_are_counted_into_the_map_rows_without_a_sort_of_the_entries(monkeypatch):
    """Entries of many ledgers in random order (a busy bookie's log), ids over the 64-bit range, every
    ledger in the map: summed into the map's rows, the entries never sorted by ledger; the same
    differences as comparing dicts, a ledger of the map without entries among them."""
    from bkdisk.entrylogs import map_check
    rng = np.random.default_rng(41)
    ids = rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64)
    ids[:2] = [2**64 - 1, 0]
    pick = rng.integers(0, len(ids), 40_000)
    entries = [((int(s), int(ids[k])), int(z)) for s, k, z in zip(pick % 2, pick, rng.integers(32, 1000, len(pick)))]
    scan = _scan(entries, {})
    m = scan.computed_ledgers_map()
    first = next(iter(m))
    m[first] += 3
    m[(1, 7)] = 0               # a ledger the entries lack, whose map size is 0
    scan.ledgers_map = m
    want = _as_dicts(scan)
    assert [k for k, _a, _b in want] == sorted([first, (1, 7)])

    def refused(_scan):
        raise AssertionError("the entries sorted by ledger")
    monkeypatch.setattr(map_check, "entry_ledger_sums", refused)
    assert p4_entrylogs._map_differences(scan) == want
