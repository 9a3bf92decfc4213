"""The digest plan's decisions as the entry-log scans left them, kept as arrays (sorted ledger ids and
their type code and source): pass 4 reports from them after the journals' checks have decided more,
and a bookie may hold millions of ledgers."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

from bkdisk.digests.decision_table import DecisionTable
from bkdisk.digests.plan import DigestPlan
from bkdisk.diskio.distinct import distinct

BLOCK = 65536


class LedgerKeyList(Sequence[tuple[int, int]]):
    """(scope, ledger) rows of two columns, read as tuples."""

    def __init__(self, scope: np.ndarray, ledger: np.ndarray):
        self.scope, self.ledger = scope, ledger

    def __len__(self) -> int:
        return len(self.ledger)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(zip(self.scope[i].tolist(), self.ledger[i].tolist()))
        return int(self.scope[i]), int(self.ledger[i])

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for lo in range(0, len(self), BLOCK):
            yield from zip(self.scope[lo:lo + BLOCK].tolist(), self.ledger[lo:lo + BLOCK].tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == tuple(b) for a, b in zip(self, other))

    __hash__ = None   # type: ignore[assignment]


class DigestDecisions:
    """(type code, source) per ledger the plan had decided: a snapshot of its decision table."""

    def __init__(self, table: DecisionTable):
        self.table = table

    @classmethod
    def of(cls, plan: DigestPlan | None) -> DigestDecisions:
        if plan is None:
            return cls(DecisionTable())
        with plan.lock:
            return cls(plan.decided.copy())

    def get(self, key: tuple[int, int], default: tuple[int, int] = (0, 0)) -> tuple[int, int]:
        return self.table.get(key, default)

    def by_code(self, source: int) -> list[tuple[int, LedgerKeyList]]:
        """Per type code (ascending, not 0), the ledgers decided with it from ``source``, by (scope, ledger)."""
        out = []
        v1_ids, values = self.table.table()
        other = sorted((k, v) for k, v in self.table.scoped.items() if v[1] == source and v[0])
        codes = sorted((set(distinct(values[:, 0][values[:, 1] == source]).tolist()) |
                        {v[0] for _k, v in other}) - {0})
        for code in codes:
            ids = v1_ids[(values[:, 0] == code) & (values[:, 1] == source)]
            more = [k for k, v in other if v[0] == code]
            scope = np.concatenate([np.zeros(len(ids), np.uint64), np.array([k[0] for k in more], np.uint64)])
            ledger = np.concatenate([ids.astype(np.uint64), np.array([k[1] for k in more], np.uint64)])
            out.append((code, LedgerKeyList(scope, ledger)))
        return out
