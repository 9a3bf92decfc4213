"""`bkdisk dump locations` of databases RocksDB itself wrote (Debian's rocksdb-tools, RocksDB 7.8's ``ldb``)
equals ``ldb scan --hex``: format_version 2-5, LZ4, Snappy and ZSTD, every checksum type, a ledger
deleted by range as BookKeeper >= 4.16 deletes ledgers, tables on several levels after ``ldb compact``,
writes left in the WAL. The tools are required: without them these tests fail, naming the package."""
from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GOLDEN

from bench import rocksdb_tools as rt
from bkdisk.dump.command import dump
from bkdisk.formats import dbledger as fd
from bkdisk.rocksdbfiles.db import open_db

CASES = [(2, "lz4", "xxhash"), (3, "snappy", "crc32c"), (4, "zstd", "xxhash64"), (5, "lz4", "xxh3"),
         (5, "zstd", "xxh3"), (5, "snappy", "none")]


def _rows(ledgers: range, entries: int, log: int) -> bytes:
    lid, eid = np.repeat(np.array(ledgers), entries), np.tile(np.arange(entries), len(ledgers))
    keys = np.empty((len(lid), 2), fd.KEY_COLUMNS["ledger_id"])
    keys[:, 0], keys[:, 1] = lid, eid
    values = np.empty(len(lid), fd.VALUE_COLUMN)
    values[:] = (log << 32) | (1028 + 64 * eid + lid)
    return rt.hex_lines(keys.view(np.uint8).reshape(-1, 16), values.view(np.uint8).reshape(-1, 8))


def _hex(lid: int, eid: int) -> str:
    return "0x" + fd.locations_key(lid, eid).hex()


def build(db: Path, format_version: int, compression: str, checksum: str) -> None:
    """A ``locations`` database as a bookie's life leaves it: written, compacted, overwritten, a ledger
    deleted by range, and the last writes still in the WAL."""
    rt.create(db, format_version=format_version, compression=compression, checksum=checksum, block_size=4096)
    rt.load(db, [_rows(range(1, 41), 100, 1)])
    rt.ldb(db, "compact")                                         # to level 1
    keep = "--auto_compaction=false"    # every open flushes the WAL to level 0: keep those tables apart
    rt.load(db, [_rows(range(30, 61), 50, 2)], keep)             # newer versions, flushed to level 0
    rt.ldb(db, keep, "--hex", "deleterange", _hex(10, 0), _hex(11, 0))   # ledger 10, as EntryLocationIndex does
    rt.ldb(db, keep, "--hex", "deleterange", _hex(35, 20), _hex(36, 0))
    rt.ldb(db, keep, "--hex", "put", _hex(10, 5), "0x" + fd.location_value(3, 77).hex())
    rt.ldb(db, keep, "--hex", "delete", _hex(2, 0))
    rt.ldb(db, keep, "--hex", "batchput", _hex(70, 0), "0x" + fd.location_value(3, 1028).hex(),
           _hex(1, 3), "0x" + fd.location_value(3, 99).hex())


def _dump_json(db: Path) -> list[tuple[bytes, bytes]]:
    res = CliRunner().invoke(dump, ["locations", str(db), "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    return [(fd.locations_key(r["ledger"], r["entry"]), fd.location_value(r["log"], r["pos"])) for r in rows]


def _shell_text(rows: list[tuple[bytes, bytes]]) -> str:
    out, last = [], None
    for k, v in rows:
        loc = fd.parse_location(k, v)
        if loc.ledger_id != last:
            out.append(f"===== LEDGER: {loc.ledger_id} =====\n")
            last = loc.ledger_id
        out.append(f"entry {loc.entry_id}\t:\t(log: {loc.log_id}, pos: {loc.offset})\n")
    return "".join(out)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[tuple, Path]:
    out = {}
    for case in CASES:
        db = tmp_path_factory.mktemp("fv{}-{}-{}".format(*case)) / "locations"
        build(db, *case)
        out[case] = db
    return out


@pytest.mark.parametrize("case", CASES, ids=["fv{}-{}-{}".format(*c) for c in CASES])
def test_dump_locations_equals_ldb_scan(written, case):
    db = written[case]
    want = rt.scan(db)
    assert _dump_json(db) == want
    res = CliRunner().invoke(dump, ["locations", str(db)])
    assert res.exit_code == 0 and res.stdout == _shell_text(want)
    deleted = fd.locations_key(10, 0)[:8]
    assert [k for k, _v in want if k[:8] == deleted] == [fd.locations_key(10, 5)]      # written after the range
    # 40 x 100 written, 20 new ledgers x 50, ledger 10 (100) and 80 of ledger 35 deleted by range, one
    # entry put back, one deleted, one new ledger's entry
    assert len(want) == 4000 + 20 * 50 - 100 - 80 + 1 - 1 + 1


@pytest.mark.parametrize("case", CASES, ids=["fv{}-{}-{}".format(*c) for c in CASES])
def test_the_databases_hold_what_the_test_means_to_read(written, case):
    # The options took (through the OPTIONS file), and the database spans levels, tombstones and the WAL.
    fv, compression, checksum = case
    with ExitStack() as stack:
        db = open_db(written[case], stack)
        assert {t.format_version for _l, _n, t in db.tables} == {fv}
        assert {t.footer.checksum_type for _l, _n, t in db.tables} == {list(rt.CHECKSUMS).index(checksum)}
        assert {t.compression.lower() for _l, _n, t in db.tables} == {compression}
        assert {lv for lv, _n, _t in db.tables} >= {0, 1} and len(db.tables) >= 3
        assert len(db.range_tombstones) == 2 and db.problems == []
        assert sum(len(w.batches) for w in db.wals) >= 1 and len(db.memtable) >= 2
        assert max(len(t.index_handles) for _l, _n, t in db.tables) > 10


@pytest.mark.parametrize("db", ["dbstorage-v6-bookieid/ledgers0/current/locations",
                                "dbstorage-v6-bookieid/ledgers1/current/locations",
                                "cluster-3/bookies/bk-3.rack-b/ledgers/current/locations"])
def test_the_golden_databases_read_as_ldb_reads_them(tmp_path, db):
    # RocksDB 7.8 opens the 8.3-written databases only ignoring the options it does not know.
    copy = tmp_path / "locations"
    shutil.copytree(GOLDEN / db, copy)
    for p in copy.iterdir():
        p.chmod(0o644)
    want = rt.scan(copy, "--ignore_unknown_options")
    assert _dump_json(copy) == want and len(want) > 40
