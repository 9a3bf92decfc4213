"""Keys looked up in their sorted order land where a plain binary search lands, for either side, in a
column that is a field of a table, below and above the count from which they are sorted first."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.diskio import sorted_search


@pytest.mark.parametrize("sorted_from", [1, 10**9])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.integers(0, (1 << 64) - 1), max_size=60),
       wanted=st.lists(st.integers(0, (1 << 64) - 1), max_size=60))
def test_keys_searched_in_their_sorted_order_land_where_a_plain_search_lands(monkeypatch, sorted_from, keys, wanted):
    monkeypatch.setattr(sorted_search, "SORTED_FROM", sorted_from)
    k, w = np.array(sorted(keys), np.uint64), np.array(wanted + keys[:5], np.uint64)
    table = np.zeros(len(k), [("x", "<i8"), ("at", "<u8")])   # (a field of a table: not contiguous)
    table["at"] = k
    for side in ("left", "right"):
        assert sorted_search.searched_in_order(table["at"], w, side).tolist() == np.searchsorted(k, w, side).tolist()
