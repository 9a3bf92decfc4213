"""The distinct values of a column, sorted, as ``np.unique`` gives them without its options, by a sort
and one comparison of neighbours.

numpy 2's ``np.unique`` finds them through a hash table, which on this project's columns of ids (the
ledgers of a bookie of millions of them) costs far more than sorting them, and more again the first
time a process calls it."""
from __future__ import annotations

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of the 1-D array ``values``, ascending (a new array)."""
    s = np.sort(np.asarray(values).ravel(), kind="stable")   # (stable: fast on runs already in order)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def members(values: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Per value, whether it is one of ``among`` (distinct, ascending): ``np.isin`` by a binary search,
    which sorts neither array again (np.isin takes the distinct values of both, through the hash table)."""
    values, among = np.asarray(values), np.asarray(among)
    fits = None
    if values.dtype != among.dtype:   # (numpy compares int64 with uint64 as floats: ids past 2**53 would blur)
        if values.dtype.kind == among.dtype.kind:
            common = np.promote_types(values.dtype, among.dtype)
        else:   # one side signed: its negatives match nothing, the rest compare as uint64
            common = np.dtype(np.uint64)
            if values.dtype.kind == "i":
                fits = values >= 0
            else:
                among = among[among >= 0]
        values, among = values.astype(common), among.astype(common)
    if len(among) == 0:
        return np.zeros(values.shape, bool)
    at = np.minimum(np.searchsorted(among, values), len(among) - 1)
    found = among[at] == values
    return found if fits is None else found & fits


def pair_members(scope: np.ndarray, ledger: np.ndarray, among_scope: np.ndarray, among_ledger: np.ndarray
                 ) -> np.ndarray:
    """Per (scope, ledger) row (uint64 columns), whether it is one of the ``among`` rows (any order,
    repeats allowed)."""
    return pair_positions(scope, ledger, among_scope, among_ledger) >= 0


def pair_positions(scope: np.ndarray, ledger: np.ndarray, among_scope: np.ndarray, among_ledger: np.ndarray
                   ) -> np.ndarray:
    """Per (scope, ledger) row (uint64 columns), the index of an equal row of ``among`` (any order; of
    repeats, the first), or -1: both sets sorted together once, ``among``'s rows first in each run of
    equal rows (one sort, whatever the number of scopes)."""
    n, k = len(ledger), len(among_ledger)
    s = np.concatenate([np.asarray(among_scope, np.uint64), np.asarray(scope, np.uint64)])
    led = np.concatenate([np.asarray(among_ledger, np.uint64), np.asarray(ledger, np.uint64)])
    asked = np.zeros(len(s), bool)
    asked[k:] = True
    order = np.lexsort((asked, led, s))   # (stable: repeats of ``among`` in their order)
    heads = run_heads(s[order], led[order])
    head = order[heads][np.cumsum(heads) - 1]   # per sorted row, its run's first row: an ``among`` row when it has one
    out = np.full(n, -1, np.int64)
    mine = asked[order]
    found = head[mine]
    out[order[mine] - k] = np.where(found < k, found, -1)
    return out


def span_indices(first: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices ``first[i] .. first[i] + lengths[i] - 1`` of every i, one after the other (int64)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    return np.repeat(first - (np.cumsum(lengths) - lengths), lengths) + np.arange(total, dtype=np.int64)


def run_heads(*columns: np.ndarray) -> np.ndarray:
    """Per row, whether it begins a run of rows equal in every column, as (scope, ledger) (a bool mask)."""
    heads = np.ones(len(columns[0]), bool)
    np.not_equal(columns[0][1:], columns[0][:-1], out=heads[1:])
    for c in columns[1:]:
        heads[1:] |= c[1:] != c[:-1]
    return heads


def run_starts(scope: np.ndarray, ledger: np.ndarray) -> np.ndarray:
    """Where each run of rows of one (scope, ledger) begins (int64 indices)."""
    return np.flatnonzero(run_heads(scope, ledger))


def distinct_rows(*columns: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The distinct rows of equal-length columns, ordered by the first column, then the next, and per
    row the index of its distinct row: ``np.unique(..., return_inverse=True)`` of the columns as one
    structured array, whose comparison of records costs twenty times this sort of the columns."""
    order = np.lexsort(columns[::-1])
    ordered = [np.asarray(c)[order] for c in columns]
    heads = run_heads(*ordered)
    inverse = np.empty(len(order), np.int64)
    inverse[order] = np.cumsum(heads) - 1
    return tuple(c[heads] for c in ordered), inverse


FEW_SCOPES = 64   # scopes asked of sorted rows one at a time; more: one sort of both sets


def sorted_pair_positions(scope: np.ndarray, ledger: np.ndarray, among_scope: np.ndarray, among_ledger: np.ndarray
                          ) -> np.ndarray:
    """Per (scope, ledger) row (uint64 columns), its row in ``among`` (distinct rows sorted by scope, then
    ledger), or -1: each asked scope's range of ``among`` searched (a few scopes: a million rows asked cost
    a search each, not a sort of both sets together); more than FEW_SCOPES, ``pair_positions``."""
    scope, ledger = np.asarray(scope, np.uint64), np.asarray(ledger, np.uint64)
    out = np.full(len(ledger), -1, np.int64)
    if len(among_ledger) == 0 or len(ledger) == 0:
        return out
    scopes = scope[:1] if (scope == scope[0]).all() else distinct(scope)   # (one scope: every V1 ledger's)
    if len(scopes) > FEW_SCOPES:
        return pair_positions(scope, ledger, among_scope, among_ledger)
    for sc in scopes.tolist():
        lo, hi = (int(np.searchsorted(among_scope, np.uint64(sc), side)) for side in ("left", "right"))
        if lo == hi:
            continue
        sel = None if len(scopes) == 1 else scope == np.uint64(sc)
        want = ledger if sel is None else ledger[sel]
        part = among_ledger[lo:hi]
        at = np.minimum(np.searchsorted(part, want), len(part) - 1)
        found = np.where(part[at] == want, lo + at, -1)
        if sel is None:
            out = found
        else:
            out[sel] = found
    return out


class PairSet:
    """A set of (scope, ledger) pairs held as two sorted uint64 columns (16 bytes a pair, where a Python
    set of tuples costs ten times that): a bookie's index of a million ledgers, asked a column at a time."""

    def __init__(self, scope: np.ndarray, ledger: np.ndarray):
        (self.scope, self.ledger), _ = distinct_rows(np.asarray(scope, np.uint64), np.asarray(ledger, np.uint64))

    def __len__(self) -> int:
        return len(self.ledger)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PairSet) and np.array_equal(self.scope, other.scope)
                and np.array_equal(self.ledger, other.ledger))

    __hash__ = None   # type: ignore[assignment]   # (mutable arrays: compared, never hashed)

    def contains(self, scope: np.ndarray, ledger: np.ndarray) -> np.ndarray:
        """Per (scope, ledger) row, whether it is in the set."""
        return sorted_pair_positions(scope, ledger, self.scope, self.ledger) >= 0

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.scope.tolist(), self.ledger.tolist()))
