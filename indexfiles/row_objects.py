"""The per-file objects of an index walk as columns: each file's header as an index into the distinct
headers met (the ledgers of one password share one), and the rare per-file errors by row. Both read as
a ``Sequence`` (index, slice, iterate, ``==`` a list), so callers index them as lists, while a walk of
millions of files keeps four bytes a file and no Python object per file.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar, overload

import numpy as np

T = TypeVar("T")


class _Column(Sequence[T | None], Generic[T]):
    def _at(self, i: int) -> T | None:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T | None: ...

    @overload
    def __getitem__(self, i: slice) -> list[T | None]: ...

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(n))]
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("row out of range")
        return self._at(i)

    def __iter__(self) -> Iterator[T | None]:
        for i in range(len(self)):
            yield self._at(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None   # type: ignore[assignment]


class HeaderColumn(_Column[T]):
    """Row i's header: ``distinct[ids[i]]``, None where ``ids[i]`` is -1."""

    def __init__(self) -> None:
        self.n = 0
        self.ids = np.zeros(0, np.int32)
        self.distinct: list[T] = []

    def add(self, rows: int = 1) -> None:
        """More rows, without a header."""
        self.n += rows

    def _fill(self) -> None:
        """The id array as long as the rows (new rows -1), grown by doubling."""
        if len(self.ids) < self.n:
            grown = np.full(max(self.n, 2 * len(self.ids)), -1, np.int32)
            grown[:len(self.ids)] = self.ids
            self.ids = grown

    def set(self, rows: np.ndarray | int, header_ids: np.ndarray | int) -> None:
        self._fill()
        self.ids[rows] = header_ids

    def id_column(self) -> np.ndarray:
        self._fill()
        return self.ids[:self.n]

    def finish(self) -> HeaderColumn[T]:
        self._fill()
        self.ids = self.ids[:self.n].copy()
        return self

    def __len__(self) -> int:
        return self.n

    def _at(self, i: int) -> T | None:
        h = int(self.ids[i]) if i < len(self.ids) else -1
        return None if h < 0 else self.distinct[h]

    def __repr__(self) -> str:
        return f"HeaderColumn({len(self)} rows, {len(self.distinct)} distinct)"


class SparseColumn(_Column[T]):
    """``n`` rows, None but where set."""

    def __init__(self) -> None:
        self.n = 0
        self.values: dict[int, T] = {}

    def add(self, rows: int = 1) -> None:
        self.n += rows

    def __setitem__(self, row: int, value: T | None) -> None:
        if value is None:
            self.values.pop(row, None)
        else:
            self.values[row] = value

    def __len__(self) -> int:
        return self.n

    def _at(self, i: int) -> T | None:
        return self.values.get(i)

    def __repr__(self) -> str:
        return f"SparseColumn({len(self)} rows, {len(self.values)} set)"
