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
