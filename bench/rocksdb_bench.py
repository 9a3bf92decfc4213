"""DbLedgerStorage ``locations`` reads: point lookups per second and a full iteration, against reading
the same SST bytes raw.

    python -m bench.rocksdb_bench [--dir /tmp/rocksbench] [--entries 1000000] [--lookups 20000] [--keep]
                                  [--fsck-entries 100000]   (0: no fsck comparison)

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

fsck comparison (``--fsck-entries``): bookie/writer.py writes an Interleaved bookie (one journal dir, one
ledger dir, ledgers of 1000 entries of 64-byte payloads, CRC32C, some fenced and some with an explicit LAC);
its DbLedgerStorage twin is a copy whose ``.idx`` hierarchy is replaced by ``current/locations`` (every
entry's location, the same packed value the ``.idx`` slot holds) and ``current/ledgers`` (LedgerData from
the same master key, fenced state and explicit-LAC body) written by rocksdbfiles/writer.py. Both hold the
same entry logs and journals byte for byte; each is checked once to warm the page cache and numba, then
timed (best of ``--repeat``), digests verified, 1 job.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from contextlib import ExitStack

from bkdisk.diskio.mapped import read_bytes
from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import location_value, locations_key
from bkdisk.rocksdbfiles import writer as w
from bkdisk.rocksdbfiles.block import read_block
from bkdisk.rocksdbfiles.db import open_db
from bkdisk.rocksdbfiles.dbindex import read_location_columns
from bkdisk.rocksdbfiles.sst import Record, SstFile


def build(path: str, n: int) -> str:
    records = [Record(locations_key(i // 10000, i % 10000), 1 + i, rf.ValueType.VALUE,
                      location_value(i % 8, 1028 + 64 * i)) for i in range(n)]
    w.write_db(path, [(1, records)], w.TableOptions())
    return os.path.join(path, "000010.sst")


def db_twin(written, dst: str) -> str:
    """A copy of an Interleaved bookie written by bookie/writer.py with its index in RocksDB instead of .idx
    files, as DbLedgerStorage keeps it; returns the copy's root."""
    from bkdisk.bookie.writer import lac_body
    from bkdisk.formats.dbledger import LEDGERS_KEY, LedgerInfo, ledger_value
    from bkdisk.formats.digests import master_key
    from bkdisk.formats.paths import CURRENT_DIR
    shutil.copytree(written.root, dst)
    (ld,) = written.spec.ledger_dirs
    current = os.path.join(dst, ld, CURRENT_DIR)
    for p in written.index_files.values():
        top = os.path.relpath(p, os.path.join(written.root, ld, CURRENT_DIR)).split(os.sep)[0]
        shutil.rmtree(os.path.join(current, top), ignore_errors=True)
    locs = sorted((lid.ledger, eid, loc) for (lid, eid), loc in written.locations.items())
    w.write_db(os.path.join(current, "locations"),
               [(1, [Record(locations_key(l, e), 1 + i, rf.ValueType.VALUE, location_value(loc >> 32, loc & 0xFFFFFFFF))
                     for i, (l, e, loc) in enumerate(locs)])])
    ledgers = sorted(written.spec.ledgers, key=lambda l: l.ledger_id)
    w.write_db(os.path.join(current, "ledgers"),
               [(1, [Record(LEDGERS_KEY.build(l.ledger_id), 1 + i, rf.ValueType.VALUE,
                            ledger_value(LedgerInfo(l.ledger_id, True, l.fenced, master_key(l.password),
                                                    lac_body(l) if l.explicit_lac is not None else None, None)))
                     for i, l in enumerate(ledgers)])], w.TableOptions(compression=rf.Compression.SNAPPY))
    return dst


def fsck_comparison(base: str, entries: int, repeat: int) -> list[tuple[str, float, int]]:
    """fsck wall time of an Interleaved bookie and of its DbLedgerStorage twin (the same entries)."""
    from bkdisk.bookie.layout import discover
    from bkdisk.bookie.model import BookieSpec, LedgerSpec
    from bkdisk.bookie.writer import write_bookie
    from bkdisk.fsck.api import check_bookie
    n = max(1, entries // 1000)
    spec = BookieSpec([LedgerSpec(1 + i, [bytes([i % 251]) * 64] * (entries // n), password=b"pw",
                                  fenced=i % 3 == 0, explicit_lac=(entries // n - 2) if i % 5 == 0 else None)
                       for i in range(n)], entry_log_size_limit=8 << 20, journal_max_size=64 << 20,
                      journal_prealloc_size=4 << 20)
    t0 = time.perf_counter()
    written = write_bookie(spec, os.path.join(base, "interleaved"))
    twin = db_twin(written, os.path.join(base, "dbstorage"))
    print(f"wrote {len(written.locations)} entries in {len(written.entry_log_files)} entry logs "
          f"({written.bytes_written / (1 << 20):.1f} MiB) and the DbLedgerStorage twin "
          f"in {time.perf_counter() - t0:.1f} s")
    rows = []
    for label, root in (("fsck Interleaved (.idx)", written.root), ("fsck DbLedgerStorage (RocksDB)", twin)):
        dirs = discover(root)
        rep = check_bookie(dirs)                  # warm: page cache, numba
        assert rep.exit_code == 0 and all(p.skipped is None for p in rep.passes[:6]), [f.line() for f in rep.errors]
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            check_bookie(dirs)
            best = min(best, time.perf_counter() - t0)
        rows.append((f"{label} [{dirs.storage_kind}]", best, rep.stats["entries"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/rocksbench")
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=20_000)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fsck-entries", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2)
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
    if a.fsck_entries:
        rows += fsck_comparison(os.path.join(a.dir, "fsck"), a.fsck_entries, a.repeat)
    print(f"{'what':44s} {'seconds':>9s} {'items/s':>12s}")
    for name, sec, items in rows:
        print(f"{name:44s} {sec:9.3f} {items / sec:12,.0f}")
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
