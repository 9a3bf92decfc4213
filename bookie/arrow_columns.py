"""Arrow columns built straight from numpy arrays' buffers, for the inventory's rows.

pa.array on a numpy array loads pandas when it is installed, and copies a strided field once more;
here each column is one contiguous copy (into a reused ``ColumnRoom`` when given) wrapped as an
Arrow buffer, and a string column of a few values is text and offsets, or a dictionary array.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from bkdisk.digests.payload_hashes import hex_ascii


class ColumnRoom:
    """Numpy arrays kept from one batch to the next, so that the columns of each batch are written into
    pages already mapped (a fresh array is zero-filled by the system page by page). A batch built in
    the room stays valid until the next batch is built in it."""

    def __init__(self) -> None:
        self._held: dict[str, np.ndarray] = {}

    def take(self, key: str, dtype: np.dtype, n: int) -> np.ndarray:
        """``n`` elements of the array kept under ``key`` (made, or made larger, when it is too small)."""
        held = self._held.get(key)
        if held is None or held.dtype != dtype or len(held) < n:
            held = self._held[key] = np.empty(n, dtype)
        return held[:n]


def _empty(room: ColumnRoom | None, key: str, dtype, n: int) -> np.ndarray:
    return np.empty(n, dtype) if room is None else room.take(key, np.dtype(dtype), n)


def validity(valid: np.ndarray | None) -> tuple[pa.Buffer | None, int]:
    """A validity bitmap of ``valid`` (None when every row is valid) and its null count."""
    if valid is None:
        return None, 0
    nulls = len(valid) - int(np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def numeric(values: np.ndarray, valid: np.ndarray | None = None, room: ColumnRoom | None = None,
            key: str = "") -> pa.Array:
    """A numeric column of ``values`` (a field of a structured table), copied once into contiguous memory."""
    data = _empty(room, key, values.dtype, len(values))
    np.copyto(data, values)
    bitmap, nulls = validity(valid)
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), [bitmap, pa.py_buffer(data)], nulls)


def filled(value: int, n: int, room: ColumnRoom | None = None, key: str = "") -> pa.Array:
    """An int64 column of ``n`` copies of ``value``."""
    data = _empty(room, key, np.int64, n)
    data.fill(value)
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(data)])


def booleans(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    bitmap, nulls = validity(valid)
    bits = pa.py_buffer(np.packbits(values, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(values), [bitmap, bits], nulls)


def strings(values: tuple[str, ...]) -> pa.Array:
    """A string column of ``values``."""
    raw = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(raw) + 1, np.int32)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return pa.StringArray.from_buffers(len(raw), pa.py_buffer(offsets), pa.py_buffer(b"".join(raw)))


def dictionary(indices: np.ndarray, valid: np.ndarray | None, values: tuple[str, ...]) -> pa.Array:
    """A dictionary array of int32 ``indices`` into ``values`` (null where not ``valid``)."""
    bitmap, nulls = validity(valid)
    idx = pa.Array.from_buffers(pa.int32(), len(indices), [bitmap, pa.py_buffer(indices)], nulls)
    return pa.DictionaryArray.from_arrays(idx, strings(values))


def constant(value: str | None, n: int, coded: bool, room: ColumnRoom | None = None, key: str = "") -> pa.Array:
    """A string column of ``n`` copies of ``value`` (null when None); a dictionary array when ``coded``."""
    if coded:
        zeros = _empty(room, key, np.int32, n)
        zeros.fill(0)
        return dictionary(zeros, None if value is not None else np.zeros(n, bool), (value or "",))
    if value is None:
        return pa.nulls(n, pa.string())
    raw = value.encode("utf-8")
    if n * len(raw) < 1 << 31:   # the text and 32-bit offsets straight into Arrow's buffers
        offsets = np.arange(n + 1, dtype=np.int64) * len(raw)
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(raw * n))
    return dictionary(np.zeros(n, np.int32), None, (value,)).cast(pa.string())


def decoded(codes: np.ndarray, names: tuple[str | None, ...], coded: bool, room: ColumnRoom | None = None,
            key: str = "") -> pa.Array:
    """A string column of ``names[code]`` per row (None: null); a dictionary array when ``coded``."""
    idx = _empty(room, key, np.int32, len(codes))
    np.copyto(idx, codes, casting="unsafe")
    valid = np.array([name is not None for name in names])[idx]
    col = dictionary(idx, None if valid.all() else valid, tuple(name or "" for name in names))
    return col if coded else col.cast(pa.string())


def hex_column(digests: np.ndarray, rows: np.ndarray) -> pa.Array:
    """A string column of ``digests[rows[r]]`` as lowercase hex (null where ``rows[r]`` is -1), written
    into Arrow's buffers directly: 64 bytes of text per hashed row."""
    present = rows >= 0
    text = hex_ascii(digests[rows[present]])
    width = text.shape[1]
    if len(text) * width > np.iinfo(np.int32).max:
        raise ValueError(f"{len(text)} payload hashes are more than one string column holds")
    offsets = np.zeros(len(rows) + 1, np.int32)
    np.cumsum(present * np.int32(width), dtype=np.int32, out=offsets[1:])
    nulls = len(rows) - len(text)
    bitmap = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    return pa.StringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(text), bitmap, nulls)
