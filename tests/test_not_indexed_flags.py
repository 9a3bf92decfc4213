"""Which copies of a disk its index does not hold, as the audit's replicas table marks them
(``indexed``), from fsck's findings: a ledger with no index, an entry missing from its ledger's
index (``.idx`` or DbLedgerStorage's locations), ids above 2^63 as DbLedgerStorage's signed keys
give them; any other finding leaves a copy indexed."""
from __future__ import annotations

import numpy as np

from bkdisk.audit.not_indexed import NotIndexed
from bkdisk.fsck.codes import Code
from bkdisk.fsck.findings import Finding

BIG = (1 << 64) - 5   # a ledger id above 2^63 (a negative long in DbLedgerStorage's keys)


def test_each_finding_of_an_unindexed_copy_marks_it_and_no_other_does():
    gaps = NotIndexed([
        Finding(Code.LEDGER_NOT_INDEXED, scope=0, ledger=17, detail="50 entries"),
        Finding(Code.LEDGER_INDEX_MISSING, scope=3, ledger=9, detail="2 entries"),
        Finding(Code.ENTRY_NOT_INDEXED, scope=0, ledger=16, entry=4, detail="log 0.log position 1024"),
        Finding(Code.DBINDEX_ENTRY_NOT_INDEXED, scope=0, ledger=BIG - (1 << 64), entry=2, path="/x/0.log", offset=8),
        Finding(Code.ENTRIES_MISSING, scope=0, ledger=18, detail="3 entries (0-2)"),   # a consequence, not a copy
        Finding(Code.GARBAGE_ENTRIES, detail="5 entries of 1 ledgers"),
    ])
    assert gaps
    rows = [(0, 17, 0), (0, 17, 49), (3, 9, 1), (0, 9, 1), (0, 16, 4), (0, 16, 5), (0, BIG, 2), (0, BIG, 3),
            (0, 18, 0), (0, 1, 0)]
    scope, ledger, entry = (np.array([r[i] for r in rows], np.uint64 if i < 2 else np.int64) for i in range(3))
    assert gaps.indexed(scope, ledger, entry).tolist() == [False, False, False, True, False, True, False, True,
                                                            True, True]


def test_a_disk_without_such_findings_has_every_copy_indexed():
    gaps = NotIndexed([Finding(Code.GARBAGE_ENTRIES, detail="1 entries of 1 ledgers")])
    assert not gaps
    ids = np.arange(4, dtype=np.uint64)
    assert gaps.indexed(ids * 0, ids, ids.astype(np.int64)).tolist() == [True] * 4
