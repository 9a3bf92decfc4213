"""Pass 5's locations grouped by range of entry-log ids: built again per range when the ranges are few,
routed once (and spilled) when they are many; both give each range the same rows in index order."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.fsck.passes.p5_crosscheck import location_ranges
from bkdisk.fsck.passes.p5_crosscheck.location_ranges import HalvesRouted, RereadLocations, routed_locations
from bkdisk.indexfiles.arrays import INDEX_FILE_DTYPE, LOCATION_DTYPE


def _inputs(seed: int, n: int, logs: int, cut: int):
    rng = np.random.default_rng(seed)
    files = np.zeros(5, INDEX_FILE_DTYPE)
    files["scope"], files["ledger"] = rng.integers(0, 3, 5), rng.integers(0, 1 << 40, 5)
    locs = np.zeros(n, LOCATION_DTYPE)
    locs["file"], locs["entry"] = rng.integers(0, 5, n), rng.integers(0, 1000, n)
    locs["log"], locs["pos"] = rng.integers(0, logs + 2, n), rng.integers(0, 2000, n)   # some logs unscanned
    ids = np.unique(rng.integers(0, logs + 2, logs)).astype(np.uint64)
    sizes = rng.integers(0, 2000, len(ids)).astype(np.int64)                           # some past the end
    bounds = ids[1::cut] if len(ids) > 1 else ids[:0]
    return locs, files, ids, sizes, bounds


def _ranges(held) -> list[tuple[int, np.ndarray]]:
    try:
        return [(r, rows.copy()) for r, rows in held.ranges()]
    finally:
        held.close()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000), logs=st.integers(1, 12), cut=st.integers(1, 3),
       chunk=st.sampled_from([7, 1 << 20]), runs=st.booleans())
def test_ranges_read_again_are_the_ranges_routed_and_spilled(tmp_path_factory, seed, n, logs, cut, chunk, runs):
    """Whatever chunks the locations are read in; with runs of one log (as an index's locations come
    from a log written a ledger at a time) or not (as they come from a busy bookie's logs)."""
    locs, _files, ids, sizes, bounds = _inputs(seed, n, logs, cut)
    if runs:
        locs = locs[np.argsort(locs["log"], kind="stable")]
    old = location_ranges.CHUNK
    location_ranges.CHUNK = chunk
    try:
        with SpillFolder(MemoryLimit(1, str(tmp_path_factory.mktemp("spill")))) as folder:
            again = routed_locations(locs, ids, sizes, bounds, 10**9, folder, few=10**9)
            routed = routed_locations(locs, ids, sizes, bounds, 64, folder, few=0)   # spills at once
            # (400 bytes: each half's share holds a chunk's table, and spills at once; 10**9: nothing spills)
            halves = routed_locations(locs, ids, sizes, bounds, 400 if runs else 10**9, folder, few=0, threads=2)
            assert isinstance(again, RereadLocations) and not isinstance(routed, RereadLocations)
            assert isinstance(halves, HalvesRouted) == (n >= 2 * chunk)
            a, b, c = _ranges(again), _ranges(routed), _ranges(halves)
    finally:
        location_ranges.CHUNK = old
    assert [r for r, _ in a] == [r for r, _ in b] == [r for r, _ in c] == list(range(len(bounds) + 1))
    for (_, x), (_, y), (_, z) in zip(a, b, c):
        assert x.dtype == y.dtype == z.dtype and x.tobytes() == y.tobytes() == z.tobytes()
    kept = sum(len(x) for _, x in a)
    w = np.searchsorted(ids, locs["log"].astype(np.uint64)).clip(0, max(len(ids) - 1, 0))
    inside = (ids[w] == locs["log"]) & (locs["pos"] < sizes[w]) if len(ids) else np.zeros(n, bool)
    assert kept == int(inside.sum())


@pytest.mark.parametrize("few", [10**9, 0])
def test_routing_asks_to_keep_going_before_each_chunk_and_stops_when_told(tmp_path, few, monkeypatch):
    """A check that failed elsewhere stops the routing on its lane within a chunk, on either path."""
    locs, _files, ids, sizes, bounds = _inputs(7, 100, 6, 1)
    monkeypatch.setattr(location_ranges, "CHUNK", 7)
    calls = []

    def keep_going():
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("stopped")
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        with pytest.raises(RuntimeError, match="stopped"):
            routed_locations(locs, ids, sizes, bounds, 64, folder, few=few, keep_going=keep_going)
    assert len(calls) == 3


@pytest.mark.parametrize("failing", ["both", "fsck-routing", "MainThread"])
def test_routing_in_halves_stops_when_told_and_leaves_no_file(tmp_path, monkeypatch, failing):
    """Whichever half is told to stop (the other then ends its half), nothing either spilled is left."""
    locs, _files, ids, sizes, bounds = _inputs(7, 3000, 6, 1)
    monkeypatch.setattr(location_ranges, "CHUNK", 7)
    calls = []

    def keep_going():
        calls.append(1)
        if len(calls) > 40 and failing in ("both", threading.current_thread().name.split("_")[0]):
            raise RuntimeError("stopped")
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        with pytest.raises(RuntimeError, match="stopped"):
            routed_locations(locs, ids, sizes, bounds, 400, folder, few=0, keep_going=keep_going, threads=2)
        assert os.listdir(folder.get()) == []
    if failing == "both":   # each half stopped within a chunk of being told
        assert len(calls) <= 42


def test_a_half_that_fails_stops_the_other_and_its_error_is_the_routing_s(tmp_path, monkeypatch):
    locs, _files, ids, sizes, bounds = _inputs(7, 3000, 6, 1)   # (214 chunks a half)
    monkeypatch.setattr(location_ranges, "CHUNK", 7)
    failed = threading.Event()
    after: list[int] = []

    def keep_going():
        if threading.current_thread().name.startswith("fsck-routing"):
            failed.set()
            raise RuntimeError("no room on the spill folder's disk")
        if failed.is_set():
            after.append(1)
        else:
            failed.wait(30)
        time.sleep(0.001)   # (the failed half gets the interpreter to say so)
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        with pytest.raises(RuntimeError, match="no room"):
            routed_locations(locs, ids, sizes, bounds, 400, folder, few=0, keep_going=keep_going, threads=2)
        assert os.listdir(folder.get()) == []
    # the first half stopped a few chunks after the second failed, not at the end of its own
    assert len(after) < 50
