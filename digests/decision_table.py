"""Each ledger's decided digest (type code, source) as sorted arrays: a mutable mapping
(scope, ledger) -> (code, source) that keeps about ten bytes per ledger instead of a dict entry and
two tuples (a bookie may hold millions of ledgers). Scope-0 ledgers (every V1 ledger) live in the
arrays; keys are merged in from a small dict of recent writes when the arrays are asked for."""
from __future__ import annotations

from collections.abc import Iterator, MutableMapping

import numpy as np

LedgerKey = tuple[int, int]   # (scope, ledger)
MERGE_EVERY = 65536              # recent writes held before they are merged into the arrays


def _as_u16(rows: np.ndarray) -> np.ndarray:
    """(n, 2) contiguous uint8 rows as n uint16 items (a view)."""
    return rows.view(np.uint16).reshape(-1)


def find_ledgers(table: tuple[np.ndarray, np.ndarray], ledgers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row in ``table``, found) for each ledger id, by binary search of the table's sorted ids."""
    ids = table[0]
    if len(ids) == 0:
        return np.zeros(len(ledgers), np.int64), np.zeros(len(ledgers), bool)
    at = np.minimum(np.searchsorted(ids, ledgers), len(ids) - 1)
    return at, ids[at] == ledgers


class DecisionTable(MutableMapping[LedgerKey, tuple[int, int]]):
    """Iterates in (scope, ledger) order; not locked (DigestPlan's lock guards it)."""

    def __init__(self, items: dict[LedgerKey, tuple[int, int]] | None = None):
        self.ids = np.zeros(0, np.uint64)
        self.rows = np.zeros((0, 2), np.uint8)
        self.recent: dict[int, tuple[int, int]] = {}        # scope-0 ledger -> value, not merged yet
        self.scoped: dict[LedgerKey, tuple[int, int]] = {}   # other scopes (no V1 ledger has one)
        if items:
            self.update(items)

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted scope-0 ledger ids and their (code, source) rows, every write merged in."""
        if self.recent:
            self._merge()
        return self.ids, self.rows

    def put_ledgers(self, ledgers: np.ndarray, codes: np.ndarray | int, sources: np.ndarray | int) -> None:
        """``self[(0, l)] = (code, source)`` for each of the distinct scope-0 ``ledgers``, as arrays at once
        (``codes``, ``sources``: one a ledger, or one for all)."""
        if len(ledgers) == 0:
            return
        if self.recent:
            self._merge()
        vals = np.empty((len(ledgers), 2), np.uint8)
        vals[:, 0], vals[:, 1] = codes, sources
        self._merge_rows(np.asarray(ledgers, np.uint64), vals)

    def _merge(self) -> None:
        n = len(self.recent)
        ids = np.fromiter(self.recent.keys(), np.uint64, n)
        vals = np.array(list(self.recent.values()), np.uint8).reshape(n, 2)
        self.recent = {}
        self._merge_rows(ids, vals)

    def _merge_rows(self, ids: np.ndarray, vals: np.ndarray) -> None:
        """Distinct ``ids`` and their rows into the arrays: a row of an id there is replaced."""
        if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():   # (a plan's ledgers come sorted: no sort)
            order = np.argsort(ids)
            ids, vals = ids[order], vals[order]
        at = np.searchsorted(self.ids, ids)
        there = at < len(self.ids)
        there[there] = self.ids[at[there]] == ids[there]
        self.rows[at[there]] = vals[there]
        new = ~there
        k = int(np.count_nonzero(new))
        if k == 0:
            return
        # Each new id's row in the merged arrays: its place among the old ones, past the new ones before it.
        dest = at[new] + np.arange(k)
        old = np.ones(len(self.ids) + k, bool)
        old[dest] = False
        # (a row's two bytes as one uint16: a masked copy of 1-D items is ten times one of 2-byte rows)
        merged_ids, merged_rows = np.empty(len(old), np.uint64), np.empty(len(old), np.uint16)
        merged_ids[dest], merged_rows[dest] = ids[new], _as_u16(np.ascontiguousarray(vals[new]))
        merged_ids[old], merged_rows[old] = self.ids, _as_u16(self.rows)
        self.ids, self.rows = merged_ids, merged_rows.view(np.uint8).reshape(-1, 2)

    def copy(self) -> DecisionTable:
        """A snapshot: later changes to either table leave the other as it is."""
        ids, rows = self.table()
        out = DecisionTable()
        out.ids, out.rows, out.scoped = ids.copy(), rows.copy(), dict(self.scoped)
        return out

    def __setitem__(self, key: LedgerKey, value: tuple[int, int]) -> None:
        scope, ledger = key
        if scope != 0:
            self.scoped[(scope, ledger)] = (int(value[0]), int(value[1]))
            return
        self.recent[ledger] = (int(value[0]), int(value[1]))
        if len(self.recent) >= max(MERGE_EVERY, len(self.ids) >> 2):
            self._merge()

    def __getitem__(self, key: LedgerKey) -> tuple[int, int]:
        scope, ledger = key
        if scope != 0:
            return self.scoped[(scope, ledger)]
        v = self.recent.get(ledger)
        if v is not None:
            return v
        at = self._row(ledger)
        if at is None:
            raise KeyError(key)
        code, src = self.rows[at].tolist()
        return code, src

    def _row(self, ledger: int) -> int | None:
        """The row of scope-0 ``ledger`` in the arrays as they are, or None."""
        if not 0 <= ledger < 1 << 64:
            return None
        at, hit = find_ledgers((self.ids, self.rows), np.array([ledger], np.uint64))
        return int(at[0]) if hit[0] else None

    def __delitem__(self, key: LedgerKey) -> None:
        scope, ledger = key
        if scope != 0:
            del self.scoped[(scope, ledger)]
            return
        self.table()
        at = self._row(ledger)
        if at is None:
            raise KeyError(key)
        self.ids, self.rows = np.delete(self.ids, at), np.delete(self.rows, at, axis=0)

    def __len__(self) -> int:
        return len(self.table()[0]) + len(self.scoped)

    def __iter__(self) -> Iterator[LedgerKey]:
        ids, _values = self.table()
        for lo in range(0, len(ids), MERGE_EVERY):
            yield from ((0, x) for x in ids[lo:lo + MERGE_EVERY].tolist())
        yield from sorted(self.scoped)

    def __repr__(self) -> str:
        return f"DecisionTable({len(self)} ledgers)"
