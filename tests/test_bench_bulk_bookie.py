"""The bench's bulk-built bookie of small entries: each entry is the one package_entry makes, the default
layout interleaves ledgers as a busy bookie's logs do, and the bookie checks clean."""
from __future__ import annotations

import os

import numpy as np
import pytest

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
    sizes = np.array([1, 100, 999, 64, 65, 0, 300])
    starts = np.array([0, 5, 100, 7, 3000, 9, 11])
    ledgers, entries = np.array([1, 1, 1, 7, 7, 8, (1 << 63) - 1]), np.array([0, 1, 2, 0, 1, 0, 4])
    lengths = np.array([1, 101, 1100, 64, 129, 0, 900])
    crc32 = np.array([False, False, False, True, True, False, True])
    data, at = bulk_bookie.pack_entries(pool, starts, sizes, ledgers, entries, lengths, crc32)
    for i in range(len(sizes)):
        want = package_entry(ledger_id=int(ledgers[i]), entry_id=int(entries[i]),
                             last_add_confirmed=int(entries[i]) - 1, length=int(lengths[i]),
                             payload=pool[starts[i]:starts[i] + sizes[i]].tobytes(),
                             digest_type=DigestType.CRC32 if crc32[i] else DigestType.CRC32C,
                             password=bulk_bookie.PASSWORD).to_bytes()
        end = at[i + 1] if i + 1 < len(at) else len(data)
        assert data[at[i]:end].tobytes() == len(want).to_bytes(4, "big") + want


def _logs(root):
    cur = os.path.join(root, "ledgers", "current")
    return [scan_entry_log(os.path.join(cur, n)) for n in sorted(os.listdir(cur), key=lambda n: (len(n), n))
            if n.endswith(".log") and os.path.getsize(os.path.join(cur, n)) > 1024]


def test_default_layout_interleaves_ledgers_as_a_busy_bookie(tmp_path, monkeypatch):
    monkeypatch.setattr(bulk_bookie, "LOG_LIMIT", 1 << 20)
    counts = bulk_bookie.build(str(tmp_path / "bookie"), 0.01, 200, 100, 1000, 5)
    logs = _logs(str(tmp_path / "bookie"))
    assert len(logs) > 3
    ledgers = np.concatenate([s.entries["ledger"] for s in logs]).astype(np.uint64)
    runs = 1 + int(np.count_nonzero(ledgers[1:] != ledgers[:-1]))
    # Contiguous runs: one run a ledger. Interleaved: a new ledger at almost every entry.
    assert runs > len(ledgers) // 2 and len(ledgers) == counts["entries"]
    assert all(len(np.unique(s.entries["ledger"])) > 100 for s in logs[:-1])   # every log holds most ledgers
    assert ledgers.max() > 1 << 40 and len(np.unique(ledgers)) == 200             # ids over the 64-bit range
    assert 5 <= counts["crc32_ledgers"] <= 40                                     # about one in eleven CRC32


def test_contiguous_layout_writes_each_ledger_as_one_run(tmp_path, monkeypatch):
    monkeypatch.setattr(bulk_bookie, "LOG_LIMIT", 1 << 20)
    bulk_bookie.build(str(tmp_path / "bookie"), 0.01, 40, 100, 1000, 5, layout="contiguous")
    ledgers = np.concatenate([s.entries["ledger"] for s in _logs(str(tmp_path / "bookie"))]).astype(np.int64)
    assert np.all(np.diff(ledgers) >= 0) and ledgers[0] == 1 and ledgers[-1] == 40


@pytest.mark.parametrize("layout", bulk_bookie.LAYOUTS)
def test_bulk_bookie_checks_clean(tmp_path, monkeypatch, layout):
    monkeypatch.setattr(bulk_bookie, "LOG_LIMIT", 1 << 20)   # several logs, rolled with their maps
    counts = bulk_bookie.build(str(tmp_path / "bookie"), 0.01, 40, 100, 1000, 5, layout=layout)
    assert counts["logs"] > 3
    rep = check_bookie(discover(str(tmp_path / "bookie")), CheckOptions())
    assert [f.line() for f in rep.findings if f.severity.value != "info"] == []
    assert rep.stats["entries"] == counts["entries"] and rep.stats["index_files"] == 40
    first = scan_entry_log(str(tmp_path / "bookie" / "ledgers" / "current" / "0.log"))
    assert 100 <= first.entries["length"][0] <= 1000 and first.ledgers_map is not None


def test_rocksdb_storage_keeps_the_locations_in_the_databases(tmp_path, monkeypatch):
    monkeypatch.setattr(bulk_bookie, "LOG_LIMIT", 1 << 20)
    counts = bulk_bookie.build(str(tmp_path / "bookie"), 0.01, 40, 100, 1000, 5, storage="rocksdb")
    bookie = discover(str(tmp_path / "bookie"))
    rep = check_bookie(bookie, CheckOptions())
    assert [f.line() for f in rep.findings if f.severity.value != "info"] == []
    assert rep.stats["db_locations"] == rep.stats["entries"] == counts["entries"] and rep.stats["index_files"] == 0
    assert not list((tmp_path / "bookie").rglob("*.idx"))
