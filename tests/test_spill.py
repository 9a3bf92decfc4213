"""The spill machinery: a table partitioned by key gives the same rows, in the same order, whether it
was held in memory or spilled; its temporary folder is never in a bookie's dirs and never outlives
its run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.diskio.spill import PREFIX, MemoryLimit, RangeSpill, SpillError, SpillFolder, remove_stale, split_ranges

DT = np.dtype([("key", "<u8"), ("v", "<i8")])


def _route(bounds):
    return lambda rows: np.searchsorted(bounds, rows["key"], side="right")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 999), max_size=300), max_size=8), st.integers(1, 6))
def test_spilled_and_held_tables_give_the_same_ranges(tmp_path_factory, batches, n):
    bounds = np.sort(np.random.default_rng(n).choice(1000, n - 1, replace=False)).astype(np.uint64)
    out = []
    for budget in (1 << 40, 1):   # all in memory; spilled at every append
        folder = SpillFolder(MemoryLimit(1, str(tmp_path_factory.mktemp("spill"))))
        t = RangeSpill(DT, _route(bounds), n, budget, folder)
        serial = 0
        for b in batches:
            rows = np.zeros(len(b), DT)
            rows["key"], rows["v"] = b, np.arange(serial, serial + len(b))
            serial += len(b)
            t.append(rows)
        got = [(i, r.tolist()) for i, r in t.ranges()]
        assert t.spilled == (budget == 1 and serial > 0)
        out.append(got)
        folder.close()
        assert folder.path is None
    assert out[0] == out[1]
    everything = [r for _i, rows in out[0] for r in rows]
    assert sorted(everything, key=lambda r: r[1]) == [(k, i) for i, k in enumerate(k for b in batches for k in b)]
    for i, rows in out[0]:   # each range holds its keys, in append order
        lo = bounds[i - 1] if i else 0
        assert all(lo <= k and (i == n - 1 or k < bounds[i]) for k, _v in rows)
        assert [v for _k, v in rows] == sorted(v for _k, v in rows)


@pytest.mark.parametrize("kept", [0, 10, 499, 500, 1000])
def test_rows_appended_grouped_count_every_byte_they_keep_alive(tmp_path, kept):
    """A range's rows are views of the array they were grouped in: what they keep alive is counted
    against the budget (the rows copied out when they are few), so the held rows never pass it unseen."""
    dtype = np.dtype([("k", "<i8"), ("v", "<u8")])
    rows = np.zeros(1000, dtype)
    rows["k"][:kept] = np.arange(kept)
    at = np.array([0, kept // 3, kept // 2, kept], np.int64)
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        spill = RangeSpill(dtype, None, 3, 1 << 30, folder)
        spill.append_grouped(rows, at)
        alive = {id(a.base if a.base is not None else a): (a.base if a.base is not None else a).nbytes
                 for held in spill._held for a in held}
        assert spill._held_bytes >= sum(alive.values()), (spill._held_bytes, alive)
        assert spill._held_bytes <= max(rows.nbytes, 1)
        got = [r for _, r in spill.ranges()]
        assert [len(r) for r in got] == np.diff(at).tolist() and np.concatenate(got)["k"].tolist() == list(range(kept))
        spill.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=200), max_size=8), st.integers(1, 4000))
def test_a_table_the_spill_says_it_keeps_nothing_of_may_be_filled_again(tmp_path_factory, chunks, budget):
    """The router fills one table again whenever append_grouped says nothing of it is held: the ranges
    give every row as appended, the table overwritten with garbage each time."""
    dtype = np.dtype([("k", "<i8"), ("r", "u1")])
    folder = SpillFolder(MemoryLimit(1, str(tmp_path_factory.mktemp("grouped"))))
    spill = RangeSpill(dtype, None, 4, budget, folder)
    table, serial, want = None, 0, [[] for _ in range(4)]
    for ranges in chunks:
        if table is None or len(table) < 200:
            table = np.empty(200, dtype)
        order = np.argsort(np.array(ranges, np.int64), kind="stable")
        keys = np.arange(serial, serial + len(ranges))[order]
        serial += len(ranges)
        table["k"][:len(ranges)], table["r"][:len(ranges)] = keys, np.array(ranges, np.uint8)[order]
        at = np.concatenate([[0], np.cumsum(np.bincount(np.array(ranges, np.int64), minlength=4))]).astype(np.int64)
        for r, k in zip(np.array(ranges, np.int64)[order].tolist(), keys.tolist()):
            want[r].append(k)
        if spill.append_grouped(table[:len(ranges)] if ranges else table[:0], at):
            table["k"], table["r"] = -1, 255   # filled again: nothing held may change
        else:
            table = None
    got = [(i, r["k"].tolist()) for i, r in spill.ranges()]
    assert got == [(i, want[i]) for i in range(4)]
    spill.close()
    folder.close()


def test_split_ranges_bounds_each_range_weight():
    keys = np.arange(10, dtype=np.uint64)
    b = split_ranges(keys, np.full(10, 3), 7)
    assert b.tolist() == [2, 4, 6, 8]
    assert split_ranges(keys, np.full(10, 100), 7).tolist() == list(range(1, 10))   # one key over the limit alone


def test_folder_inside_a_bookie_dir_is_refused(tmp_path):
    bookie = tmp_path / "ledgers"
    (bookie / "current").mkdir(parents=True)
    with pytest.raises(SpillError, match="inside the bookie's dir"):
        SpillFolder(MemoryLimit(1, str(bookie / "current")), [str(bookie)])
    SpillFolder(MemoryLimit(1, str(tmp_path)), [str(bookie)])   # beside it: fine


def test_folder_is_made_on_use_and_removed_on_close(tmp_path):
    f = SpillFolder(MemoryLimit(1, str(tmp_path)))
    assert os.listdir(tmp_path) == []
    p = f.get()
    assert os.path.basename(p).startswith(PREFIX) and os.path.isdir(p)
    with f:
        pass
    assert os.listdir(tmp_path) == []


def test_a_killed_runs_folder_is_removed_by_the_next_run(tmp_path):
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os
        from bkdisk.diskio.spill import MemoryLimit, SpillFolder
        print(SpillFolder(MemoryLimit(1, {str(tmp_path)!r})).get(), flush=True)
        os._exit(0)   # as a process killed with no chance to clean up
        """)], capture_output=True, text=True, check=True)
    stale = child.stdout.strip()
    assert os.path.isdir(stale)
    mine = SpillFolder(MemoryLimit(1, str(tmp_path))).get()   # made by a run whose process lives
    assert remove_stale(str(tmp_path)) == [] and os.path.isdir(mine)
    assert not os.path.exists(stale)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_folder_is_removed_when_the_run_is_interrupted(tmp_path, sig):
    # The run as a terminal's Ctrl-C finds it: a shell's background job (this suite, run by a script)
    # is started with SIGINT ignored, which Python keeps, and the child would sleep through it.
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import signal, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from bkdisk.diskio.spill import MemoryLimit, SpillFolder
        with SpillFolder(MemoryLimit(1, {str(tmp_path)!r})) as f:
            print(f.get(), flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    made = p.stdout.readline().strip()
    assert os.path.isdir(made)
    p.send_signal(sig)
    p.wait(timeout=30)
    assert os.listdir(tmp_path) == []
