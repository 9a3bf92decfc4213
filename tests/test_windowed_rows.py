"""Rows of a structured table copied as bytes (diskio.windowed: growing and finishing scanner columns,
joining digest parts) equal numpy's own copies, field for field."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.digests.verify import DIGEST_DTYPE
from bkdisk.diskio.windowed import Columns, concat_rows
from bkdisk.entrylogs.arrays import ENTRY_DTYPE


def _rows(dtype: np.dtype, raw: bytes) -> np.ndarray:
    n = len(raw) // dtype.itemsize
    return np.frombuffer(raw[:n * dtype.itemsize], dtype).copy()


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=53 * 40), st.integers(1, 50), st.integers(0, 3))
def test_grown_and_finished_columns_hold_the_rows_written(raw, capacity, grows):
    rows = _rows(ENTRY_DTYPE, raw)
    cols = Columns(ENTRY_DTYPE, max(capacity, len(rows)))
    cols.table(0, len(rows))[:] = rows
    for _ in range(grows):
        cols.grow_if_full(len(cols.table(0, 1 << 30)))
    done = cols.finished(len(rows))
    assert done.dtype == ENTRY_DTYPE and done.tobytes() == rows.tobytes()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=11 * 20), max_size=6))
def test_concat_rows_is_numpys_concatenate(raws):
    parts = [_rows(DIGEST_DTYPE, r) for r in raws]
    got = concat_rows(parts, DIGEST_DTYPE)
    want = np.concatenate(parts) if parts else np.zeros(0, DIGEST_DTYPE)
    assert got.dtype == DIGEST_DTYPE and np.array_equal(got, want) and got.tobytes() == want.tobytes()
