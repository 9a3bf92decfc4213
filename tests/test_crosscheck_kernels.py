"""Passes 3 and 5's jitted location steps give what numpy's searchsorted and stable argsort give."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.diskio.kernels import stable_partition
from bkdisk.fsck.passes.p5_crosscheck.kernels import NO_ENTRY, OTHER_ENTRY, SAME, match_locations
from bkdisk.fsck.placed_locations import misplaced_locations
from bkdisk.indexfiles.arrays import LOCATION_DTYPE

keys = st.lists(st.integers(0, 60), max_size=40)


@settings(max_examples=200, deadline=None)
@given(entry_keys=keys, wanted=st.lists(st.tuples(st.integers(0, 65), st.integers(0, 2)), max_size=40))
def test_match_locations_equals_a_sorted_search(entry_keys, wanted):
    t_key = np.array(sorted(entry_keys), np.uint64)
    t_ids = (t_key % 3).astype(np.uint64)   # each entry's (scope, ledger, entry) follows from its key
    l_key = np.array([k for k, _ in wanted], np.uint64)
    l_ids = np.array([(k + d) % 3 for k, d in wanted], np.uint64)   # d != 0: another entry's ids
    slot, verdict = np.empty(len(l_key), np.int64), np.empty(len(l_key), np.uint8)
    pointed = np.zeros(len(t_key), bool)
    match_locations(t_key, t_ids, t_ids, t_ids.astype(np.int64), l_key, l_ids, l_ids, l_ids.astype(np.int64), slot,
                    verdict, pointed)
    n = len(t_key)
    w = np.minimum(np.searchsorted(t_key, l_key), max(n - 1, 0))
    hit = (t_key[w] == l_key) if n else np.zeros(len(l_key), bool)
    same = hit & (t_ids[w] == l_ids) if n else np.zeros(len(l_key), bool)
    assert slot.tolist() == (w if n else np.zeros(len(l_key), np.int64)).tolist()
    assert verdict.tolist() == np.where(same, SAME, np.where(hit, OTHER_ENTRY, NO_ENTRY)).tolist()
    want_pointed = np.zeros(n, bool)
    want_pointed[w[same]] = True
    assert pointed.tolist() == want_pointed.tolist()


@settings(max_examples=200, deadline=None)
@given(parts=st.integers(1, 6), data=st.data())
def test_stable_partition_equals_a_stable_argsort(parts, data):
    part_of = np.array(data.draw(st.lists(st.integers(0, parts - 1), max_size=50)), np.int64)
    order, cuts = np.empty(len(part_of), np.int64), np.empty(parts + 1, np.int64)
    stable_partition(part_of, parts, order, cuts)
    want = np.argsort(part_of, kind="stable")
    assert order.tolist() == want.tolist()
    assert cuts.tolist() == np.searchsorted(part_of[want], np.arange(parts + 1)).tolist()


@settings(max_examples=200, deadline=None)
@given(logs=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 300)), max_size=6, unique_by=lambda t: t[0]),
       wanted=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 320)), max_size=60), shortest=st.integers(0, 40))
def test_misplaced_locations_are_those_a_sorted_search_finds(logs, wanted, shortest):
    ids = np.array(sorted(i for i, _ in logs), np.uint64)
    sizes = np.array([s for _, s in sorted(logs)], np.int64)
    locs = np.zeros(len(wanted), LOCATION_DTYPE)   # (the fields as the index walk's rows hold them)
    locs["log"], locs["pos"] = [w for w, _ in wanted], [p for _, p in wanted]
    missing, past = np.empty(len(locs), np.int64), np.empty(len(locs), np.int64)
    n_missing, n_past = misplaced_locations(locs["log"], locs["pos"], ids, sizes, shortest, missing, past)
    w = np.minimum(np.searchsorted(ids, locs["log"].astype(np.uint64)), max(len(ids) - 1, 0))
    exists = (ids[w] == locs["log"]) if len(ids) else np.zeros(len(locs), bool)
    fits = exists & (locs["pos"].astype(np.int64) + shortest <= (sizes[w] if len(ids) else 0))
    assert missing[:n_missing].tolist() == np.flatnonzero(~exists).tolist()
    assert past[:n_past].tolist() == np.flatnonzero(exists & ~fits).tolist()
