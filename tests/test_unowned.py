"""diskio.kernels.unowned: the same array without a reference count, as a kernel passes it to helpers."""
from __future__ import annotations

import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bkdisk.diskio.config import kernel
from bkdisk.diskio.kernels import unowned


@kernel
def _at(a, i):
    return a[i]


@kernel
def _sum_through_helper(a):
    a = unowned(a)
    s = 0
    for i in range(a.size):
        s += _at(a, i)
    return s


@kernel
def _fill_through_view(a, v):
    b = unowned(a)
    for i in range(b.size):
        b[i] = v + i
    return b.shape[0], b.strides[0]


@settings(max_examples=40, deadline=None)
@given(a=hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(-2**40, 2**40)), step=st.integers(1, 4))
def test_an_unowned_array_reads_as_its_owner_contiguous_or_strided(a: np.ndarray, step: int):
    view = a[::step]
    assert _sum_through_helper(view) == int(view.sum())


def test_calls_through_an_unowned_array_leave_the_owners_references_as_they_were():
    a = np.arange(1000, dtype=np.int64)
    before = sys.getrefcount(a)
    for _ in range(200):
        _sum_through_helper(a)
        _fill_through_view(a[::2], 1)
    assert sys.getrefcount(a) == before


def test_writes_through_an_unowned_array_reach_the_owner_and_keep_its_shape():
    a = np.zeros(10, np.int64)
    strided = a[::3]
    shape, stride = _fill_through_view(strided, 7)
    assert (shape, stride) == (strided.shape[0], strided.strides[0])
    assert a.tolist() == [7, 0, 0, 8, 0, 0, 9, 0, 0, 10]
