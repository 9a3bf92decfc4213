"""An entry log's ledgers map, {(scope, ledger): bytes}, held as three arrays instead of a dict.

A rolled log of a bookie with millions of ledgers holds hundreds of thousands of them in its map; as
a dict that is ~200 bytes a ledger, as arrays 24. ``LedgersMap`` reads like the dict
formats.entrylog.parse_ledgers_map returns (same items, same order, equal to it either way) and gives
its columns to the consumers that work on arrays (``map_columns``).
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView

import numpy as np

from bkdisk.diskio.distinct import run_heads

_MISSING = object()
_HALF = 32                       # a size is summed as its high and low 32 bits, so a sum past 64 bits shows
_LOW = np.int64((1 << _HALF) - 1)
_U64_MAX = (1 << 64) - 1


def _summed_exact(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of ``v`` (int64) from each start to the next: int64 when every sum fits, else Python ints
    (an object array), as a dict that adds Python ints holds them."""
    high = np.add.reduceat(v >> _HALF, starts)
    carry = np.add.reduceat(v & _LOW, starts)
    high += carry >> _HALF
    if len(high) == 0 or (int(high.min()) >= -(1 << (_HALF - 1)) and int(high.max()) < 1 << (_HALF - 1)):
        return np.add.reduceat(v, starts)
    return np.add.reduceat(v.astype(object), starts)


class LedgersMap(Mapping[tuple[int, int], int]):
    """{(scope, ledger): bytes} held as ``scope``, ``ledger`` (uint64) and ``size`` (int64; Python ints
    in an object array only where a summed size passes 64 bits) in the map's order, one item per
    distinct (scope, ledger)."""

    def __init__(self, scope: np.ndarray, ledger: np.ndarray, size: np.ndarray):
        self.scope, self.ledger, self.size = scope, ledger, size
        self._sorted: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def summed(cls, scope: np.ndarray, ledger: np.ndarray, size: np.ndarray) -> LedgersMap:
        """The map of items read in this order, a (scope, ledger) met again adding its size to the
        first one's, in the first one's place (what accumulating them into a dict gives)."""
        scope = np.ascontiguousarray(scope, np.uint64)
        ledger = np.ascontiguousarray(ledger, np.uint64)
        size = np.ascontiguousarray(size, np.int64)
        order = np.lexsort((ledger, scope))      # stable: a group's first row is its first occurrence
        s, l = scope[order], ledger[order]
        start = run_heads(s, l)
        if bool(start.all()):
            return cls(scope, ledger, size)
        starts = np.flatnonzero(start)
        sums = _summed_exact(size[order], starts)
        firsts = order[starts]
        placed = np.argsort(firsts, kind="stable")
        at = firsts[placed]
        return cls(scope[at], ledger[at], sums[placed])

    @classmethod
    def empty(cls) -> LedgersMap:
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64))

    @property
    def nbytes(self) -> int:
        return int(self.scope.nbytes + self.ledger.nbytes + self.size.nbytes)

    def __len__(self) -> int:
        return len(self.scope)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.scope.tolist(), self.ledger.tolist())

    def keys(self) -> KeysView[tuple[int, int]]:
        return _Keys(self)

    def values(self) -> ValuesView[int]:
        return _Values(self)

    def items(self) -> ItemsView[tuple[int, int], int]:
        return _Items(self)

    def _position(self, key: object) -> int:
        """Where ``key`` is in the map's order, or -1 (a search of the columns sorted once, on first use)."""
        if not isinstance(key, tuple) or len(key) != 2:
            return -1
        try:
            s, l = operator.index(key[0]), operator.index(key[1])
        except TypeError:
            return -1
        if not (0 <= s <= _U64_MAX and 0 <= l <= _U64_MAX):
            return -1
        if self._sorted is None:
            order = np.lexsort((self.ledger, self.scope))
            self._sorted = (order, self.scope[order], self.ledger[order])
        order, ss, ls = self._sorted
        lo, hi = np.searchsorted(ss, np.uint64(s), "left"), np.searchsorted(ss, np.uint64(s), "right")
        i = lo + int(np.searchsorted(ls[lo:hi], np.uint64(l), "left"))
        return int(order[i]) if i < hi and int(ls[i]) == l else -1

    def __getitem__(self, key: tuple[int, int]) -> int:
        i = self._position(key)
        if i < 0:
            raise KeyError(key)
        return self.size[i].item() if self.size.dtype != object else self.size[i]

    def __contains__(self, key: object) -> bool:
        return self._position(key) >= 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LedgersMap):
            if len(self) != len(other):
                return False
            a, b = np.lexsort((self.ledger, self.scope)), np.lexsort((other.ledger, other.scope))
            return bool(np.array_equal(self.scope[a], other.scope[b])
                        and np.array_equal(self.ledger[a], other.ledger[b])
                        and np.array_equal(self.size[a], other.size[b]))
        if isinstance(other, Mapping):
            return len(self) == len(other) and all(other.get(k, _MISSING) == v for k, v in self.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LedgersMap({dict(self.items())!r})"

    def __getstate__(self) -> dict:
        return {"scope": self.scope, "ledger": self.ledger, "size": self.size, "_sorted": None}


class _Keys(KeysView):
    _mapping: LedgersMap
    def __iter__(self):
        return iter(self._mapping)


class _Values(ValuesView):
    _mapping: LedgersMap
    def __iter__(self):
        return iter(self._mapping.size.tolist())


class _Items(ItemsView):
    _mapping: LedgersMap
    def __iter__(self):
        m = self._mapping
        return zip(zip(m.scope.tolist(), m.ledger.tolist()), m.size.tolist())


def map_columns(m: Mapping[tuple[int, int], int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scope, ledger, size) of a ledgers map in its order, sizes as int64 (OverflowError for a size
    past 64 bits): a LedgersMap's own columns, any other mapping's made once from its items."""
    if isinstance(m, LedgersMap):
        return m.scope, m.ledger, np.asarray(m.size, np.int64)
    n = len(m)
    pairs = np.fromiter(itertools.chain.from_iterable(m), np.uint64, 2 * n).reshape(n, 2)
    return pairs[:, 0].copy(), pairs[:, 1].copy(), np.fromiter(m.values(), np.int64, n)
