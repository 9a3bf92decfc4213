"""Every DbLedgerStorage bookie of the golden corpora, read through our RocksDB reader, against what
BookKeeper's own scanner and the bookie's calls recorded in the manifests."""
from __future__ import annotations

import json
import re
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import GOLDEN

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import ENTRY_SIZE_FIELD
from bkdisk.formats.journal import LAC_BODY
from bkdisk.rocksdbfiles.db import open_db
from bkdisk.rocksdbfiles.dbindex import read_ledger_dir
from bkdisk.rocksdbfiles.manifest import read_current, read_manifest
from bkdisk.rocksdbfiles.sst import SstFile


def _db_bookies() -> list[Path]:
    out = []
    for m in sorted(GOLDEN.rglob("manifest.json")):
        data = json.loads(m.read_text())
        if data.get("storage_class", "").endswith("ldb.DbLedgerStorage"):
            out.append(m.parent)
    return out


BOOKIES = _db_bookies()


def test_the_corpora_hold_the_db_bookies_the_readme_names():
    names = {str(b.relative_to(GOLDEN)) for b in BOOKIES}
    assert names == {"dbstorage-v6-bookieid", "cluster-3/bookies/bk-3.rack-b"}


def _manifest(bookie: Path) -> dict:
    return json.loads((bookie / "manifest.json").read_text())


@pytest.mark.parametrize("bookie", BOOKIES, ids=lambda b: b.name)
def test_locations_list_exactly_the_scanned_entries_at_their_data_offsets(bookie: Path):
    m = _manifest(bookie)
    expected = {(r["ledger_dir"], int(r["ledger_id"]), r["entry_id"]):
                (int(r["entry_log_file"].removesuffix(".log"), 16), r["offset"] + ENTRY_SIZE_FIELD)
                for r in m["entry_log_records"]}
    assert len(expected) == len(m["entries"]) > 100
    found = {}
    for d in m["ledger_dirs"]:
        idx = read_ledger_dir(bookie / d / "current")
        assert idx.problems == []
        keys = [(loc.ledger_id, loc.entry_id) for loc in idx.locations]
        assert keys == sorted(keys)
        for loc in idx.locations:
            found[(d, loc.ledger_id, loc.entry_id)] = (loc.log_id, loc.offset)
    assert found == expected


@pytest.mark.parametrize("bookie", BOOKIES, ids=lambda b: b.name)
def test_ledgers_index_gives_fenced_master_key_and_explicit_lac(bookie: Path):
    m = _manifest(bookie)
    seen = {}
    for d in m["ledger_dirs"]:
        for lid, info in read_ledger_dir(bookie / d / "current").ledgers.items():
            assert lid not in seen
            seen[lid] = (d, info)
    assert set(seen) == {int(x["ledger_id"]) for x in m["ledgers"]}
    for want in m["ledgers"]:
        d, info = seen[int(want["ledger_id"])]
        assert d == want.get("ledger_dir", d)
        assert info.exists is True
        assert info.fenced is want["fenced"]
        assert info.master_key.hex() == want["master_key_hex"]
        assert info.explicit_lac == want["explicit_lac"]
        if want["explicit_lac"] is not None:
            assert LAC_BODY.parse(info.explicit_lac_body).ledger_id == int(want["ledger_id"])


def _option(db: Path, name: str) -> str:
    text = max(db.glob("OPTIONS-*")).read_text()
    return re.search(rf"^\s*{name}=(.*)$", text, re.M).group(1).strip()


_COMPRESSION_NAMES = {"kLZ4Compression": "LZ4", "kSnappyCompression": "Snappy", "kNoCompression": "NoCompression"}


@pytest.mark.parametrize("db", [d for b in BOOKIES for d in sorted(b.glob("ledgers*/current/*"))
                                if (d / "CURRENT").is_file()],
                         ids=lambda d: f"{d.parents[2].name}-{d.parent.parent.name}-{d.name}")
def test_every_table_matches_its_options_file_and_verifies(db: Path):
    v = read_manifest(db)
    assert read_current(db) == Path(v.manifest).name
    assert v.comparator == "leveldb.BytewiseComparator" == _option(db, "comparator")
    assert v.files and v.tail is None
    for f in v.files.values():
        data = (db / f.name).read_bytes()
        assert len(data) == f.size
        t = SstFile(str(db / f.name), data)
        assert t.footer.checksum_type == rf.ChecksumType[{"kxxHash": "XXHASH", "kCRC32c": "CRC32C"}[
            _option(db, "checksum")]]
        assert t.format_version == int(_option(db, "format_version"))
        assert t.compression == _COMPRESSION_NAMES[_option(db, "compression")]
        records = list(t.records())
        assert len(records) == t.num_entries() > 0
        assert [r.user_key for r in records] == sorted(r.user_key for r in records)
        assert min(r.sequence for r in records) == f.smallest_seq and max(r.sequence for r in records) == f.largest_seq
        assert records[0].user_key == f.smallest[:-8] and records[-1].user_key == f.largest[:-8]
        for r in records:
            assert t.get(r.user_key) == r
        assert t.get(b"\xff" * 20) is None
    with ExitStack() as st:
        opened = open_db(db, st)
        assert opened.verify() == []
        assert [w.number for w in opened.wals] == [9] and opened.memtable == {}


def test_ledger_data_is_declared_as_bookkeeper_declares_it(tmp_path: Path):
    from google.protobuf.descriptor import FieldDescriptor as F

    from bkdisk.formats.proto.dbledger_storage_pb2 import LedgerData
    from bkdisk.formats.proto.regenerate import PROTO_DIR, regenerate
    fields = {f.number: (f.name, f.type, f.is_required, f.is_repeated) for f in LedgerData.DESCRIPTOR.fields}
    assert fields == {1: ("exists", F.TYPE_BOOL, True, False), 2: ("fenced", F.TYPE_BOOL, True, False),
                      3: ("masterKey", F.TYPE_BYTES, True, False), 4: ("explicitLac", F.TYPE_BYTES, False, False),
                      5: ("limbo", F.TYPE_BOOL, False, False)}
    fresh = regenerate(tmp_path, "dbledger_storage.proto")
    assert fresh.read_bytes() == (PROTO_DIR / "dbledger_storage_pb2.py").read_bytes()
