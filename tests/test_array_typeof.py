"""A plain array's numba type is worked out without numpy.ma (diskio.array_typeof), and is the type
numba's own rule gives it; other arrays, and dtypes numba cannot type, get numba's answer."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba.core import errors
from numba.core.typing import typeof as numba_typeof

from bkdisk.diskio.array_typeof import plain_array_rule
from bkdisk.entrylogs.arrays import ENTRY_DTYPE

DTYPES = [np.uint8, np.int16, np.int64, np.uint64, np.float32, np.float64, np.bool_, np.complex128,
          np.dtype("M8[ns]"), np.dtype(">u4"), ENTRY_DTYPE, np.dtype([("a", np.int32), ("b", "S3")])]
NUMBA_RULE = numba_typeof._typeof_ndarray   # numba's rule for arrays, as numba 0.68 declares it
RULE = plain_array_rule(NUMBA_RULE)


def _both(a):
    def outcome(rule):
        try:
            return rule(a, None)
        except errors.NumbaError as e:
            return type(e), str(e)
    return outcome(RULE), outcome(NUMBA_RULE)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DTYPES), st.lists(st.integers(0, 5), max_size=3), st.sampled_from(["C", "F"]),
       st.integers(1, 3), st.booleans(), st.booleans())
def test_a_plain_array_gets_numbas_type(dtype, shape, order, step, readonly, transpose):
    a = np.zeros(shape, dtype, order=order)
    if a.ndim:
        a = a[::step]
    if transpose:
        a = a.T
    a.flags.writeable = not readonly
    ours, numbas = _both(a)
    assert ours == numbas


@pytest.mark.parametrize("make", [
    lambda: np.ma.masked_array(np.arange(4)),            # refused by numba, in its words
    lambda: np.zeros(3, object),                         # a dtype numba cannot type
    lambda: np.zeros(3, "U2"),
    lambda: np.arange(6).view(np.matrix),                # a subclass: numba's rule decides
])
def test_other_arrays_get_numbas_answer(make):
    ours, numbas = _both(make())
    assert ours == numbas
