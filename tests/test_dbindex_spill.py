"""fsck of a DbLedgerStorage bookie forced to spill (a memory limit far below what its locations and scans
need) gives exactly the findings, in the same order, of a check that holds everything in memory: the
locations kept between passes go to the spill folder, the locations -> entry logs join runs over many
ranges of entry logs, and the entries no location points at are joined by ledger partitions."""
from __future__ import annotations

import os

from bkdisk.bookie.db_index_writer import write_db_indexes
from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec
from bkdisk.bookie.writer import lac_body, write_bookie
from bkdisk.diskio.spill import PREFIX, MemoryLimit
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.passes.p5_crosscheck import db_locations as p5_crosscheck
from tests.fsck_helpers import mixed_ledgers

TINY = 1 / 256   # MiB


def _damaged_db_bookie(base: str):
    """A DbLedgerStorage bookie of a dozen small entry logs whose locations database is rewritten with a
    fault of each kind the join finds."""
    spec = BookieSpec(mixed_ledgers(7, b"pw", n=8, entries=40), entry_log_size_limit=64 * 1024, storage="rocksdb")
    w = write_bookie(spec, os.path.join(base, "bookie"))
    assert len(w.entry_log_files) > 6
    locs = dict(w.locations)
    one, two, gone = LedgerId(0, 1), LedgerId(0, 2), LedgerId(0, 3)
    locs[(one, 3)] += 7                                           # no entry starts there
    locs[(one, 4)] = locs[(two, 9)]                               # another entry starts there
    locs[(one, 5)] = (0x77 << 32) | 1028                          # a log the dir does not hold
    for e in range(10, 15):
        del locs[(two, e)]                                        # a live ledger's entries not indexed
    for e in range(40):
        del locs[(gone, e)]                                       # a deleted ledger: its entries are garbage
    ledgers = [l for l in spec.ledgers if l.ledger_id != 3]
    current = os.path.join(w.root, spec.ledger_dirs[0], CURRENT_DIR)
    for name in ("locations", "ledgers"):
        for p in os.listdir(os.path.join(current, name)):
            os.unlink(os.path.join(current, name, p))
    write_db_indexes(current, ledgers, locs, lac_body)
    return discover(w.root)


def test_a_spilled_check_of_a_damaged_db_bookie_gives_the_same_findings(tmp_path, monkeypatch):
    dirs = _damaged_db_bookie(str(tmp_path))
    ranges = []
    real = p5_crosscheck.split_ranges
    monkeypatch.setattr(p5_crosscheck, "split_ranges", lambda *a: ranges.append(real(*a)) or ranges[-1])
    tmp = tmp_path / "spill"
    tmp.mkdir()
    held = check_bookie(dirs, CheckOptions())
    spilled = check_bookie(dirs, CheckOptions(memory=MemoryLimit(TINY, str(tmp))))
    try:
        assert len(ranges[0]) == 0 and len(ranges[1]) > 3, "the tiny limit did not split the join"
        (_di, _c, idx), = spilled.context.__dict__["_dbindex_read"]
        assert idx.rows.spilled and not held.context.__dict__["_dbindex_read"][0][2].rows.spilled
        want = [f.to_json() for f in held.findings]
        codes = [f["code"] for f in want]
        # DBINDEX_ENTRY_UNINDEXED: the garbage, and the copies the moved locations left
        for code, n in (("DBINDEX_LOCATION_WRONG", 2), ("DBINDEX_LOCATION_MISSING_LOG", 1),
                        ("DBINDEX_ENTRY_NOT_INDEXED", 5), ("DBINDEX_ENTRY_UNINDEXED", 40 + 3)):
            assert codes.count(code) == n, (code, codes)
        assert [f.to_json() for f in spilled.findings] == want
    finally:
        held.close()
        spilled.close()
    assert not [n for n in os.listdir(tmp) if n.startswith(PREFIX)]
