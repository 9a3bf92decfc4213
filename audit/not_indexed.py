"""Copies a bookie holds in its entry logs but cannot serve: BookKeeper answers a read through the
bookie's index (the ``.idx`` files, or DbLedgerStorage's ``locations`` database), so an entry the
index does not hold is not a served copy until ``bookie-fsck --repair`` rebuilds the index (or, on
DbLedgerStorage, BookKeeper's rebuild command fsck names). Judged from fsck's findings on the disk:
the ledgers with no index at all and the entries missing from their ledger's index."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from bkdisk.fsck.codes import Code
from bkdisk.fsck.keyjoin import KeySet

U64 = 1 << 64
# A ledger whose entries are in the entry logs and which has no index (with metadata, or without
# it but with a ledger key in the journal), and an entry its ledger's index does not hold.
LEDGER_CODES = (Code.LEDGER_NOT_INDEXED, Code.LEDGER_INDEX_MISSING)
ENTRY_CODES = (Code.ENTRY_NOT_INDEXED, Code.DBINDEX_ENTRY_NOT_INDEXED)


class NotIndexed:
    """The ledgers and entries fsck found in the entry logs and not in the bookie's index."""

    def __init__(self, findings: Iterable):
        ledgers: list[tuple[int, int]] = []
        entries: list[tuple[int, int, int]] = []
        for f in findings:
            if f.code in LEDGER_CODES and f.ledger is not None:
                ledgers.append(((f.scope or 0) % U64, f.ledger % U64))
            elif f.code in ENTRY_CODES and f.ledger is not None and f.entry is not None:
                entries.append(((f.scope or 0) % U64, f.ledger % U64, f.entry))
        self.ledgers = KeySet([np.array([x[i] for x in ledgers], np.uint64) for i in range(2)])
        self.entries = KeySet([np.array([x[i] for x in entries], np.uint64 if i < 2 else np.int64)
                               for i in range(3)])

    def __bool__(self) -> bool:
        return bool(len(self.ledgers) or len(self.entries))

    def indexed(self, scope: np.ndarray, ledger: np.ndarray, entry: np.ndarray) -> np.ndarray:
        """Per copy (its unsigned ids): whether the bookie's index holds its entry."""
        s, l = np.asarray(scope).astype(np.uint64), np.asarray(ledger).astype(np.uint64)
        e = np.asarray(entry).astype(np.int64)
        return ~(self.ledgers.contains([s, l]) | self.entries.contains([s, l, e]))
