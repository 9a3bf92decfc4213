"""The bench's bulk-built bookie of small entries: each entry is the one package_entry makes, and the
bookie checks clean."""
from __future__ import annotations

import numpy as np

from bench import bulk_bookie
from bkdisk.bookie.layout import discover
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import package_entry
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions


def test_packed_entries_are_package_entrys():
    rng = np.random.default_rng(3)
    pool = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    sizes = np.array([1, 100, 999, 64, 65, 0])
    starts = np.array([0, 5, 100, 7, 3000, 9])
    ledgers, entries = np.array([1, 1, 1, 7, 7, 8]), np.array([0, 1, 2, 0, 1, 0])
    lengths = np.array([1, 101, 1100, 64, 129, 0])
    data, at = bulk_bookie.pack_entries(pool, starts, sizes, ledgers, entries, lengths)
    for i in range(len(sizes)):
        want = package_entry(ledger_id=int(ledgers[i]), entry_id=int(entries[i]),
                             last_add_confirmed=int(entries[i]) - 1, length=int(lengths[i]),
                             payload=pool[starts[i]:starts[i] + sizes[i]].tobytes(),
                             digest_type=DigestType.CRC32C, password=bulk_bookie.PASSWORD).to_bytes()
        got = data[at[i]:at[i] + bulk_bookie.OVERHEAD + sizes[i]].tobytes()
        assert got == len(want).to_bytes(4, "big") + want


def test_bulk_bookie_checks_clean(tmp_path, monkeypatch):
    monkeypatch.setattr(bulk_bookie, "LOG_LIMIT", 1 << 20)   # several logs, rolled with their maps
    counts = bulk_bookie.build(str(tmp_path / "bookie"), 0.01, 40, 100, 1000, 5)
    assert counts["logs"] > 3
    rep = check_bookie(discover(str(tmp_path / "bookie")), CheckOptions())
    assert [f.line() for f in rep.findings if f.severity.value != "info"] == []
    assert rep.stats["entries"] == counts["entries"] and rep.stats["index_files"] == 40
    first = scan_entry_log(str(tmp_path / "bookie" / "ledgers" / "current" / "0.log"))
    assert 100 <= first.entries["length"][0] <= 1000 and first.ledgers_map is not None
