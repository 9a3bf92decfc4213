"""DbLedgerStorage ``locations`` reads: point lookups per second and a full iteration, against reading
the same SST bytes raw.

    python -m bench.rocksdb_bench [--dir /tmp/rocksbench] [--entries 1000000] [--lookups 20000] [--keep]

How the input is made (honestly): no RocksDB binding is available, so the database is written by
bkdisk's test writer (rocksdbfiles/writer.py): one level-1 SST of ``--entries`` locations keys
(ledger = i // 10000, entry = i % 10000; value = entry log i % 8, offset 1028 + 64 * i), LZ4, 64 KiB
blocks, kxxHash, format_version 2, restart interval 16 — the options of the golden ``locations``
databases — plus CURRENT, a MANIFEST and an empty WAL. tests/test_rocksdb_reader.py proves its data
blocks byte-identical to RocksDB 8.3.2's on the golden tables; its index block uses the last key of
each block as separator (RocksDB shortens it) and it writes no bloom filter.

Rows: ``raw read`` reads the SST file's bytes; ``raw blocks`` also verifies and decompresses every
block (the floor for any reader); ``full iteration`` is Database.items() (merge of WAL memtable and
tables, every key decoded in Python); ``jitted`` is read_location_columns (open, decode every block
with the numba kernel, merge by sequence with numpy, split into columns; includes the first call's
cache load); ``lookups`` are Database.get of random present keys.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from contextlib import ExitStack

from diskio.mapped import read_bytes
from formats import rocksdb as rf
from formats.dbledger import location_value, locations_key
from rocksdbfiles import writer as w
from rocksdbfiles.block import read_block
from rocksdbfiles.db import open_db
from rocksdbfiles.dbindex import read_location_columns
from rocksdbfiles.sst import Record, SstFile


def build(path: str, n: int) -> str:
    records = [Record(locations_key(i // 10000, i % 10000), 1 + i, rf.ValueType.VALUE,
                      location_value(i % 8, 1028 + 64 * i)) for i in range(n)]
    w.write_db(path, [(1, records)], w.TableOptions())
    return os.path.join(path, "000010.sst")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/rocksbench")
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=20_000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    shutil.rmtree(a.dir, ignore_errors=True)
    t0 = time.perf_counter()
    sst = build(a.dir, a.entries)
    size = os.path.getsize(sst)
    print(f"built {a.entries} entries, SST {size / (1 << 20):.1f} MiB in {time.perf_counter() - t0:.1f} s")
    rows = []
    t0 = time.perf_counter()
    data = read_bytes(sst)
    rows.append(("raw read", time.perf_counter() - t0, a.entries))
    t0 = time.perf_counter()
    t = SstFile(sst, data)
    for h in t.index_handles:
        read_block(data, h, t.footer.checksum_type, path=sst)
    rows.append((f"raw blocks ({len(t.index_handles)} verified + decompressed)", time.perf_counter() - t0, a.entries))
    with ExitStack() as st:
        db = open_db(a.dir, st)
        t0 = time.perf_counter()
        count = sum(1 for _ in db.items())
        rows.append(("full iteration (Python twin, items())", time.perf_counter() - t0, count))
        assert count == a.entries and db.problems == []
        t0 = time.perf_counter()
        cols, problems = read_location_columns(a.dir, st)
        rows.append(("full iteration (jitted, location columns)", time.perf_counter() - t0, len(cols["ledger"])))
        assert len(cols["ledger"]) == a.entries and problems == []
        rng = random.Random(7)
        keys = [rng.randrange(a.entries) for _ in range(a.lookups)]
        t0 = time.perf_counter()
        for i in keys:
            if db.get(locations_key(i // 10000, i % 10000)) is None:
                raise SystemExit(f"key {i} not found")
        rows.append(("lookups (random present keys)", time.perf_counter() - t0, a.lookups))
    print(f"{'what':44s} {'seconds':>9s} {'items/s':>12s}")
    for name, sec, items in rows:
        print(f"{name:44s} {sec:9.3f} {items / sec:12,.0f}")
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
