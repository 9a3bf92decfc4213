"""A copy a bookie holds in its entry logs but whose entry its index does not hold is not served
(BookKeeper reads through the index): on a copy of golden cluster-3 with ledger 17's `.idx` removed on
bk-2 (SortedLedgerStorage), ledger 16's locations deleted from bk-3's RocksDB `locations` database
(DbLedgerStorage, through its WAL) and bk-1's entry log 0.log removed (copies the index points at whose
bytes are gone), every table counts the unindexed copies as missing, in a state of their own, and the
lost log's copies as missing only. The golden files never change."""
from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from spark_session import shared_spark

from bkdisk.audit.job import read_tables, run_audit
from bkdisk.audit.metadata_source import MetadataDirSource
from bkdisk.audit.report import summarize
from bkdisk.audit.rows import DiskInput, RunInfo
from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import locations_key
from bkdisk.rocksdbfiles import writer as w
from bkdisk.rocksdbfiles.sst import SstFile

pytestmark = pytest.mark.slow   # a real Spark audit of a whole cluster

BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
UNINDEXED = {("bk-2.rack-a", 17), ("bk-3.rack-b", 16)}   # (bookie, ledger) whose index lost the ledger
LOST_LOG = ("bk-1.rack-a", "ledgers0", "0.log")


def writable_copy(src: Path, root: Path) -> Path:
    shutil.copytree(src, root)
    for d, _dirs, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return root


def drop_db_ledger(current: Path, ledger: int) -> int:
    """Delete every location of ``ledger`` from a DbLedgerStorage ledger dir's ``locations`` database, as
    the bookie would through its WAL; returns how many."""
    db = current / "locations"
    recs = list(SstFile(str(db / "000008.sst"), (db / "000008.sst").read_bytes()).records())
    mine = [r.user_key for r in recs if r.user_key[:8] == locations_key(ledger, 0)[:8]]
    seq = max(r.sequence for r in recs)
    (db / "000009.log").write_bytes(w.frame_log([w.write_batch(seq + 1, [(rf.ValueType.DELETION, k, b"")
                                                                          for k in mine])]))
    return len(mine)


def not_indexed_copy(src: Path, root: Path) -> Path:
    """A copy of cluster-3 with ledger 17's ``.idx`` removed on bk-2, ledger 16's locations on bk-3 and
    bk-1's entry log 0.log."""
    root = writable_copy(src, root)
    (root / "bookies" / "bk-2.rack-a" / "ledgers" / "current" / "0" / "11" / "11.idx").unlink()
    assert drop_db_ledger(root / "bookies" / "bk-3.rack-b" / "ledgers" / "current", 16) == 40
    b, d, log = LOST_LOG
    (root / "bookies" / b / d / "current" / log).unlink()
    return root


@pytest.fixture(scope="module")
def damaged(golden, tmp_path_factory):
    base = tmp_path_factory.mktemp("not-indexed")
    root = not_indexed_copy(golden / "cluster-3", base / "c3")
    b, d, log = LOST_LOG
    man = json.loads((golden / "cluster-3" / "manifest.json").read_text())
    bk1 = json.loads((golden / "cluster-3" / "bookies" / b / "manifest.json").read_text())
    gone = {(int(r["ledger_id"]), r["entry_id"]) for r in bk1["entry_log_records"]
            if (r["ledger_dir"], r["entry_log_file"]) == (d, log)}
    out = base / "out"
    run_audit(shared_spark(), [DiskInput(str(root / "bookies" / x)) for x in BOOKIES], [],
              MetadataDirSource(str(root / "metadata")), str(out), RunInfo.new("not-indexed"))
    return {"t": read_tables(str(out)), "man": man, "gone": gone, "out": out, "root": root}


def expected_entries(man: dict, gone: set) -> dict:
    """Per entry short of copies: (copies expected, intact, bookies missing, with a copy, not indexed)."""
    out = {}
    for e in man["entries"]:
        key = (int(e["ledger_id"]), e["entry_id"])
        ws = e["write_set"]
        lost = {b for b in ws if b == LOST_LOG[0] and key in gone}
        unindexed = {b for b in ws if (b, key[0]) in UNINDEXED} - lost
        missing = lost | unindexed
        if missing:
            out[key] = (len(ws), len(ws) - len(missing), sorted(missing), sorted(set(ws) - missing), sorted(unindexed))
    return out


def test_unindexed_copies_are_flagged_in_the_replicas_table(damaged):
    by = defaultdict(set)
    for r in damaged["t"]["replicas"].to_pylist():
        by[r["indexed"]].add((r["bookie_id"], r["ledger_id"]))
    assert by[False] == UNINDEXED
    assert not by[True] & UNINDEXED and None not in by   # every disk's index was read


def test_under_replicated_counts_an_unindexed_copy_as_missing_in_its_own_column(damaged):
    got = {}
    for r in damaged["t"]["under_replicated"].to_pylist():
        for e in range(r["first_entry_id"], r["last_entry_id"] + 1):
            key = (r["ledger_id"], e)
            assert key not in got, key
            got[key] = (r["copies_expected"], r["copies_intact"], r["bookies_missing"], r["bookies_with_copy"],
                        r["bookies_not_indexed"])
    want = expected_entries(damaged["man"], damaged["gone"])
    assert got == want
    # the lost log's copies are missing, never "not indexed"; the unindexed ones are
    assert any(v[2] == ["bk-1.rack-a"] and v[4] == [] for v in want.values())
    assert sum(1 for v in want.values() if "bk-2.rack-a" in v[4]) == 50
    assert damaged["t"]["missing_ledgers"].num_rows == 0 and damaged["t"]["orphans"].num_rows == 0


def test_the_histogram_counts_unindexed_copies_apart_from_intact_ones(damaged):
    want = expected_entries(damaged["man"], damaged["gone"])
    hist = defaultdict(int)
    for e in damaged["man"]["entries"]:
        key = (int(e["ledger_id"]), e["entry_id"])
        n = len(e["write_set"])
        hist[(n, want[key][1], len(want[key][4])) if key in want else (n, n, 0)] += 1
    got = {(h["copies_expected"], h["copies_intact"], h["copies_not_indexed"]): h["entries"]
           for h in damaged["t"]["replication_histogram"].to_pylist()}
    assert got == dict(hist) and got[(3, 2, 1)] > 0 and sum(got.values()) == 315


def test_the_summary_counts_them_per_bookie_and_per_ledger(damaged):
    s = summarize(str(damaged["out"]), "not-indexed", "metadata")
    want = expected_entries(damaged["man"], damaged["gone"])
    bookies = {b["bookie_id"]: b for b in s["bookies"]}
    for b in BOOKIES:
        assert bookies[b]["missing_copies"] == sum(1 for v in want.values() if b in v[2]), b
        assert bookies[b]["not_indexed_copies"] == sum(1 for v in want.values() if b in v[4]), b
    assert bookies["bk-2.rack-a"]["not_indexed_copies"] == 50 and bookies["bk-1.rack-a"]["not_indexed_copies"] == 0
    worst = {w["ledger"]: w for w in s["worst_ledgers"]}
    assert worst["17"]["not_indexed_copies"] == 50 and "bk-2.rack-a" in worst["17"]["bookies"]
    assert worst["16"]["not_indexed_copies"] == 40
    assert s["not_indexed_copies"] == sum(len(v[4]) for v in want.values())


def test_the_report_of_the_real_audit_says_which_copies_fsck_repair_restores(damaged, tmp_path):
    from bkdisk.audit.report import write_reports
    from tests.report_browser import WIDTH, render
    from tests.test_audit_report import SHOTS
    s = summarize(str(damaged["out"]), "not-indexed", "metadata")
    _js, page = write_reports(str(damaged["out"]), s)
    dom, probe = render(Path(page), tmp_path / "chromium", SHOTS / "cluster3-not-indexed.png")
    shown = [p["text"] for p in probe["problems"]]
    assert shown == s["problems"]
    (bk2,) = [p for p in shown if p.startswith("bk-2.rack-a: 50 copies of ledger 17 in its entry logs, not indexed")]
    assert bk2.endswith("`bookie-fsck --repair` on its disk restores its index")
    (bk3,) = [p for p in shown if p.startswith("bk-3.rack-b: 40 copies of ledger 16 in its entry logs, not indexed")]
    assert "rebuild-db-ledger-locations-index" in bk3
    # bk-2's fsck line quotes the cause, not the entries pass 7 then finds missing
    (fsck,) = [p for p in shown if p.startswith("bk-2.rack-a: fsck found")]
    assert "the first: LEDGER_NOT_INDEXED" in fsck
    # bk-1 lost its copies outright: re-replicated, never "not indexed"
    assert any(p.startswith("bk-1.rack-a: re-replicate ledgers ") and "bin/bookkeeper shell recover" in p
               for p in shown), shown
    assert not any(p.startswith("bk-1.rack-a:") and "not indexed" in p for p in shown)
    assert "2/3+1" in dom and probe["scrollWidth"] <= WIDTH
