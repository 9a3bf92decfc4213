"""The pages a light walk asks the kernel for ahead (diskio.mapped.page_runs, will_need): exactly the
pages its records' headers lie on, as runs of adjacent pages, one request per run; of them only the
pages not in the page cache (diskio.read_ahead.missing_runs)."""
import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.diskio.mapped import page_runs
from bkdisk.diskio.read_ahead import missing_runs, will_need

PAGE = 4096


def _pages(offsets, span):
    return sorted({p for o in offsets for p in range(o // PAGE, (o + max(span, 1) - 1) // PAGE + 1)})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 1 << 22), max_size=60), st.integers(0, 3 * PAGE))
def test_runs_cover_the_records_pages_and_no_other(offsets, span):
    first, n = page_runs(np.array(offsets, np.int64), span, PAGE)   # (in any order)
    got = [int(p) for f, k in zip(first, n, strict=True) for p in range(f, f + k)]
    assert got == _pages(offsets, span)                        # every page once, in order
    assert all(int(k) >= 1 for k in n)
    assert all(first[i + 1] > first[i] + n[i] for i in range(len(first) - 1))   # no two runs adjacent


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 1 << 18), max_size=40), st.integers(0, 3 * PAGE), st.data())
def test_the_runs_asked_are_the_wanted_pages_not_cached(offsets, span, data):
    first, n = page_runs(np.array(offsets, np.int64), span, PAGE)
    size = int(first[-1] + n[-1]) if len(first) else 0
    cached = np.array(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)), np.bool_)
    got_first, got_n = missing_runs(first, n, cached)
    got = [int(p) for f, k in zip(got_first, got_n, strict=True) for p in range(f, f + k)]
    assert got == [p for p in _pages(offsets, span) if not cached[p]]   # every such page once, in order
    assert all(int(k) >= 1 for k in got_n)
    assert all(got_first[i + 1] > got_first[i] + got_n[i] for i in range(len(got_first) - 1))


def test_headers_30_kb_apart_are_a_request_each_and_touching_ones_one(tmp_path):
    at = np.arange(0, 10 * 30_000, 30_000, dtype=np.int64)
    first, n = page_runs(at, 37, PAGE)
    assert len(first) == 10 and int(n.sum()) == len(_pages(at.tolist(), 37))   # a request per record
    first, n = page_runs(np.array([0, 100, 4090, 8192, 20_000]), 37, PAGE)   # pages 0-2 touch, 4 alone
    assert first.tolist() == [0, 4] and n.tolist() == [3, 1]
    p = tmp_path / "log"
    p.write_bytes(os.urandom(3 * 30_000))
    fd = os.open(p, os.O_RDONLY)
    try:
        will_need(fd, at[:3], 37)   # advice only: no error, nothing read here
    finally:
        os.close(fd)
