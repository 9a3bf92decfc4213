"""`bkdisk salvage` against `bkdisk audit` of the same disks (the same disk tasks and scan; the audit
joins against the metadata the writer wrote, salvage groups every ledger found in Spark and writes its
metadata): many small ledgers (E 3, Qw 2, three entries each) placed round robin over ``--disks``
writer-built bookies.

    python -m bench.salvage_bench --data /work/bench-data/salvage [--ledgers 20000] [--disks 8]
                                  [--storage index-files|rocksdb] [--master local[2]] [--runs 1]

Each command is run as a process (start-up included): wall time, peak RSS of the driver, of the
largest PySpark worker and of the JVM (sampled over the process tree, bench.audit_scale_bench), the
driver's exact ru_maxrss. The audit, measured in the same round, is the baseline.

Measured on the shared 2-core machine (load average 20-24 from other sessions' work throughout),
``python -m bench.run_all salvage --data /tmp/salv/bench --ledgers 20000 --disks 8``: the audit
246.5 s (driver 271 MiB, largest Python worker 287 MiB, JVM 910 MiB); salvage 379.7 s, x1.54 (driver
222 MiB, Python worker 267 MiB, JVM 661 MiB), every one of the 20,000 ledgers written.

A million ledgers over 8 DbLedgerStorage disks (2026-12-02; the disks written in about 9 minutes on
the machine alone, the writer at 7 GiB; 6 million copies, 375,000 ledgers a disk),
``python -m bench.salvage_bench --data /work/bench-data/salvage --ledgers 1000000 --disks 8
--storage rocksdb --only salvage``, the machine shared with a test suite and two other benches (load 3-10):
salvage **1,298 s**, exit 0, all 1,000,000 metadata files written, peak RSS driver 257 MiB, largest
Python worker **861 MiB**, JVM 1,580 MiB; 2,000 of the files picked at random equal the writer's
metadata in ensemble size, write quorum, digest type, password, ensembles, last entry, length and
state. The run before two fixes (load 2-8) took 1,744 s and its largest Python worker 1,281 MiB: pass 7
grouped a DbLedgerStorage disk's entries by ledger with a mask per ledger (one disk task: 183 CPU s
of 188 there; now 20.5) and every disk task built the disk's space rows, a row per ledger that
salvage never reads (the scan's process: 1,171 MiB with them, 787 without).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys

from bench.audit_scale_bench import run_measured


def build(base: str, ledgers: int, disks: int, storage: str) -> tuple[list[str], str]:
    """``disks`` bookies (``storage``: "index-files" or "rocksdb", DbLedgerStorage's) holding ``ledgers``
    ledgers, written in one go (the writer holds every ledger while it writes: about 6 KiB a ledger);
    returns their roots and the metadata folder."""
    from bkdisk.bookie.cluster import ClusterLedger, ClusterSpec, write_cluster
    from bkdisk.bookie.model import BookieSpec
    from bkdisk.formats.digests import DigestType
    ids = [f"bench-{i}" for i in range(disks)]
    md = os.path.join(base, "metadata")
    done = os.path.join(base, "built")
    roots = [os.path.join(base, "bookies", b) for b in ids]
    if os.path.exists(done):
        return roots, md
    shutil.rmtree(base, ignore_errors=True)
    rnd = random.Random(7)
    specs = [BookieSpec([], bookie_id=b, entry_log_size_limit=64 << 20, write_journal=False, storage=storage,
                        ledger_dirs=["ledgers"]) for b in ids]
    lgs = [ClusterLedger(0x1000 + lid, [rnd.randbytes(100) for _ in range(3)],
                         ((0, tuple(ids[(lid + k) % disks] for k in range(3))),), 2, 2, DigestType.CRC32C, b"bench")
           for lid in range(ledgers)]
    write_cluster(ClusterSpec(specs, lgs), base)
    open(done, "w").close()
    return roots, md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="where the bookies go (kept outside worktrees)")
    ap.add_argument("--ledgers", type=int, default=20000)
    ap.add_argument("--disks", type=int, default=8)
    ap.add_argument("--storage", choices=("index-files", "rocksdb"), default="index-files",
                    help="the bookies' ledger storage (rocksdb: DbLedgerStorage, no .idx file per ledger)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", choices=("audit", "salvage"), default=None,
                    help="run one side only (its baseline measured in another run)")
    a = ap.parse_args(argv)
    base = os.path.join(a.data, f"{a.ledgers}-{a.disks}-{a.storage}")
    roots, md = build(base, a.ledgers, a.disks, a.storage)
    bk = os.path.join(os.path.dirname(sys.executable), "bkdisk")
    pw = os.path.join(a.data, "pw.txt")
    with open(pw, "w") as f:
        f.write("bench\n")
    common = ["--master", a.master, "--quiet", "--conf", "spark.sql.shuffle.partitions=8"]
    rows: dict[str, list[dict]] = {"audit": [], "salvage": []}
    for _ in range(a.runs):
        for name, args in (("audit", [bk, "audit", *roots, "--metadata-dir", md]),
                           ("salvage", [bk, "salvage", *roots, "--password-candidates", pw])):
            if a.only not in (None, name):
                continue
            out = os.path.join(a.data, f"out-{name}")
            shutil.rmtree(out, ignore_errors=True)
            r = run_measured([*args, "--out", out, *common], dict(os.environ))
            rows[name].append(r)
            mib = lambda v: f"{v / 2**20:6.0f}"   # noqa: E731
            print(f"{name:8s} {a.ledgers} ledgers on {len(roots)} disk dirs: {r['wall']:7.1f} s, exit {r['exit']}; "
                  f"peak RSS driver {mib(r['driver'])} MiB (ru_maxrss {mib(r['max_rss_exact'])}), python worker "
                  f"{mib(r['python worker'])} MiB, jvm {mib(r['jvm'])} MiB", flush=True)
    if a.only:
        return 0
    base_wall = statistics.median(r["wall"] for r in rows["audit"])
    wall = statistics.median(r["wall"] for r in rows["salvage"])
    print(f"salvage {wall:.1f} s = x{wall / base_wall:.2f} the audit of the same disks ({base_wall:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
