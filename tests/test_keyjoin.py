"""KeySet answers as a dict of its rows does: each looked-up row's first equal row in the set, or -1,
whether the rows are searched in the order given or in the order of their mixes, and when mixes of
different rows collide."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.diskio import sorted_search
from bkdisk.fsck import keyjoin
from bkdisk.fsck.keyjoin import KeySet

ROWS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**64 - 1) | st.integers(0, 5), st.integers(-2, 6)),
                max_size=40)


def _columns(rows: list[tuple[int, int, int]]) -> list[np.ndarray]:
    return [np.array([r[0] for r in rows], np.uint64), np.array([r[1] for r in rows], np.uint64),
            np.array([r[2] for r in rows], np.int64)]


@pytest.mark.parametrize("weak_mix", [False, True])
@pytest.mark.parametrize("sorted_from", [1, 10**9])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ref=ROWS, asked=ROWS)
def test_index_of_is_the_first_equal_row_as_a_dict_gives_it(monkeypatch, weak_mix, sorted_from, ref, asked):
    monkeypatch.setattr(sorted_search, "SORTED_FROM", sorted_from)
    if weak_mix:   # (a mix of three values: most rows collide with others)
        monkeypatch.setattr(keyjoin, "mix", lambda cols: np.asarray(cols[-1]).astype(np.uint64) % np.uint64(3))
    first: dict[tuple[int, int, int], int] = {}
    for i, r in enumerate(ref):
        first.setdefault(r, i)
    got = KeySet(_columns(ref)).index_of(_columns(asked) if asked else [])
    assert got.tolist() == [first.get(r, -1) for r in asked]


@pytest.mark.parametrize("weak_mix", [False, True])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ref=ROWS)
def test_own_rows_are_the_sets_own_rows_looked_up(monkeypatch, weak_mix, ref):
    if weak_mix:
        monkeypatch.setattr(keyjoin, "mix", lambda cols: np.asarray(cols[-1]).astype(np.uint64) % np.uint64(3))
    first: dict[tuple[int, int, int], int] = {}
    for i, r in enumerate(ref):
        first.setdefault(r, i)
    assert KeySet(_columns(ref)).own_rows().tolist() == [first[r] for r in ref]
