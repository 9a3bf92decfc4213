"""An entry log's ledgers map read as arrays (entrylogs.ledgers_map.LedgersMap) reads as the format's
own dict (formats.entrylog.parse_ledgers_map): same items, same order, equal either way."""
from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.entrylogs.arrays import ledger_sums
from bkdisk.entrylogs.ledgers_map import LedgersMap
from bkdisk.entrylogs.reader import read_ledgers_map
from bkdisk.formats import entrylog as fe

IDS = st.sampled_from([0, 1, 2, 7, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1)
SIZES = st.integers(0, 5000) | st.sampled_from([-1, 2**62, 2**63 - 1, -2**63])
ITEM = st.tuples(st.sampled_from([0, 0, 1, 2**64 - 1]), IDS, SIZES)


def _batch(items: list[tuple[int, int, int]], scoped: bool) -> bytes:
    """One batch of the items as written, a ledger named twice kept twice."""
    if scoped:
        return fe.SCOPED_LEDGERS_MAP_BATCH.build(dict(size=20 + 24 * len(items), count=len(items), ledgers=[
            dict(scope_id=s, ledger_id=l, size=n) for s, l, n in items]))
    return fe.LEDGERS_MAP_BATCH.build(dict(size=20 + 16 * len(items), count=len(items), ledgers=[
        dict(ledger_id=l, size=n) for _s, l, n in items]))


@settings(max_examples=300, deadline=None)
@given(batches=st.lists(st.tuples(st.booleans(), st.lists(ITEM, min_size=1, max_size=12)), max_size=5),
       absent=st.tuples(st.integers(0, 3), IDS))
def test_a_map_read_as_arrays_is_the_declarations_dict_in_content_and_order(batches, absent):
    data = b"".join(_batch(items, scoped) for scoped, items in batches) + fe.ENTRY_SIZE.build(0)
    want = fe.parse_ledgers_map(data, 0)
    got = read_ledgers_map(lambda o, n: data[o:o + n], 0, len(data))
    assert isinstance(got, LedgersMap)
    assert list(got.items()) == list(want.items())
    assert list(got) == list(want) and list(got.keys()) == list(want.keys())
    assert list(got.values()) == list(want.values()) and len(got) == len(want)
    assert got == want and want == got and not got != want and not want != got
    assert dict(got) == want and dict(got.items()) == want
    assert all(got[k] == v and got.get(k) == v and k in got for k, v in want.items())
    assert (absent in got) == (absent in want) and got.get(absent) == want.get(absent)
    assert pickle.loads(pickle.dumps(got)) == want
    if want:
        k = next(iter(want))
        other = dict(want)
        other[k] += 1
        assert got != other and other != got and not got == other
        other.pop(k)
        assert got != other and other != got
    scope, ledger, size = got.scope, got.ledger, got.size
    assert scope.dtype == np.uint64 and ledger.dtype == np.uint64
    assert size.dtype == np.int64 or any(not -2**63 <= v < 2**63 for v in want.values())


def test_maps_of_the_same_items_in_another_order_are_equal_as_dicts_are():
    a = LedgersMap.summed(np.array([0, 0, 1], np.uint64), np.array([5, 3, 5], np.uint64), np.array([1, 2, 3]))
    b = LedgersMap.summed(np.array([1, 0, 0], np.uint64), np.array([5, 5, 3], np.uint64), np.array([3, 1, 2]))
    assert a == b and list(a) != list(b)
    assert a != LedgersMap.summed(np.array([1, 0, 0], np.uint64), np.array([5, 5, 3], np.uint64), np.array([3, 1, 9]))
    assert LedgersMap.empty() == {} and {} == LedgersMap.empty() and not LedgersMap.empty()


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([0, 1, 2**64 - 1]), st.sampled_from([0, 3, 9, 2**64 - 1]),
                               st.integers(0, 2**40)), max_size=40))
def test_ledger_sums_are_the_sums_a_dict_of_the_rows_gives_in_id_order(rows):
    """Rows in runs of one ledger or not: what the entries of a log sum to per ledger, as pass 4
    compares them with the log's ledgers map."""
    want: dict[tuple[int, int], int] = {}
    for s, l, w in rows:
        want[s, l] = want.get((s, l), 0) + w
    scope, ledger, sums = ledger_sums(np.array([r[0] for r in rows], np.uint64),
                                      np.array([r[1] for r in rows], np.uint64),
                                      np.array([r[2] for r in rows], np.int64))
    assert list(zip(scope.tolist(), ledger.tolist(), sums.tolist())) == [(*k, v) for k, v in sorted(want.items())]
    assert sums.dtype == np.int64
