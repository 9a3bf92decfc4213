"""DbLedgerStorage checks (passes 2, 3 and 5 on such a bookie, fsck/dbindex.py) on golden DbLedgerStorage
bookies (clean) and on damaged copies: the pass's own findings (the right code and fields for each fault),
then the same faults through the `bookie-fsck` command line (every pass run, the code in the JSON and the
text report, exit 4, the repair plan naming BookKeeper's rebuild, no byte of the bookie changed)."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLDEN

from bkdisk.bookie.layout import discover
from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import location_value, locations_key
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.passes.p2_hierarchy import check_databases
from bkdisk.fsck.passes.p3_index import check_ledgers
from bkdisk.fsck.passes.p5_crosscheck.db_locations import check_locations
from bkdisk.fsck.problems import PROBLEMS
from bkdisk.fsck_cli import fsck_command
from bkdisk.rocksdbfiles import writer as w
from bkdisk.rocksdbfiles.block import read_block
from bkdisk.rocksdbfiles.dbindex import read_ledger_dir
from bkdisk.rocksdbfiles.sst import SstFile

V = rf.ValueType
SRC = GOLDEN / "dbstorage-v6-bookieid"
DB_BOOKIES = [SRC, GOLDEN / "cluster-3" / "bookies" / "bk-3.rack-b"]


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
    ctx = CheckContext(discover(str(root)))
    out = check_databases(ctx) + check_ledgers(ctx) + check_locations(ctx)
    assert _tree_digest(root) == before
    return out


# --- faults, each on a copy of dbstorage-v6-bookieid (ledger L lives in dir ledgers<L % 2>) -------------------

def _locations(root: Path, d: int) -> Path:
    return root / f"ledgers{d}" / "current" / "locations"


def flip_data_block_byte(root: Path) -> Path:
    """A flipped byte inside the one data block of ledgers1's locations SST; returns the SST."""
    sst = _locations(root, 1) / "000008.sst"
    data = bytearray(sst.read_bytes())
    h = SstFile(str(sst), bytes(data)).index_handles[0]
    data[h.offset + 100] ^= 0xFF
    sst.write_bytes(bytes(data))
    return sst


def delete_ledgers_sst(root: Path) -> Path:
    sst = root / "ledgers0" / "current" / "ledgers" / "000008.sst"
    sst.unlink()
    return sst


def tear_wal_of_deletions(root: Path) -> Path:
    """ledgers0's locations WAL: a whole batch deleting (0, 0), then a torn one deleting (0, 1)."""
    wal = _locations(root, 0) / "000009.log"
    wal.write_bytes(w.frame_log([w.write_batch(52, [(V.DELETION, locations_key(0, 0), b"")]),
                                 w.write_batch(53, [(V.DELETION, locations_key(0, 1), b"")])])[:-2])
    return wal


def move_last_locations_to_a_torn_wal(root: Path, ledger: int = 1, moved: int = 3) -> tuple[Path, list[int]]:
    """ledgers1's locations rebuilt by our writer as a bookie leaves them when its last flushes are still in
    the WAL: the SST without the last ``moved`` locations of ``ledger``, a WAL batch putting each of them
    back; the last batch then cut. Returns the WAL and the entries whose location was lost."""
    db = _locations(root, 1)
    recs = list(SstFile(str(db / "000008.sst"), (db / "000008.sst").read_bytes()).records())
    mine = [r for r in recs if r.user_key[:8] == locations_key(ledger, 0)[:8]]
    tail = mine[-moved:]
    kept = [r for r in recs if r not in tail]
    seq = max(r.sequence for r in recs)
    batches = [w.write_batch(seq + 1 + i, [(V.VALUE, r.user_key, r.value)]) for i, r in enumerate(tail)]
    shutil.rmtree(db)
    w.write_db(db, [(0, kept)], wal=batches)
    (wal,) = db.glob("*.log")
    data = wal.read_bytes()
    wal.write_bytes(data[:len(data) - 5])                 # the last batch torn
    return wal, [int.from_bytes(tail[-1].user_key[8:], "big")]


def point_location_elsewhere_via_wal(root: Path) -> tuple[int, int]:
    """ledgers1's WAL puts (1, 0) at entry (1, 2)'s location; returns the rewritten key."""
    idx = {(x.ledger_id, x.entry_id): x for x in read_ledger_dir(root / "ledgers1" / "current").locations}
    other = idx[(1, 2)]
    (_locations(root, 1) / "000009.log").write_bytes(w.frame_log(
        [w.write_batch(63, [(V.VALUE, locations_key(1, 0), location_value(other.log_id, other.offset))])]))
    return 1, 0


def point_location_elsewhere_in_block(root: Path) -> tuple[tuple[int, int], tuple[int, int]]:
    """ledgers1's locations SST data block rewritten in place so (1, 0) holds another entry's location,
    recompressed to the same length and its checksum fixed: the reader accepts it. Returns (key, the other
    entry). Our writer's LZ4 reproduces the golden block byte for byte (asserted), so only the value differs."""
    sst = _locations(root, 1) / "000008.sst"
    data = bytearray(sst.read_bytes())
    t = SstFile(str(sst), bytes(data))
    h = t.index_handles[0]
    ctype = data[h.offset + h.size]
    raw = read_block(bytes(data), h, t.footer.checksum_type, path=str(sst))
    assert w.compress(ctype, raw) == (ctype, bytes(data[h.offset:h.offset + h.size]))
    recs = list(t.records())
    old = recs[0]
    assert old.user_key == locations_key(1, 0) and raw.count(old.value) == 1
    for r in recs[1:]:
        stored, body = w.compress(ctype, raw.replace(old.value, r.value))
        if stored == ctype and len(body) == h.size:
            ck = rf.builtin_checksum(t.footer.checksum_type, body + bytes([ctype]))
            data[h.offset:h.end] = body + rf.BLOCK_TRAILER.build(dict(compression_type=ctype, checksum=ck))
            sst.write_bytes(bytes(data))
            other = (int.from_bytes(r.user_key[:8], "big"), int.from_bytes(r.user_key[8:], "big"))
            return (1, 0), other
    raise AssertionError("no other location recompresses to the block's length")


def add_location_of_unknown_ledger(root: Path) -> int:
    (_locations(root, 1) / "000009.log").write_bytes(w.frame_log(
        [w.write_batch(63, [(V.VALUE, locations_key(9999, 0), location_value(0, 1028))])]))
    return 9999


# --- the pass's own findings -------------------------------------------------------------------------

@pytest.mark.parametrize("root", DB_BOOKIES, ids=lambda p: p.name)
def test_golden_db_bookies_are_clean(root: Path):
    assert _codes(root) == []


def test_problem_texts_format_with_finding_fields():
    db = [p for code, p in PROBLEMS.items() if code.startswith("DBINDEX_")]
    assert len(db) == 14
    for p in db:
        assert p.code.startswith("DBINDEX_") and p.pass_no in (2, 3, 5)
        assert p.text.format(path="/p", detail="d", ledger_name="7", entry=3, offset=9)
        assert p.repair is None                    # the databases are never written: BookKeeper rebuilds


def test_flipped_sst_byte(bookie: Path):
    sst = flip_data_block_byte(bookie)
    h = SstFile(str(sst), sst.read_bytes()).index_handles[0]
    found = _codes(bookie)
    (code, f), *rest = found
    assert code == "DBINDEX_BLOCK_CHECKSUM" and f["path"] == str(sst) and f["offset"] == h.offset
    assert "keys start .. " in f["detail"]
    # What the unreadable block held is unknown: its entries are listed as unindexed, not as lost.
    assert {c for c, _ in rest} == {"DBINDEX_ENTRY_UNINDEXED"} and len(rest) == 62
    # ... and never called garbage: their locations may be in the block that could not be read
    assert all(g["detail"].startswith("unknown whether garbage: the locations database is damaged (sst-checksum "
                                      f"in {sst}") for _c, g in rest), rest[0]


def test_deleted_sst(bookie: Path):
    delete_ledgers_sst(bookie)
    codes = [c for c, _ in _codes(bookie)]
    assert codes.count("DBINDEX_SST_MISSING") == 1
    assert codes.count("DBINDEX_LEDGER_UNKNOWN") == 3 and codes.count("DBINDEX_LEDGER_MISSING") == 3


def test_truncated_wal(bookie: Path):
    wal = tear_wal_of_deletions(bookie)
    found = _codes(bookie)
    torn = [f for c, f in found if c == "DBINDEX_WAL_TORN"]
    assert len(torn) == 1 and torn[0]["path"] == str(wal) and "bytes not replayed" in torn[0]["detail"]
    lost = [(f["ledger"], f["entry"]) for c, f in found if c == "DBINDEX_ENTRY_NOT_INDEXED"]
    assert lost == [(0, 0)]                        # the whole first batch was replayed; the torn one was not
    assert [c for c, _ in found if c not in ("DBINDEX_WAL_TORN", "DBINDEX_ENTRY_NOT_INDEXED")] == []


def test_locations_still_in_a_torn_wal_are_lost(bookie: Path):
    wal, lost = move_last_locations_to_a_torn_wal(bookie)
    found = _codes(bookie)
    assert [(c, f["path"]) for c, f in found if c == "DBINDEX_WAL_TORN"] == [("DBINDEX_WAL_TORN", str(wal))]
    gone = [f for c, f in found if c == "DBINDEX_ENTRY_NOT_INDEXED"]
    assert [(f["ledger"], f["entry"]) for f in gone] == [(1, e) for e in lost]
    assert str(wal) in gone[0]["detail"]


def test_the_writer_made_database_before_the_cut_is_clean(bookie: Path):
    wal, _lost = move_last_locations_to_a_torn_wal(bookie)
    db = wal.parent
    recs = list(SstFile(str(next(db.glob("*.sst"))), next(db.glob("*.sst")).read_bytes()).records())
    seq = max(r.sequence for r in recs)
    golden = list(SstFile("", (_locations(SRC, 1) / "000008.sst").read_bytes()).records())
    tail = [r for r in golden if r not in recs]
    shutil.rmtree(db)
    w.write_db(db, [(0, [r for r in golden if r not in tail])],
               wal=[w.write_batch(seq + 1 + i, [(V.VALUE, r.user_key, r.value)]) for i, r in enumerate(tail)])
    assert len(tail) == 3 and _codes(bookie) == []


def test_location_rewritten_to_another_entry(bookie: Path):
    point_location_elsewhere_via_wal(bookie)
    found = _codes(bookie)
    wrong = [f for c, f in found if c == "DBINDEX_LOCATION_WRONG"]
    assert [(f["ledger"], f["entry"]) for f in wrong] == [(1, 0)] and "found ledger 1 entry 2" in wrong[0]["detail"]
    unindexed = [f for c, f in found if c == "DBINDEX_ENTRY_UNINDEXED"]
    assert [(f["ledger"], f["entry"], f["detail"]) for f in unindexed] == [(1, 0, "collectable garbage")]


def test_location_rewritten_in_a_block_with_its_checksum_fixed(bookie: Path):
    key, other = point_location_elsewhere_in_block(bookie)
    assert read_ledger_dir(bookie / "ledgers1" / "current").problems == []     # the reader accepts the block
    wrong = [f for c, f in _codes(bookie) if c == "DBINDEX_LOCATION_WRONG"]
    assert [(f["ledger"], f["entry"]) for f in wrong] == [key]
    assert f"found ledger {other[0]} entry {other[1]}" in wrong[0]["detail"]


def test_location_of_a_ledger_the_ledgers_index_lacks(bookie: Path):
    lid = add_location_of_unknown_ledger(bookie)
    found = _codes(bookie)
    unknown = [f for c, f in found if c == "DBINDEX_LEDGER_UNKNOWN"]
    assert [f["ledger"] for f in unknown] == [lid]
    assert ("DBINDEX_LOCATION_WRONG", lid) in {(c, f.get("ledger")) for c, f in found}


def test_a_missing_manifest_is_one_unreadable_finding(bookie: Path):
    (bookie / "ledgers0" / "current" / "ledgers" / "CURRENT").unlink()
    found = _codes(bookie)
    unreadable = [f for c, f in found if c == "DBINDEX_UNREADABLE"]
    assert len(unreadable) == 1 and unreadable[0]["path"].endswith("ledgers/CURRENT")
    assert "DBINDEX_LEDGER_MISSING" not in {c for c, _ in found}     # unknown, not missing


# --- through the command line -------------------------------------------------------------------------

def _fsck(root: Path, *args: str, md: Path = SRC / "metadata"):
    r = CliRunner().invoke(fsck_command, [str(root), "--metadata-dir", str(md), "--no-progress", *args],
                           catch_exceptions=False)
    return r.exit_code, r.output


@pytest.mark.parametrize("root", DB_BOOKIES, ids=lambda p: p.name)
def test_golden_db_bookies_exit_0_with_every_pass_run(root: Path):
    md = root / "metadata" if (root / "metadata").is_dir() else GOLDEN / "cluster-3" / "metadata"
    code, out = _fsck(root, "--json", md=md)
    doc = json.loads(out)
    assert code == 0 == doc["summary"]["exit_code"] and doc["dirs"]["storage"] == "rocksdb"
    assert [(p["pass"], p["skipped"]) for p in doc["passes"]] == [(n, None) for n in range(1, 8)]
    assert [p["name"] for p in doc["passes"] if p["pass"] in (2, 3, 5)] == [
        "RocksDB index databases", "ledgers index", "locations to entry-log cross-check"]
    manifest = json.loads((root / "manifest.json").read_text())
    assert doc["stats"]["db_locations"] == len(manifest["entry_log_records"]) == doc["stats"]["entries"]
    assert not [f for f in doc["findings"] if f["code"].startswith("DBINDEX_")]


FAULTS = {   # damage, {code: its pass}, the BookKeeper command the plan names
    "flipped-sst-byte": (flip_data_block_byte, {"DBINDEX_BLOCK_CHECKSUM": 2}, "rebuild-db-ledger-locations-index"),
    "deleted-sst": (delete_ledgers_sst, {"DBINDEX_SST_MISSING": 2, "DBINDEX_LEDGER_MISSING": 3},
                    "rebuild-db-ledgers-index"),
    "torn-wal": (move_last_locations_to_a_torn_wal, {"DBINDEX_WAL_TORN": 2, "DBINDEX_ENTRY_NOT_INDEXED": 5},
                 "rebuild-db-ledger-locations-index"),
    "location-via-wal": (point_location_elsewhere_via_wal, {"DBINDEX_LOCATION_WRONG": 5},
                         "rebuild-db-ledger-locations-index"),
    "location-in-block": (point_location_elsewhere_in_block, {"DBINDEX_LOCATION_WRONG": 5},
                          "rebuild-db-ledger-locations-index"),
    "unknown-ledger": (add_location_of_unknown_ledger, {"DBINDEX_LEDGER_UNKNOWN": 3}, "rebuild-db-ledgers-index"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_through_the_cli_exit_4_no_byte_changed(bookie: Path, fault: str):
    damage, codes, command = FAULTS[fault]
    damage(bookie)
    before = _tree_digest(bookie)
    exit_code, out = _fsck(bookie, "--json")
    doc = json.loads(out)
    assert exit_code == 4 == doc["summary"]["exit_code"]
    assert all(p["skipped"] is None for p in doc["passes"])
    for code, pass_no in codes.items():
        hits = [f for f in doc["findings"] if f["code"] == code]
        assert hits and {f["pass"] for f in hits} == {pass_no}, code
    errors = {f["pass"] for f in doc["findings"] if f["severity"] == "error"}
    assert errors and errors <= {2, 3, 5}
    assert all(p["counts"].get("error", 0) > 0 for p in doc["passes"] if p["pass"] in errors)
    exit_code, text = _fsck(bookie)
    assert exit_code == 4 and all(code in text for code in codes)
    # The repair plan refuses to touch the databases and names BookKeeper's command.
    exit_code, plan = _fsck(bookie, "--repair", "--dry-run")
    assert exit_code == 4
    line = next(x for x in plan.splitlines() if x.strip().startswith("bookkeeper-rebuild:") and command in x)
    assert "bin/bookkeeper shell" in line and "bookie stopped" in line and "[cannot: bkdisk never writes" in line
    assert _tree_digest(bookie) == before



@pytest.mark.parametrize("db", ["ledgers", "locations"])
@pytest.mark.parametrize("how", ["folder", "emptied"])
def test_a_database_gone_is_read_as_the_empty_one_bookkeeper_makes_at_its_next_start(bookie: Path, db, how):
    """BookKeeper opens its databases with create_if_missing: with its folder gone or emptied its next start
    makes an empty one (a folder that still holds a MANIFEST is unknown, not gone: a CURRENT can name it).
    The other database of the dir is still read, and what the empty one costs is named: the ledgers it no
    longer knows, or the entries no location finds any more (reads of them fail)."""
    gone = bookie / "ledgers1" / "current" / db
    shutil.rmtree(gone)
    if how == "emptied":
        gone.mkdir()
    got = _codes(bookie)
    [unread] = [f for code, f in got if code.name == "DBINDEX_UNREADABLE"]
    assert unread["path"] == str(gone / "CURRENT") and "next start makes an empty one here" in unread["detail"]
    counts: dict[str, set] = {}
    for code, f in got:
        counts.setdefault(code.name, set()).add((f.get("ledger"), f.get("entry")))
    if db == "ledgers":
        assert {x for x, _e in counts["DBINDEX_LEDGER_UNKNOWN"]} == {1, 255}
        assert {x for x, _e in counts["DBINDEX_LEDGER_MISSING"]} == {1, 255}
        assert "DBINDEX_ENTRY_NOT_INDEXED" not in counts and "DBINDEX_ENTRY_UNINDEXED" not in counts
    else:
        assert counts["DBINDEX_ENTRY_NOT_INDEXED"] == {(1, e) for e in range(21)} | {(255, e) for e in range(41)}
        assert "DBINDEX_ENTRY_UNINDEXED" not in counts and "DBINDEX_LEDGER_UNKNOWN" not in counts
    # (the other dir's locations are read as before)
    assert read_ledger_dir(bookie / "ledgers0" / "current").count > 0
