"""Arrow values as Python rows and numpy arrays, without the modules pyarrow loads for them: its
to_numpy and its zoned timestamps' datetimes load pandas (when installed), read_table with filters
loads pyarrow.dataset, each a few tenths of a second of a bookie host's `scan-disk --state`. Here a
zoned column is read as its integers, an integer column's numpy array is its data buffer."""
from __future__ import annotations

import datetime
import importlib.abc
import sys

import numpy as np
import pyarrow as pa

_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}   # nanoseconds: pyarrow's own (a datetime holds microseconds)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _datetimes(column: pa.Array | pa.ChunkedArray, unit: str) -> list[datetime.datetime | None]:
    values = column.cast(pa.int64()).to_pylist()
    per = _UNIT_US[unit]
    return [None if v is None else _EPOCH + datetime.timedelta(microseconds=v * per) for v in values]


def py_rows(data: pa.RecordBatch | pa.Table) -> list[dict]:
    """``data.to_pylist()``, each zoned timestamp a UTC datetime (the instant it stores, as pyarrow
    gives it, in UTC)."""
    zoned = [i for i, f in enumerate(data.schema)
             if pa.types.is_timestamp(f.type) and f.type.tz is not None and f.type.unit in _UNIT_US]
    if not zoned:
        return data.to_pylist()
    names = data.schema.names
    columns = [_datetimes(data.column(i), data.schema[i].type.unit) if i in zoned else data.column(i).to_pylist()
               for i in range(len(names))]
    return [dict(zip(names, values)) for values in zip(*columns)] if names else []


def ints(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer column without nulls as numpy (a view of its data buffer; the chunks joined)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_integer(column.type) or column.null_count:
        raise ValueError(f"expected an integer column without nulls, found {column.type} "
                         f"with {column.null_count} nulls")
    dtype = np.dtype(column.type.to_pandas_dtype())
    data = column.buffers()[1]
    if data is None:
        return np.empty(0, dtype)
    return np.frombuffer(data, dtype, count=len(column), offset=column.offset * dtype.itemsize)


class _WithoutPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not loaded by this command", name=name)
        return None


def arrow_without_pandas() -> None:
    """Have pyarrow convert without pandas in this process (and the children it forks). pyarrow looks
    for pandas once a process, at its first conversion of Python values (its Python layer, and its C++
    helpers when they infer a type), and remembers what it found: here it finds none. For a command
    that never hands pyarrow a pandas object; an explicit ``to_pandas`` still loads it."""
    if "pandas" in sys.modules:
        return
    finder = _WithoutPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([])   # no type given: the type inferred, so both layers look
    finally:
        sys.meta_path.remove(finder)
