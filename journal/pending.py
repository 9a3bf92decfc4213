"""The journal records a restart would replay (those after lastMark), as columns: a journal whose
lastMark is old (a bookie that stopped without a checkpoint) holds millions of them, and a Python
tuple per record would cost hundreds of bytes each."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bkdisk.formats.ids import LedgerId

PENDING_DTYPE = np.dtype([("journal", "<i4"), ("offset", "<i8"), ("scope", "<u8"), ("ledger", "<u8"),
                          ("entry", "<i8")])   # journal: the index of its path in ``paths``
BLOCK = 65536   # records made into tuples at once


class PendingRecords:
    """Data records after lastMark, in journal then record order: each one's journal (``paths``),
    the offset of its length prefix and its (scope, ledger, entry)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self._parts: list[np.ndarray] = []
        self._rows: np.ndarray | None = None

    def add(self, path: str, offset: np.ndarray, scope: np.ndarray, ledger: np.ndarray, entry: np.ndarray) -> None:
        """Records of the journal at ``path`` that follow those added before."""
        if len(offset) == 0:
            return
        if not self.paths or self.paths[-1] != path:
            self.paths.append(path)
        part = np.empty(len(offset), PENDING_DTYPE)
        part["journal"], part["offset"] = len(self.paths) - 1, offset
        part["scope"], part["ledger"], part["entry"] = scope, ledger, entry
        self._parts.append(part)
        self._rows = None

    def extend(self, other: PendingRecords) -> None:
        """``other``'s records (of later journals) after these: its rows are taken, not copied (their
        journal numbers made ours in place); ``other`` is not to be used after."""
        ours = []
        for path in other.paths:
            if not self.paths or self.paths[-1] != path:
                self.paths.append(path)
            ours.append(len(self.paths) - 1)
        remap = np.array(ours, np.int32)
        for part in other._parts:
            part["journal"] = remap[part["journal"]]
            self._parts.append(part)
        other._parts, other._rows = [], None
        self._rows = None

    @property
    def rows(self) -> np.ndarray:
        """Every record (PENDING_DTYPE)."""
        if self._rows is None:
            parts = self._parts
            self._rows = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, PENDING_DTYPE)
            self._parts = [self._rows]
        return self._rows

    def ids(self) -> list[np.ndarray]:
        """The records' (scope, ledger, entry) columns."""
        r = self.rows
        return [r["scope"], r["ledger"], r["entry"]]

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)

    def holds(self, scope: int, ledger: int, entry: int) -> bool:
        r = self.rows
        return bool(np.any((r["scope"] == np.uint64(scope)) & (r["ledger"] == np.uint64(ledger))
                           & (r["entry"] == entry)))

    def tuples(self, rows: np.ndarray | None = None) -> Iterator[tuple[str, int, LedgerId, int]]:
        """(path, offset, ledger, entry) of the records numbered ``rows`` (default: all), in that order."""
        r = self.rows if rows is None else self.rows[rows]
        for lo in range(0, len(r), BLOCK):
            b = r[lo:lo + BLOCK]
            for j, o, s, l, e in zip(b["journal"].tolist(), b["offset"].tolist(), b["scope"].tolist(),
                                     b["ledger"].tolist(), b["entry"].tolist()):
                yield self.paths[j], o, LedgerId(s, l), e

    def __repr__(self) -> str:
        return f"PendingRecords({len(self)} records in {len(self.paths)} journals)"
