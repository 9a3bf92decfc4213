"""The master key the journals give each ledger, as arrays: a read-only mapping LedgerId -> key bytes
with a dict's answers (the last record's key wins, ledgers in the order first met) and a few dozen
bytes per ledger instead of a dict entry, a LedgerId and a bytes object each. A bookie's journals may
hold the keys of millions of ledgers."""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from bkdisk.diskio.distinct import distinct, run_heads, sorted_pair_positions
from bkdisk.formats.ids import LedgerId

BLOCK = 65536   # ledgers made into LedgerIds at once while iterating


class LedgerKeys(Mapping[LedgerId, bytes]):
    """Unique (scope, ledger) rows sorted, the index of each one's key, and each distinct key once
    (the ledgers of one password share one key)."""

    def __init__(self, scope: np.ndarray, ledger: np.ndarray, data: np.ndarray, ends: np.ndarray):
        """``scope``, ``ledger``: one row per record, in record order; record i's key is
        ``data[ends[i-1]:ends[i]]``."""
        distinct, ids = distinct_keys(data, ends)
        self._build(scope, ledger, distinct, ids)

    @classmethod
    def of_ids(cls, scope: np.ndarray, ledger: np.ndarray, distinct: list[bytes], ids: np.ndarray) -> LedgerKeys:
        """The table of records whose keys are given as ids: record i's key is ``distinct[ids[i]]``."""
        out = cls.__new__(cls)
        out._build(scope, ledger, distinct, ids)
        return out

    def _build(self, scope: np.ndarray, ledger: np.ndarray, distinct: list[bytes], ids: np.ndarray) -> None:
        scope, ledger = np.asarray(scope, np.uint64), np.asarray(ledger, np.uint64)
        n = len(scope)
        order = np.lexsort((ledger, scope))   # by ledger, then record (lexsort is stable)
        s, l = scope[order], ledger[order]
        new = run_heads(s, l)
        small = np.int32 if n < 1 << 31 else np.int64   # (row numbers while they fit)
        if new.all():   # one record a ledger (as a bookie writes them): the sort's rows are the table's
            self.scope, self.ledger = s, l
            last = order
            # ledgers as first met: the inverse of the sort
            self.iter_order = np.empty(n, small)
            self.iter_order[order] = np.arange(n, dtype=small)
        else:
            first_at = np.flatnonzero(new)
            last = order[np.concatenate([first_at[1:], [n]]) - 1]   # the last record of each ledger wins
            self.scope, self.ledger = s[first_at], l[first_at]
            self.iter_order = np.argsort(order[first_at], kind="stable").astype(small)   # ledgers as first met
            del first_at
        del s, l, new
        self.distinct = distinct
        self.key_of = np.asarray(ids, np.int32)[last]

    @classmethod
    def empty(cls) -> LedgerKeys:
        z = np.zeros(0, np.uint64)
        return cls(z, z, np.zeros(0, np.uint8), np.zeros(0, np.int64))

    def index_of(self, scope: np.ndarray, ledger: np.ndarray) -> np.ndarray:
        """Per queried ledger, its row in this table (-1: the journals give it no key)."""
        return sorted_pair_positions(scope, ledger, self.scope, self.ledger)

    def key_ids(self, rows: np.ndarray) -> np.ndarray:
        """Per row of this table, the index of its key in ``distinct`` (rows with one key, one id)."""
        return self.key_of[rows]

    def key_at(self, row: int) -> bytes:
        return self.distinct[int(self.key_of[row])]

    def __getitem__(self, lid: LedgerId) -> bytes:
        scope, ledger = lid
        if not (0 <= scope < 1 << 64 and 0 <= ledger < 1 << 64):
            raise KeyError(lid)
        row = int(self.index_of(np.array([scope], np.uint64), np.array([ledger], np.uint64))[0])
        if row < 0:
            raise KeyError(lid)
        return self.key_at(row)

    def __len__(self) -> int:
        return len(self.scope)

    def __iter__(self) -> Iterator[LedgerId]:
        for lo in range(0, len(self.iter_order), BLOCK):
            rows = self.iter_order[lo:lo + BLOCK]
            yield from map(LedgerId, self.scope[rows].tolist(), self.ledger[rows].tolist())

    def pairs(self) -> Iterator[tuple[LedgerId, bytes]]:
        """(ledger, key) in the order ``__iter__`` gives the ledgers, without a look-up for each."""
        keys = self.distinct
        for lo in range(0, len(self.iter_order), BLOCK):
            rows = self.iter_order[lo:lo + BLOCK]
            for s, l, k in zip(self.scope[rows].tolist(), self.ledger[rows].tolist(), self.key_of[rows].tolist(),
                               strict=True):
                yield LedgerId(s, l), keys[k]

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """(scope, ledger) of every ledger with a key, sorted."""
        return self.scope, self.ledger

    def __repr__(self) -> str:
        return f"LedgerKeys({len(self)} ledgers)"


def distinct_keys(data: np.ndarray, ends: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """The distinct keys of the records whose keys are ``data[ends[i-1]:ends[i]]``, and per record
    the index of its key among them."""
    ends = np.asarray(ends, np.int64)
    return _distinct(np.asarray(data, np.uint8), ends, np.arange(len(ends)))


def _distinct(data: np.ndarray, ends: np.ndarray, records: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """The distinct keys of ``records`` (record i's key: ``data[ends[i-1]:ends[i]]``), and per record the
    index of its key among them; a block of records at a time, the keys of one length told apart as
    fixed-width byte strings."""
    keys: list[bytes] = []
    known: dict[bytes, int] = {}
    index = np.zeros(len(records), np.int32)
    for lo in range(0, len(records), BLOCK):
        rec = records[lo:lo + BLOCK]
        end = ends[rec]
        begin = np.where(rec > 0, ends[np.maximum(rec - 1, 0)], 0)
        length = end - begin
        for width in distinct(length).tolist():
            at = np.flatnonzero(length == width)
            if width == 0:
                told, inverse = [b""], np.zeros(len(at), np.int64)
            else:
                rows = np.ascontiguousarray(data[begin[at, None] + np.arange(width)])   # (records, width) bytes
                found, inverse = np.unique(rows.view(f"V{width}"), return_inverse=True)
                told = [bytes(k) for k in found.tolist()]
            ids = np.array([known.setdefault(k, len(known)) for k in told], np.int32)
            index[lo + at] = ids[inverse.reshape(-1)]
    keys = list(known)   # (a dict keeps the order ids were given in)
    return keys, index
