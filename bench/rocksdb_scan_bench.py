"""A DbLedgerStorage ``locations`` database written by RocksDB itself, read in full: `bkdisk dump locations`
(text and JSON Lines) and fsck's read of it, against RocksDB's own ``sst_dump --command=scan`` and
``ldb scan`` and a raw read of the same SST bytes, each a whole process, in the same run.

    python -m bench.rocksdb_scan_bench [--dir /tmp/rocksdb-scan] [--entries 20000000] [--runs 3]
                                       [--format-versions 2,5] [--ledgers 500000,1000000,2000000]
                                       [--keep] [--checkout DIR]

The database (one per format_version) is written by Debian's rocksdb-tools (RocksDB 7.8): ``ldb load``
of ``--entries`` keys shaped as DbLedgerStorage's (16-byte big-endian ledger id and entry id, 1000
entries a ledger, to an 8-byte location (entry log << 32 | offset), 50,000 entries an entry log), LZ4,
64 KiB blocks and xxHash set through the database's OPTIONS file (bench/rocksdb_tools.py); RocksDB
flushes and compacts it as it loads (level 0 and level 1 tables). ``ldb scan`` reads a copy (every open
may rewrite the MANIFEST and OPTIONS). Each row: median wall and CPU seconds of ``--runs`` runs, entries
per second of each, peak RSS (ru_maxrss); the bkdisk rows also peak anonymous and file-backed RSS
(sampled from /proc). ``--checkout DIR`` runs bkdisk from another source tree too (one run: a baseline).
Then `bookie-fsck ROOT -q` of a small DbLedgerStorage bookie whose ledgers index ldb rewrote with
``--ledgers`` ledgers each (time per ledger, peak RSS).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

import numpy as np

from bench import rocksdb_tools as rt
from bench.commands_bench import command, rss_split, timed
from bkdisk.formats import dbledger as fd

PER_LEDGER, PER_LOG = 1000, 50_000
READ_PATH = ("import sys; from contextlib import ExitStack\n"
             "from bkdisk.rocksdbfiles.dbindex import iter_location_columns\n"
             "n, problems = 0, []\n"
             "with ExitStack() as stack:\n"
             "    for c in iter_location_columns(sys.argv[1], stack, problems):\n"
             "        n += len(c['ledger'])\n"
             "assert n == int(sys.argv[2]) and not problems, (n, problems)\n")


def key_chunks(n: int, chunk: int = 1 << 20):
    """``ldb load --hex`` lines of the ``n`` keys, a chunk at a time."""
    for s in range(0, n, chunk):
        i = np.arange(s, min(n, s + chunk), dtype=np.int64)
        keys = np.empty((len(i), 2), fd.KEY_COLUMNS["ledger_id"])
        keys[:, 0], keys[:, 1] = i // PER_LEDGER, i % PER_LEDGER
        values = np.empty(len(i), fd.VALUE_COLUMN)
        values[:] = ((i // PER_LOG) << 32) | (1028 + (i % PER_LOG) * 600)
        yield rt.hex_lines(keys.view(np.uint8).reshape(-1, 16), values.view(np.uint8).reshape(-1, 8))


def build(db: str, n: int, format_version: int) -> float:
    t0 = time.perf_counter()
    shutil.rmtree(db, ignore_errors=True)
    os.makedirs(os.path.dirname(db), exist_ok=True)
    rt.create(db, format_version=format_version, compression="lz4", checksum="xxhash", block_size=65536)
    rt.load(db, key_chunks(n), "--disable_wal")
    return time.perf_counter() - t0


def ledger_chunks(n: int, chunk: int = 1 << 20):
    """``ldb load --hex`` lines of ledgers 1..n, each a LedgerData (exists, not fenced, a 20-byte master key)."""
    head = np.frombuffer(fd.ledger_value(fd.LedgerInfo(0, True, False, bytes(20), None, None))[:-20], np.uint8)
    for s in range(0, n, chunk):
        i = np.arange(s, min(n, s + chunk), dtype=np.int64)
        keys = np.empty(len(i), fd.LEDGERS_KEY_COLUMN)
        keys[:] = i + 1
        values = np.empty((len(i), len(head) + 20), np.uint8)
        values[:, :len(head)] = head
        values[:, len(head):] = (i[:, None] * 7 + np.arange(20)) % 251
        yield rt.hex_lines(keys.view(np.uint8).reshape(-1, 8), values)


def many_ledgers(base: str, counts: list[int], runs: int) -> None:
    """`bookie-fsck ROOT -q` of a small DbLedgerStorage bookie whose ledgers index holds ``counts`` ledgers
    (written by ldb: format_version 5, Snappy, 4 KiB blocks, as BookKeeper's ledgers database)."""
    from bkdisk.bookie.model import BookieSpec, LedgerSpec
    from bkdisk.bookie.writer import write_bookie
    root = os.path.join(base, "ledgers-bookie")
    shutil.rmtree(root, ignore_errors=True)
    spec = BookieSpec([LedgerSpec(i, [b"x" * 100] * 50, password=b"pw") for i in range(1, 9)], storage="rocksdb")
    write_bookie(spec, root)
    ledgers = os.path.join(root, spec.ledger_dirs[0], "current", "ledgers")
    fsck, env = command("bookie-fsck", [root, "-q"])
    print(f"{'ledgers in the ledgers index':32s} {'wall s':>7s} {'CPU s':>6s} {'CPU us/ledger':>14s} {'peak RSS':>9s}")
    for n in counts:
        shutil.rmtree(ledgers)
        rt.create(ledgers, format_version=5, compression="snappy", checksum="xxhash", block_size=4096)
        rt.load(ledgers, ledger_chunks(n), "--disable_wal")
        got = [timed(fsck, env, ok=(0, 4)) for _ in range(runs)]
        wall, cpu = statistics.median(g[0] for g in got), statistics.median(g[2] for g in got)
        print(f"{n:32,d} {wall:7.2f} {cpu:6.2f} {cpu / n * 1e6:14.2f} {max(g[1] for g in got):7.0f} MiB", flush=True)
    shutil.rmtree(root, ignore_errors=True)


def rows_for(db: str, copy: str, n: int, checkout: str | None) -> list[tuple[str, list[str], dict | None, int]]:
    dump, env = command("bkdisk", ["dump", "locations", db])
    dump_json, _ = command("bkdisk", ["dump", "locations", db, "--json"])
    out = [("raw read of the SST files (cat)", [shutil.which("cat"), *sorted(p.path for p in os.scandir(db)
                                                                if p.name.endswith(".sst"))], None, 0),
           ("bkdisk dump locations", dump, env, 0),
           ("bkdisk dump locations --json", dump_json, env, 0),
           ("fsck's read (iter_location_columns)", [sys.executable, "-c", READ_PATH, db, str(n)], None, 0),
           ("sst_dump --command=scan --output_hex", [rt.tool("sst_dump"), f"--file={db}", "--command=scan",
                                                     "--output_hex"], None, 0),
           ("ldb scan --hex (a copy)", [rt.tool("ldb"), f"--db={copy}", "--hex", "scan"], None, 0)]
    if checkout:
        before, benv = command("bkdisk", ["dump", "locations", db], checkout)
        out.append((f"bkdisk dump locations from {checkout} (1 run)", before, benv, 1))
    return out


def run(a) -> int:
    print("machine shared with other work; medians of whole processes, output to /dev/null")
    for fv in a.format_versions:
        db = os.path.join(a.dir, f"fv{fv}", "locations")
        if not (a.keep and os.path.isfile(os.path.join(db, "CURRENT"))):
            print(f"format_version {fv}: wrote {a.entries:,} keys with ldb load in {build(db, a.entries, fv):.1f} s")
        copy = os.path.join(a.dir, f"fv{fv}", "ldb-copy")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(db, copy)
        ssts = [p for p in os.listdir(db) if p.endswith(".sst")]
        size = sum(os.path.getsize(os.path.join(db, p)) for p in ssts)
        print(f"format_version {fv}: {len(ssts)} SSTs, {size / (1 << 20):.0f} MiB")
        print(f"{'what':48s} {'wall s':>7s} {'CPU s':>6s} {'M/s wall':>9s} {'M/s CPU':>8s} {'peak RSS':>9s}")
        for label, cmd, env, runs in rows_for(db, copy, a.entries, a.checkout):
            got = [timed(cmd, env) for _ in range(runs or a.runs)]
            wall, cpu = statistics.median(g[0] for g in got), statistics.median(g[2] for g in got)
            rss = max(g[1] for g in got)
            print(f"{label:48s} {wall:7.2f} {cpu:6.2f} {a.entries / wall / 1e6:9.2f} {a.entries / cpu / 1e6:8.2f} "
                  f"{rss:7.0f} MiB", flush=True)
            if label.startswith("bkdisk") and not runs:
                anon, file = rss_split(cmd, env)
                print(f"{'':48s} peak anonymous {anon:.0f} MiB, file-backed {file:.0f} MiB")
        shutil.rmtree(copy, ignore_errors=True)
    if a.ledgers:
        many_ledgers(a.dir, a.ledgers, a.runs)
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/rocksdb-scan")
    ap.add_argument("--entries", type=int, default=20_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--format-versions", type=lambda s: [int(x) for x in s.split(",") if x], default=[2, 5])
    ap.add_argument("--ledgers", type=lambda s: [int(x) for x in s.split(",") if x], default=[500_000, 1_000_000,
                                                                                             2_000_000],
                    help="ledgers-index sizes for the fsck rows ('' for none)")
    ap.add_argument("--keep", action="store_true", help="keep the databases (and reuse kept ones)")
    ap.add_argument("--checkout", help="also run bkdisk from this source tree once (a baseline)")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
