"""Faults on copies of golden DbLedgerStorage databases, seen by the reader as data (a list of problems
that fsck turns into findings): a flipped byte in an SST data block, a deleted SST, a torn WAL, a location
rewritten through the WAL, a location of a ledger the ledgers index lacks. The golden files never change."""
from __future__ import annotations

import hashlib
import shutil
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import GOLDEN

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import location_value, locations_key
from bkdisk.rocksdbfiles import writer as w
from bkdisk.rocksdbfiles.db import open_db
from bkdisk.rocksdbfiles.dbindex import ledgers_without_metadata, read_ledger_dir
from bkdisk.rocksdbfiles.sst import SstFile

SRC = GOLDEN / "dbstorage-v6-bookieid" / "ledgers1"
V = rf.ValueType


def _digest(d: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file())).hexdigest()


@pytest.fixture()
def ledger_dir(tmp_path: Path):
    before = _digest(SRC)
    dst = tmp_path / "ledgers1"
    shutil.copytree(SRC, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    dst.chmod(0o755)
    yield dst
    assert _digest(SRC) == before


def _locations(d: Path) -> Path:
    return d / "current" / "locations"


def test_the_untouched_copy_has_no_problems(ledger_dir: Path):
    idx = read_ledger_dir(ledger_dir / "current")
    assert idx.problems == [] and len(idx.locations) == 62 and ledgers_without_metadata(idx) == {}


def test_a_flipped_byte_in_a_data_block_is_a_checksum_problem_naming_file_block_and_keys(ledger_dir: Path):
    sst = _locations(ledger_dir) / "000008.sst"
    data = bytearray(sst.read_bytes())
    h = SstFile(str(sst), bytes(data)).index_handles[0]
    data[h.offset + h.size // 2] ^= 0x10
    sst.write_bytes(bytes(data))
    before = _digest(ledger_dir)
    idx = read_ledger_dir(ledger_dir / "current")
    (p,) = idx.problems
    assert p.kind == "sst-checksum" and p.path == str(sst) and p.offset == h.offset
    assert p.key_range == (None, SstFile(str(sst), bytes(data)).index_keys[0])   # up to the index separator
    assert "block checksum" in p.detail and f"offset {h.offset}" in p.detail
    assert idx.locations == []                      # the one data block held every location of this dir
    assert _digest(ledger_dir) == before            # reading changed no byte


def test_a_deleted_sst_is_a_manifest_naming_a_missing_file(ledger_dir: Path):
    (_locations(ledger_dir) / "000008.sst").unlink()
    with ExitStack() as st:
        db = open_db(_locations(ledger_dir), st)
        (p,) = db.problems
        assert p.kind == "sst-missing" and p.path.endswith("MANIFEST-000010") and "000008.sst" in p.detail
        assert p.key_range[0] == locations_key(1, 0) and list(db.items()) == []


def test_a_truncated_wal_reports_the_torn_tail_and_what_is_lost(ledger_dir: Path):
    wal = _locations(ledger_dir) / "000009.log"
    puts = [w.write_batch(63 + i, [(V.VALUE, locations_key(255, 100 + i), location_value(1, 4 + i))]) for i in range(4)]
    data = w.frame_log(puts)
    wal.write_bytes(data[:-3])
    idx = read_ledger_dir(ledger_dir / "current")
    (p,) = idx.problems
    assert p.kind == "wal-torn-tail" and p.path == str(wal)
    assert p.lost_bytes == len(puts[3]) + rf.LOG_HEADER_SIZE - 3 == len(data) - 3 - p.offset
    keys = {(loc.ledger_id, loc.entry_id) for loc in idx.locations}
    assert {(255, 100), (255, 101), (255, 102)} <= keys and (255, 103) not in keys


def test_a_location_rewritten_through_the_wal_is_accepted_by_the_reader(ledger_dir: Path):
    # The reader must serve the rewritten location (only a cross-check with the entry logs catches it).
    orig = {(x.ledger_id, x.entry_id): x for x in read_ledger_dir(ledger_dir / "current").locations}
    other = orig[(1, 1)]
    wal = _locations(ledger_dir) / "000009.log"
    wal.write_bytes(w.frame_log([w.write_batch(63, [(V.VALUE, locations_key(1, 0),
                                                      location_value(other.log_id, other.offset))])]))
    idx = read_ledger_dir(ledger_dir / "current")
    got = {(x.ledger_id, x.entry_id): x for x in idx.locations}
    assert idx.problems == [] and got[(1, 0)].packed == other.packed != orig[(1, 0)].packed


def test_locations_of_a_ledger_the_ledgers_index_lacks(ledger_dir: Path):
    wal = _locations(ledger_dir) / "000009.log"
    wal.write_bytes(w.frame_log([w.write_batch(63, [(V.VALUE, locations_key(7777, e), location_value(0, 2000 + e))
                                                     for e in range(3)])]))
    idx = read_ledger_dir(ledger_dir / "current")
    assert idx.problems == [] and ledgers_without_metadata(idx) == {7777: 3}


@pytest.mark.parametrize("cut", [7, 42, 53])
def test_a_manifest_cut_before_it_records_the_databases_numbers_is_refused_as_rocksdb_refuses_it(tmp_path, cut):
    """RocksDB's recovery refuses a MANIFEST without the next file number, the log number and the
    last sequence ("no meta-nextfile entry in descriptor"); read as empty, the database would say
    every location is absent. (Cut between whole edits after those, at 66 bytes here, the MANIFEST is
    an empty database's as RocksDB reads it too.)"""
    from bkdisk.formats.errors import FormatError
    from bkdisk.rocksdbfiles.manifest import read_current, read_manifest
    db = tmp_path / "locations"
    shutil.copytree(GOLDEN / "dbstorage-v6-bookieid" / "ledgers0" / "current" / "locations", db)
    manifest = db / read_current(db)
    assert read_manifest(db).files                  # whole: the database's files
    manifest.write_bytes(manifest.read_bytes()[:cut])
    with pytest.raises(FormatError) as e:
        read_manifest(db)
    assert e.value.path == str(manifest) and "missing from its" in str(e.value), e.value
