"""audit.arrow_values: the rows and arrays pyarrow's own conversions give, by other means."""
import datetime

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.audit.arrow_values import ints, py_rows

_WHEN = st.integers(   # microseconds since the epoch a datetime holds: years 1-9999
    -62_135_596_800_000_000, 253_402_300_799_999_999)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), _WHEN), st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
                          st.one_of(st.none(), st.text(max_size=4))), max_size=30),
       st.sampled_from(["s", "ms", "us"]))
def test_py_rows_are_to_pylist(rows, unit):
    per = {"s": 1_000_000, "ms": 1_000, "us": 1}[unit]
    when = [None if w is None else w // per for w, _i, _t in rows]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(when, pa.int64()).cast(pa.timestamp(unit, tz="UTC")),
         pa.array(when, pa.int64()).cast(pa.timestamp(unit)),
         pa.array([i for _w, i, _t in rows], pa.int64()), pa.array([t for _w, _i, t in rows], pa.string())],
        names=["zoned", "naive", "n", "text"])
    assert py_rows(batch) == batch.to_pylist()
    assert py_rows(pa.Table.from_batches([batch, batch])) == pa.Table.from_batches([batch, batch]).to_pylist()
    for r in py_rows(batch):
        assert r["zoned"] is None or r["zoned"].tzinfo == datetime.UTC


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40), st.integers(0, 10), st.integers(1, 3),
       st.sampled_from([pa.int64(), pa.int32(), pa.uint64(), pa.int8()]))
def test_ints_are_to_numpy_of_any_slice_and_chunks(values, start, chunks, kind):
    info = np.iinfo(kind.to_pandas_dtype())
    values = [min(max(v, int(info.min)), int(info.max)) for v in values]
    col = pa.array(values, kind)[start:]
    assert np.array_equal(ints(col), col.to_numpy()) and ints(col).dtype == col.to_numpy().dtype
    chunked = pa.chunked_array([col] * chunks, kind)
    assert np.array_equal(ints(chunked), chunked.to_numpy())


def test_ints_refuses_a_column_with_nulls_or_not_integers():
    with pytest.raises(ValueError, match="1 nulls"):
        ints(pa.array([1, None], pa.int64()))
    with pytest.raises(ValueError, match="expected an integer column"):
        ints(pa.array([1.5], pa.float64()))
