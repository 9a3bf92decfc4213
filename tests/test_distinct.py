"""diskio.distinct gives what np.unique gives (the sorted distinct values of a column, of any order), what
np.isin gives against distinct sorted values, and where each run of rows of one (scope, ledger) begins."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bkdisk.diskio.distinct as distinct_module
from bkdisk.diskio.distinct import PairSet, distinct, distinct_rows, members, run_heads, run_starts, span_indices


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 5), max_size=60), runs=st.booleans(),
       dtype=st.sampled_from([np.uint64, np.int64, np.uint8]))
def test_distinct_is_np_unique(values, runs, dtype):
    a = np.array(values, np.uint64)
    if runs:   # (ids in runs, as a log holds them)
        a = np.repeat(a, 3)
    a = a.astype(dtype)
    got = distinct(a)
    assert got.dtype == a.dtype and np.array_equal(got, np.unique(a))


INTS = [np.uint64, np.int64, np.uint32, np.int32, np.uint8]


@settings(max_examples=500, deadline=None)
@given(values=st.lists(st.integers(-2**63, 2**64 - 1) | st.integers(-3, 5) | st.sampled_from([2**32 + 1, 2**63]),
                       max_size=40),
       among=st.lists(st.integers(-2**63, 2**64 - 1) | st.integers(-3, 5) | st.sampled_from([2**32 + 1, 2**63]),
                      max_size=40),
       value_type=st.sampled_from(INTS), among_type=st.sampled_from(INTS))
def test_members_is_membership_against_distinct_sorted_values_of_any_integer_width(values, among, value_type,
                                                                                   among_type):
    """(ledger ids over the whole unsigned range, negatives, near neighbours, and the two sides of
    different signs and widths: compared as integers, never as floats or truncated)"""
    def fitting(xs, t):
        lo, hi = np.iinfo(t).min, np.iinfo(t).max
        return np.array([x for x in xs if lo <= x <= hi], t)
    a, b = fitting(values, value_type), np.unique(fitting(among, among_type))
    got = members(a, b)
    assert got.dtype == bool and got.tolist() == [int(v) in set(b.tolist()) for v in a.tolist()]


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), max_size=40))
def test_run_starts_are_the_rows_whose_pair_differs_from_the_row_before(pairs):
    scope = np.array([p[0] for p in pairs], np.uint64)
    ledger = np.array([p[1] for p in pairs], np.uint64)
    want = [i for i in range(len(pairs)) if i == 0 or pairs[i] != pairs[i - 1]]
    assert run_starts(scope, ledger).tolist() == want
    assert np.flatnonzero(run_heads(scope, ledger)).tolist() == want


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**64 - 1) | st.integers(0, 2),
                               st.integers(0, 2**64 - 1) | st.integers(0, 4)), max_size=60))
def test_distinct_rows_are_np_unique_of_the_rows_as_records(rows):
    """(a ledger dir's index, a scope, a ledger id: ids over the whole unsigned 64-bit range)"""
    cols = (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.uint64),
            np.array([r[2] for r in rows], np.uint64))
    records = np.zeros(len(rows), [("g", "<i8"), ("s", "<u8"), ("l", "<u8")])
    records["g"], records["s"], records["l"] = cols
    want, want_inverse = np.unique(records, return_inverse=True)
    got, inverse = distinct_rows(*cols)
    assert list(zip(*(c.tolist() for c in got))) == want.tolist()
    assert [c.dtype for c in got] == [c.dtype for c in cols]
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 5)), max_size=30))
def test_span_indices_are_each_span_in_turn(spans):
    first = np.array([s[0] for s in spans], np.int64)
    lengths = np.array([s[1] for s in spans], np.int64)
    got = span_indices(first, lengths)
    assert got.dtype == np.int64 and got.tolist() == [f + j for f, n in spans for j in range(n)]


PAIR = st.tuples(st.integers(0, 3) | st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1) | st.integers(0, 5))


@settings(max_examples=300, deadline=None)
@given(kept=st.lists(PAIR, max_size=40), asked=st.lists(PAIR, max_size=40))
def test_a_pair_set_holds_what_a_set_of_tuples_holds(kept, asked):
    got = PairSet(np.array([s for s, _ in kept], np.uint64), np.array([led for _, led in kept], np.uint64))
    assert sorted(set(kept)) == got.pairs() and len(got) == len(set(kept))
    asked += kept[:3]
    for few in (64, 1):   # (the scopes searched one at a time, and a sort of both sets together)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(distinct_module, "FEW_SCOPES", few)
            found = got.contains(np.array([s for s, _ in asked], np.uint64),
                                 np.array([led for _, led in asked], np.uint64))
        assert found.dtype == np.bool_ and found.tolist() == [p in set(kept) for p in asked]
    again = PairSet(np.array([s for s, _ in reversed(kept)], np.uint64),
                    np.array([led for _, led in reversed(kept)], np.uint64))
    assert again == got and (len(kept) == 0 or PairSet(got.scope[1:], got.ledger[1:]) != got)


def test_ledgers_without_metadata_load_no_numpy_ma():
    """The DbLedgerStorage check's question "which ledgers with locations has the ledgers index no
    entry for" is asked of thousands of ids: np.isin would sort them through np.unique, whose first call
    loads numpy.ma (7-13 ms of the command); diskio.distinct.members does not."""
    import subprocess
    import sys
    script = (
        "import sys, numpy as np\n"
        "from bkdisk.rocksdbfiles.dbindex import LedgerDirIndex, ledgers_without_metadata\n"
        "spread = lambda i: i * 0x9E3779B97F4A7C15 % (1 << 63)   # ids over the whole signed range\n"
        "known = {spread(i): None for i in range(0, 40000, 2)}\n"
        "ids = np.array(sorted(spread(i) for i in range(0, 30000, 3)), np.int64)\n"
        "idx = LedgerDirIndex('x', ledgers=known, ledger_ids=ids, ledger_counts=np.ones(len(ids), np.int64))\n"
        "got = ledgers_without_metadata(idx)\n"
        "assert sorted(got) == sorted(spread(i) for i in range(0, 30000, 3) if i % 2), 'wrong ledgers'\n"
        "print('numpy.ma' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
