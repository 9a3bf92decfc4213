"""A read-only mapping (scope, ledger) -> value held as columns: what a digest plan knows from ledger
metadata (each ledger's digest type and password) for a bookie of a million ledgers.

As dicts, such a mapping costs some 170 bytes a ledger (a key tuple, its two ints, a slot) for values
the ledgers mostly share; here a scope-0 ledger (every V1 ledger) is its id in a sorted array and the
number of its value in a list of the distinct values: 12 bytes. Scoped ledgers (BP-35) are few and
kept in a dict."""
from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

import numpy as np

from bkdisk.digests.decision_table import LedgerKey

V = TypeVar("V")


class LedgerValues(Mapping[LedgerKey, V], Generic[V]):
    """Iterates scope-0 ledgers by id, then the scoped ones."""

    def __init__(self, scope: np.ndarray, ledger: np.ndarray, numbers: np.ndarray, values: list[V]):
        """``numbers[i]``: the index in ``values`` of ledger (``scope[i]``, ``ledger[i]``)'s value; the
        ledgers are distinct."""
        v1 = np.asarray(scope) == 0
        order = np.argsort(ledger[v1], kind="stable")
        self.ids = np.ascontiguousarray(ledger[v1][order], np.uint64)
        self.numbers = np.ascontiguousarray(numbers[v1][order], np.int32)
        self.distinct = values
        rest = np.flatnonzero(~v1)
        self.scoped: dict[LedgerKey, V] = {(int(scope[i]), int(ledger[i])): values[int(numbers[i])]
                                          for i in rest.tolist()}
        self._codes: tuple[int, np.ndarray] | None = None

    def scope0_table(self, code: Callable[[V], int]) -> tuple[np.ndarray, np.ndarray]:
        """Sorted scope-0 ledger ids and ``code`` of each one's value (uint8), as DigestPlan's tables;
        ``code`` is applied once per distinct value."""
        if self._codes is None or self._codes[0] != id(code):
            per_value = np.array([code(v) for v in self.distinct], np.uint8)
            self._codes = (id(code), per_value[self.numbers] if len(per_value) else np.zeros(0, np.uint8))
        return self.ids, self._codes[1]

    def __getitem__(self, key: LedgerKey) -> V:
        try:   # (as a dict's: what is not a pair of ints names no ledger here)
            scope, ledger = (operator.index(x) for x in key)
        except (TypeError, ValueError):
            raise KeyError(key) from None
        if scope != 0:
            return self.scoped[(scope, ledger)]
        if 0 <= ledger < 1 << 64 and len(self.ids):
            at = min(int(np.searchsorted(self.ids, np.uint64(ledger))), len(self.ids) - 1)
            if int(self.ids[at]) == ledger:
                return self.distinct[int(self.numbers[at])]
        raise KeyError(key)

    def __len__(self) -> int:
        return len(self.ids) + len(self.scoped)

    def __iter__(self) -> Iterator[LedgerKey]:
        for lo in range(0, len(self.ids), 1 << 16):
            yield from ((0, x) for x in self.ids[lo:lo + (1 << 16)].tolist())
        yield from self.scoped
