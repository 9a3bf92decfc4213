"""bench.same_outputs compares rows, not file layouts: the same rows in other row groups are the same,
one changed value or a dropped row is not."""
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.same_outputs import _parquet_digest


def _write(path, table: pa.Table, group: int) -> str:
    pq.write_table(table, path, row_group_size=group)
    return str(path)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 700), g1=st.integers(1, 300), g2=st.integers(1, 300), slice_rows=st.integers(1, 128))
def test_the_same_rows_in_any_row_groups_digest_alike(tmp_path_factory, n, g1, g2, slice_rows):
    d = tmp_path_factory.mktemp("same")
    t = pa.table({"a": pa.array(range(n), pa.int64()), "s": pa.array([f"r{i % 7}" for i in range(n)]),
                  "seconds": pa.array([float(i) for i in range(n)])})
    t2 = t.set_column(2, "seconds", pa.array([0.5] * n))   # a column the comparison drops
    a = _parquet_digest(_write(d / "a.parquet", t, g1), ("seconds",), slice_rows)
    b = _parquet_digest(_write(d / "b.parquet", t2, g2), ("seconds",), slice_rows)
    assert a == b
    if n:
        changed = t.set_column(0, "a", pa.array([*range(n - 1), -1], pa.int64()))
        assert _parquet_digest(_write(d / "c.parquet", changed, g2), ("seconds",), slice_rows) != a
        assert _parquet_digest(_write(d / "d.parquet", t.slice(1), g2), ("seconds",), slice_rows) != a
