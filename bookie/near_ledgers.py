"""The ledgers whose metadata places entries on one bookie, held as columns (``NearLedgers``).

A Pulsar bookie holds a ledger per topic and roll-over: a million of them is common. Held as
LedgerMetadata objects in a dict they take about 0.4 KB each, even with the values they repeat held
once; as columns, some 50 bytes. Each ledger keeps its id, the integers that are its own (length, last
entry id, ctime, ctoken) and the number of its *shape*: every other field (format, quorums, state,
ensembles, digest type, password, custom metadata), which a cluster's ledgers repeat, held once. A
ledger's LedgerMetadata is built again when asked for; what depends on the shape alone (whether
BookKeeper's client loads it, whether it is over-replicated, which entries it places on a bookie) is
decided once per shape (``per_shape``).
"""
from __future__ import annotations

import operator
from array import array
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping
from typing import TypeVar

import numpy as np

from bkdisk.diskio.distinct import run_heads, sorted_pair_positions
from bkdisk.diskio.sorted_search import pair_row
from bkdisk.formats.ids import U64, LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata

T = TypeVar("T")
ROWS_AT_ONCE = 1 << 16   # rows turned into Python values at once when iterating
# (name, array type code, numpy dtype) of the columns a ledger has of its own
_OWN = (("scope", "Q", np.uint64), ("ledger", "Q", np.uint64), ("length", "q", np.int64),
        ("last", "q", np.int64), ("ctime", "q", np.int64), ("ctoken", "q", np.int64), ("shape", "i", np.int32))


def shape_of(m: LedgerMetadata) -> tuple:
    """Every field of ``m`` but its own integers (length, last entry id, ctime, ctoken), and whether
    ctime and ctoken are absent."""
    return (m.format_version, m.write_quorum, m.ensemble_size, m.ack_quorum, m.state, m.ensembles, m.digest_type,
            m.password, m.custom_metadata, m.has_last_entry_id, m.has_ack_quorum, m.ctime is None, m.ctoken is None)


def _metadata(sh: tuple, length: int, last: int, ctime: int, ctoken: int) -> LedgerMetadata:
    return LedgerMetadata(format_version=sh[0], write_quorum=sh[1], ensemble_size=sh[2], ack_quorum=sh[3],
                          length=length, last_entry_id=last, state=sh[4], ensembles=sh[5], digest_type=sh[6],
                          password=sh[7], ctime=None if sh[11] else ctime, custom_metadata=sh[8],
                          ctoken=None if sh[12] else ctoken, has_last_entry_id=sh[9], has_ack_quorum=sh[10])


class NearLedgers(Mapping):
    """LedgerId -> LedgerMetadata, held as columns sorted by (scope, ledger). ``add`` as a dict's
    assignment (a ledger added twice keeps the last); reading sorts what was added since."""

    def __init__(self) -> None:
        self._adding = {name: array(code) for name, code, _dtype in _OWN}
        self._cols = {name: np.zeros(0, dtype) for name, _code, dtype in _OWN}
        self._shape_numbers: dict[tuple, int] = {}
        self._values: dict = {}   # every value of a shape met, as its first object
        self.shapes: list[tuple] = []

    @classmethod
    def of(cls, items: Mapping[LedgerId, LedgerMetadata]) -> NearLedgers:
        near = cls()
        for lid, m in items.items():
            near.add(lid, m)
        return near

    def add(self, lid: LedgerId, m: LedgerMetadata) -> None:
        scope, ledger = lid
        sh = shape_of(m)
        k = self._shape_numbers.get(sh)
        if k is None:
            shared = self._shared(sh)   # (the key too: equal, and holding no values of its own)
            k = self._shape_numbers[shared] = len(self.shapes)
            self.shapes.append(shared)
        for name, v in zip(self._adding, (scope, ledger, m.length, m.last_entry_id, m.ctime or 0,
                                          m.ctoken or 0, k)):
            self._adding[name].append(v)

    def _shared(self, sh: tuple) -> tuple:
        """``sh`` with the values shapes have in common (bookie ids, ensembles, passwords, custom keys and
        values) as the objects of the shapes before: shapes differ in a field or two (a topic's name)."""
        def one(v):
            return self._values.setdefault(v, v)

        custom = one(tuple(one((one(k), one(v))) for k, v in sh[8]))
        ensembles = tuple(one((first, one(tuple(one(b) for b in members)))) for first, members in sh[5])
        return (*sh[:4], one(sh[4]), one(ensembles), one(sh[6]), one(sh[7]), custom, *sh[9:])

    def _columns(self) -> dict[str, np.ndarray]:
        if len(self._adding["ledger"]):
            cols = {name: np.concatenate([self._cols[name], np.frombuffer(self._adding[name], dtype)])
                    for name, _code, dtype in _OWN}
            self._adding = {name: array(code) for name, code, _dtype in _OWN}
            order = np.lexsort((cols["ledger"], cols["scope"]))   # (stable: a ledger's later row after its earlier)
            s, led = cols["scope"][order], cols["ledger"][order]
            last = np.append(run_heads(s, led)[1:], True)   # the last row of each ledger's: the one added last
            order = order[last]
            self._cols = {}
            for name in list(cols):   # (a column at a time: each dropped as its ordered copy is made)
                self._cols[name] = cols.pop(name)[order]
        return self._cols

    @property
    def scope(self) -> np.ndarray:
        return self._columns()["scope"]

    @property
    def ledger(self) -> np.ndarray:
        return self._columns()["ledger"]

    @property
    def shape(self) -> np.ndarray:
        """Per ledger, the number of its shape in ``shapes``."""
        return self._columns()["shape"]

    @property
    def ctime(self) -> np.ndarray:
        """Per ledger, its creation time (0 where its shape says it has none)."""
        return self._columns()["ctime"]

    @property
    def last(self) -> np.ndarray:
        """Per ledger, its last entry id as stored (BookKeeper reads it only when the ledger is closed)."""
        return self._columns()["last"]

    def key_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The ledgers' (scope, ledger) columns."""
        return self.scope, self.ledger

    def position(self, scope: int, ledger: int) -> int:
        """The row of ledger (scope, ledger), or -1 (also for what names no ledger: not two ints of 64 bits)."""
        try:
            scope, ledger = operator.index(scope), operator.index(ledger)
        except TypeError:
            return -1
        if not (0 <= scope <= U64 and 0 <= ledger <= U64):
            return -1
        c = self._columns()
        return pair_row(c["scope"], c["ledger"], scope, ledger)

    def positions(self, scope: np.ndarray, ledger: np.ndarray) -> np.ndarray:
        """``position`` of each (scope, ledger) row, at once."""
        c = self._columns()
        return sorted_pair_positions(scope, ledger, c["scope"], c["ledger"])

    def metadata(self, i: int) -> LedgerMetadata:
        return self.metadata_at(slice(i, i + 1))[0]

    def metadata_at(self, rows: np.ndarray | slice) -> list[LedgerMetadata]:
        """The metadata of each of ``rows`` (positions, or a slice of them), built from the columns at once."""
        c = self._columns()
        shapes = self.shapes
        return [_metadata(shapes[k], length, last, ctime, ctoken) for k, length, last, ctime, ctoken in zip(
            *(c[name][rows].tolist() for name in ("shape", "length", "last", "ctime", "ctoken")))]

    def per_shape(self, fn: Callable[[LedgerMetadata], T], numbers: Iterable[int] | None = None) -> list[T]:
        """``fn`` of each shape (by number; ``numbers``: of those only), given a ledger of that shape with
        length 0 and last entry -1: for what depends on the shape's fields alone."""
        shapes = self.shapes
        return [fn(_metadata(shapes[k], 0, -1, 0, 0)) for k in (range(len(shapes)) if numbers is None else numbers)]

    def __getitem__(self, lid: LedgerId) -> LedgerMetadata:
        i = self.position(*lid) if isinstance(lid, tuple) and len(lid) == 2 else -1
        if i < 0:
            raise KeyError(lid)
        return self.metadata(i)

    def __contains__(self, lid: object) -> bool:
        return isinstance(lid, tuple) and len(lid) == 2 and self.position(*lid) >= 0

    def __len__(self) -> int:
        return len(self._columns()["ledger"])

    def __iter__(self) -> Iterator[LedgerId]:
        c = self._columns()
        for rows in self._parts():
            yield from map(LedgerId, c["scope"][rows].tolist(), c["ledger"][rows].tolist())

    def items(self) -> ItemsView:
        return _InOrder(self)

    def _parts(self) -> Iterator[slice]:
        """The rows in order, ROWS_AT_ONCE at a time."""
        n = len(self)
        return (slice(lo, lo + ROWS_AT_ONCE) for lo in range(0, n, ROWS_AT_ONCE))


class _InOrder(ItemsView):
    """The items of a NearLedgers in id order, each ledger's metadata built as it comes."""

    _mapping: NearLedgers

    def __iter__(self) -> Iterator[tuple[LedgerId, LedgerMetadata]]:
        near = self._mapping
        for rows in near._parts():
            yield from zip(map(LedgerId, near.scope[rows].tolist(), near.ledger[rows].tolist()),
                           near.metadata_at(rows))
