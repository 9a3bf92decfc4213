"""Membership of id tuples (a ledger, or a ledger's entry) in a reference set, vectorized: no Python
object per row. Rows are matched by a 64-bit mix of their columns, then compared column by column, so
the answer is exact (rows whose mixes collide are compared one by one)."""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.sorted_search import searched_in_order
from bkdisk.journal.ledger_keys import LedgerKeys

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MULT = np.uint64(0xBF58476D1CE4E5B9)


def mix(cols: list[np.ndarray]) -> np.ndarray:
    """A 64-bit hash per row of the columns (integers of up to 64 bits)."""
    with np.errstate(over="ignore"):
        h = np.full(len(cols[0]) if cols else 0, _GOLDEN, np.uint64)
        for c in cols:
            h ^= np.asarray(c).astype(np.uint64, copy=False)
            h *= _MULT
            h ^= h >> np.uint64(31)
    return h


class KeySet:
    """A set of rows (equal-length columns) that answers ``contains`` for many rows at once."""

    def __init__(self, cols: list[np.ndarray]):
        self.cols = [np.asarray(c) for c in cols]
        h = mix(self.cols)
        self.order = np.argsort(h, kind="stable")
        self.sorted = h[self.order]

    def __len__(self) -> int:
        return len(self.sorted)

    def contains(self, cols: list[np.ndarray]) -> np.ndarray:
        return self.index_of(cols) >= 0

    def index_of(self, cols: list[np.ndarray]) -> np.ndarray:
        """Per row, the index of an equal row of the set (-1: none)."""
        n = len(cols[0]) if cols else 0
        m = len(self.sorted)
        if n == 0 or m == 0:
            return np.full(n, -1, np.int64)
        h = mix(cols)
        lo = searched_in_order(self.sorted, h)
        at = np.minimum(lo, m - 1)
        cand = (lo < m) & (self.sorted[at] == h)
        j = self.order[at]
        same = cand.copy()
        for ref, q in zip(self.cols, cols):
            same &= ref[j] == np.asarray(q)
        out = np.where(same, j, -1)
        for i in np.flatnonzero(cand & ~same).tolist():   # colliding mixes: each row of the mix compared
            for k in range(int(lo[i]) + 1, m):
                if self.sorted[k] != h[i]:
                    break
                r = int(self.order[k])
                if all(ref[r] == np.asarray(q)[i] for ref, q in zip(self.cols, cols)):
                    out[i] = r
                    break
        return out

    def own_rows(self) -> np.ndarray:
        """Per row of the set, the index of its first equal row: ``index_of`` of the set's own rows,
        from the sort the set already holds."""
        n = len(self.sorted)
        out = np.empty(n, np.int64)
        if n == 0:
            return out
        starts = np.flatnonzero(np.concatenate([[True], self.sorted[1:] != self.sorted[:-1]]))
        first = np.repeat(self.order[starts], np.diff(np.append(starts, n)))   # per place: its mix's first row
        same = np.ones(n, bool)
        for c in self.cols:
            same &= c[self.order] == c[first]
        out[self.order] = first
        odd = self.order[~same]   # rows whose mix is another row's too
        if len(odd):
            out[odd] = self.index_of([c[odd] for c in self.cols])
        return out


def ledger_set(lids) -> KeySet:
    """A KeySet of ledgers: of (scope, ledger) pairs (LedgerIds), of a LedgerKeys table's columns, or of
    the ledgers of metadata held as columns (``key_columns``: bookie.near_ledgers)."""
    if isinstance(lids, LedgerKeys):
        return KeySet(list(lids.columns()))
    columns = getattr(lids, "key_columns", None)
    if columns is not None and (got := columns()) is not None:
        return KeySet(list(got))
    lids = list(lids)
    return KeySet([np.array([l[0] for l in lids], np.uint64), np.array([l[1] for l in lids], np.uint64)])
