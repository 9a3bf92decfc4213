"""fsck/passes/p_dbindex.py on golden DbLedgerStorage bookies (clean) and on damaged copies (the right
code for each fault, no byte changed). Wiring into fsck.api and the problem table is left to their owners."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from bookie.layout import discover
from conftest import GOLDEN
from formats import rocksdb as rf
from formats.dbledger import location_value, locations_key
from fsck.context import CheckContext
from fsck.passes.p_dbindex import check
from fsck.problems import PROBLEMS
from rocksdbfiles import writer as w
from rocksdbfiles.dbindex import read_ledger_dir
from rocksdbfiles.sst import SstFile

V = rf.ValueType
SRC = GOLDEN / "dbstorage-v6-bookieid"


def _tree_digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(d)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.fixture()
def bookie(tmp_path: Path):
    dst = tmp_path / "bk"
    shutil.copytree(SRC, dst, ignore=shutil.ignore_patterns("tool-output", "metadata"))
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def _codes(root: Path) -> list[tuple[str, dict]]:
    before = _tree_digest(root)
    out = check(CheckContext(discover(str(root))))
    assert _tree_digest(root) == before
    return out


@pytest.mark.parametrize("root", [SRC, GOLDEN / "cluster-3" / "bookies" / "bk-3.rack-b"], ids=lambda p: p.name)
def test_golden_db_bookies_are_clean(root: Path):
    assert _codes(root) == []


def test_problem_texts_format_with_finding_fields():
    db = [p for code, p in PROBLEMS.items() if code.startswith("DBINDEX_")]
    assert len(db) == 12
    for p in db:
        assert p.code.startswith("DBINDEX_") and p.pass_no in (2, 3, 5)
        assert p.text.format(path="/p", detail="d", ledger_name="7", entry=3, offset=9)
        assert p.repair is None                    # the databases are never written: BookKeeper rebuilds


def test_flipped_sst_byte(bookie: Path):
    sst = bookie / "ledgers1" / "current" / "locations" / "000008.sst"
    data = bytearray(sst.read_bytes())
    h = SstFile(str(sst), bytes(data)).index_handles[0]
    data[h.offset + 100] ^= 0xFF
    sst.write_bytes(bytes(data))
    found = _codes(bookie)
    (code, f), *rest = found
    assert code == "DBINDEX_BLOCK_CHECKSUM" and f["path"] == str(sst) and f["offset"] == h.offset
    assert "keys start .. " in f["detail"]
    assert {c for c, _ in rest} == {"DBINDEX_ENTRY_UNINDEXED"} and len(rest) == 62


def test_deleted_sst(bookie: Path):
    (bookie / "ledgers0" / "current" / "ledgers" / "000008.sst").unlink()
    codes = [c for c, _ in _codes(bookie)]
    assert codes.count("DBINDEX_SST_MISSING") == 1
    assert codes.count("DBINDEX_LEDGER_UNKNOWN") == 3 and codes.count("DBINDEX_LEDGER_MISSING") == 3


def test_truncated_wal(bookie: Path):
    wal = bookie / "ledgers0" / "current" / "locations" / "000009.log"
    wal.write_bytes(w.frame_log([w.write_batch(52, [(V.DELETION, locations_key(0, 0), b"")]),
                                 w.write_batch(53, [(V.DELETION, locations_key(0, 1), b"")])])[:-2])
    found = _codes(bookie)
    torn = [f for c, f in found if c == "DBINDEX_WAL_TORN"]
    assert len(torn) == 1 and torn[0]["path"] == str(wal) and "bytes not replayed" in torn[0]["detail"]
    unindexed = [(f["ledger"], f["entry"]) for c, f in found if c == "DBINDEX_ENTRY_UNINDEXED"]
    assert unindexed == [(0, 0)]                   # the whole first batch was replayed; the torn one was not


def test_location_rewritten_to_another_entry(bookie: Path):
    idx = {(x.ledger_id, x.entry_id): x for x in read_ledger_dir(bookie / "ledgers1" / "current").locations}
    other = idx[(1, 2)]
    (bookie / "ledgers1" / "current" / "locations" / "000009.log").write_bytes(w.frame_log(
        [w.write_batch(63, [(V.VALUE, locations_key(1, 0), location_value(other.log_id, other.offset))])]))
    found = _codes(bookie)
    wrong = [f for c, f in found if c == "DBINDEX_LOCATION_WRONG"]
    assert [(f["ledger"], f["entry"]) for f in wrong] == [(1, 0)] and "found ledger 1 entry 2" in wrong[0]["detail"]
    assert [(f["ledger"], f["entry"]) for c, f in found if c == "DBINDEX_ENTRY_UNINDEXED"] == [(1, 0)]


def test_location_of_a_ledger_the_ledgers_index_lacks(bookie: Path):
    (bookie / "ledgers1" / "current" / "locations" / "000009.log").write_bytes(w.frame_log(
        [w.write_batch(63, [(V.VALUE, locations_key(9999, 0), location_value(0, 1028))])]))
    found = _codes(bookie)
    unknown = [f for c, f in found if c == "DBINDEX_LEDGER_UNKNOWN"]
    assert [f["ledger"] for f in unknown] == [9999]
    assert ("DBINDEX_LOCATION_WRONG", 9999) in {(c, f.get("ledger")) for c, f in found}


def test_a_missing_manifest_is_one_unreadable_finding(bookie: Path):
    (bookie / "ledgers0" / "current" / "ledgers" / "CURRENT").unlink()
    found = _codes(bookie)
    unreadable = [f for c, f in found if c == "DBINDEX_UNREADABLE"]
    assert len(unreadable) == 1 and unreadable[0]["path"].endswith("ledgers/CURRENT")
