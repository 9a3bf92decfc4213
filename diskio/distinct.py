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


def run_heads(scope: np.ndarray, ledger: np.ndarray) -> np.ndarray:
    """Per row, whether it begins a run of rows of one (scope, ledger) (a bool mask)."""
    heads = np.ones(len(scope), bool)
    heads[1:] = (scope[1:] != scope[:-1]) | (ledger[1:] != ledger[:-1])
    return heads


def run_starts(scope: np.ndarray, ledger: np.ndarray) -> np.ndarray:
    """Where each run of rows of one (scope, ledger) begins (int64 indices)."""
    return np.flatnonzero(run_heads(scope, ledger))
