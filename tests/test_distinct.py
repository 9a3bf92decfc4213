"""diskio.distinct gives what np.unique gives: the sorted distinct values of a column, of any order."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.diskio.distinct import distinct


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
