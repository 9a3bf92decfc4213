"""Many file paths held as one byte buffer and the end of each: about the length of a path per file
instead of a Python str per file (an index walk keeps one path per ``.idx``, and a bookie may hold
millions). A path is made as a str when it is asked for, or a block of them while iterating.

Bytes are the file system's (``os.fsencode``), so every name reads back as the walk saw it.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

BLOCK = 65536            # paths decoded at once while iterating (and counted at once: count_byte)


class PathRows(Sequence[str]):
    """Rows of paths that read as a list of str: a subclass gives ``__len__``, ``block(lo, hi)`` (rows
    as strings at once) and ``_row(i)`` (one row, ``i`` in range)."""

    def __len__(self) -> int:
        raise NotImplementedError

    def block(self, lo: int, hi: int) -> list[str]:
        raise NotImplementedError

    def _row(self, i: int) -> str:
        return self.block(i, i + 1)[0]

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            return self.block(start, stop) if step == 1 else [self[j] for j in range(start, stop, step)]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("path row out of range")
        return self._row(i)

    def __iter__(self) -> Iterator[str]:
        for lo in range(0, len(self), BLOCK):
            yield from self.block(lo, lo + BLOCK)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None   # type: ignore[assignment]


class PathColumn(PathRows):
    """Row i: ``prefixes[group[i]]`` (``prefixes[0]`` when ``group`` is None) + the i-th byte string."""

    def __init__(self, data: np.ndarray, ends: np.ndarray, prefixes: Sequence[str] = ("",),
                 group: np.ndarray | None = None):
        self.data, self.ends = data, ends
        self.prefixes, self.group = list(prefixes), group

    @classmethod
    def empty(cls) -> PathColumn:
        return cls(np.zeros(0, np.uint8), np.zeros(0, np.int64))

    def prefixed(self, prefixes: Sequence[str], group: np.ndarray) -> PathColumn:
        """The same rows, each behind ``prefixes[group[i]]``."""
        return PathColumn(self.data, self.ends, prefixes, group)

    def __len__(self) -> int:
        return len(self.ends)

    def _prefix(self, i: int) -> str:
        return self.prefixes[0] if self.group is None else self.prefixes[int(self.group[i])]

    def _row(self, i: int) -> str:
        start = int(self.ends[i - 1]) if i else 0
        return self._prefix(i) + os.fsdecode(self.data[start:int(self.ends[i])].tobytes())

    def block(self, lo: int, hi: int) -> list[str]:
        """Rows ``lo`` to ``hi`` as strings, decoded at once."""
        hi = min(hi, len(self))
        if hi <= lo:
            return []
        base = int(self.ends[lo - 1]) if lo else 0
        blob = self.data[base:int(self.ends[hi - 1])].tobytes()
        cuts = (self.ends[lo:hi] - base).tolist()
        starts = [0, *cuts[:-1]]
        if self.group is None:
            p = self.prefixes[0]
            return [p + os.fsdecode(blob[a:b]) for a, b in zip(starts, cuts)]
        pre = self.prefixes
        return [pre[g] + os.fsdecode(blob[a:b]) for g, a, b in zip(self.group[lo:hi].tolist(), starts, cuts)]

    def __repr__(self) -> str:
        return f"PathColumn({len(self)} paths)"

    def count_byte(self, byte: int) -> np.ndarray:
        """How many times ``byte`` occurs in each row (prefix not counted), a block of rows at a time.
        numpy only: the listing that calls it runs before (and beside) the loading of the kernels."""
        out = np.zeros(len(self), np.int64)
        for lo in range(0, len(self), BLOCK):
            hi = min(lo + BLOCK, len(self))
            base = int(self.ends[lo - 1]) if lo else 0
            seen = np.zeros(int(self.ends[hi - 1]) - base + 1, np.int32)   # seen[k]: the byte among the first k
            np.cumsum(self.data[base:int(self.ends[hi - 1])] == byte, out=seen[1:])
            starts = np.empty(hi - lo, np.int64)
            starts[0], starts[1:] = 0, self.ends[lo:hi - 1] - base
            out[lo:hi] = seen[self.ends[lo:hi] - base] - seen[starts]
        return out
