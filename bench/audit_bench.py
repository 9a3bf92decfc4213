"""The Spark audit on local[2]: wall time for 1, 2, 4 and 8 writer-built disks of equal size against
fsck + inventory run directly on the same disks, Spark's start-up cost, and the cluster join alone
on synthetic replica rows (rows/s).

    python -m bench.audit_bench [--dir /tmp/bench-audit] [--disk-mib 8] [--join-rows 1000000]
                                [--skip-disks] [--skip-join] [--driver-memory 3g] [--repeats 3]
                                [--standalone 127.0.0.2,127.0.0.3,127.0.0.4]

``--standalone HOSTS`` runs the audit on a Spark standalone cluster instead: a master on 127.0.0.1
and a one-core worker on each host, started from the pyspark package as the tests start theirs
(tests/spark_cluster.py) and stopped at the end; each disk names a worker's host, round robin.

Each disk holds its own ledgers (ensemble of one bookie), so auditing k disks is k times the same
work: time should grow linearly in disks and in entries. The direct figure is what an operator runs
without the audit: fsck, then the inventory with payload SHA-256, on each disk (in this process, one
disk after another, and in two worker processes); the audit runs two at a time (local[2]). The
audit task's own function (audit.rows.scan_disk, one read of each entry log for both) is timed too,
two at a time, so Spark's own share shows apart.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import time

DISK_COUNTS = (1, 2, 4, 8)


def build(base: str, disk_mib: int, disks: int = 8):
    """``disks`` equal bookies, each written (and its payloads dropped) before the next, so memory
    holds one disk at a time. Returns the bookie roots, entry-log bytes per disk and the ids."""
    from bkdisk.bookie.cluster import ClusterLedger, ClusterSpec, write_cluster
    from bkdisk.bookie.model import BookieSpec
    from bkdisk.formats.digests import DigestType
    rnd = random.Random(5)
    ids = [f"bench-{i}" for i in range(disks)]
    per_ledger = 200
    payload = 16 * 1024
    ledgers_per_disk = max(1, disk_mib * (1 << 20) // (per_ledger * payload))
    roots, sizes = {}, []
    for i, b in enumerate(ids):
        ledgers = [ClusterLedger(1000 * i + k, [rnd.randbytes(payload) for _ in range(per_ledger)],
                                 ((0, (b,)),), 1, 1, DigestType.CRC32C, b"bench") for k in range(ledgers_per_disk)]
        spec = BookieSpec([], bookie_id=b, entry_log_size_limit=64 << 20, write_journal=False)
        w = write_cluster(ClusterSpec([spec], ledgers), os.path.join(base, f"disk-{i}"))
        roots[b] = w.bookie_roots[b]
        sizes.append(sum(os.path.getsize(p) for p in w.bookies[b].entry_log_files))
        # One metadata folder per disk count, holding the ledgers of the disks audited.
        for k in DISK_COUNTS:
            if i < k:
                d = os.path.join(base, f"metadata-{k}")
                os.makedirs(d, exist_ok=True)
                for n in os.listdir(w.metadata_dir):
                    shutil.copyfile(os.path.join(w.metadata_dir, n), os.path.join(d, n))
        del w, ledgers
    return roots, sizes, ids


def fsck_and_inventory(path: str, meta: dict) -> str:
    """What an operator runs on a bookie host without the audit: fsck, then the inventory with payload
    SHA-256 (each reads the entry logs), in-process. Returns "ok" when both found nothing wrong."""
    from bkdisk.bookie.inventory import scan_bookie
    from bkdisk.bookie.layout import discover
    from bkdisk.bookie.metadata_dir import digest_plan
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    dirs = discover(path)
    report = check_bookie(dirs, CheckOptions(metadata=meta))
    bad = 0
    for rows in scan_bookie(dirs, digest_plan(meta), payload_hash="sha256"):
        if isinstance(rows, str):
            bad += 1
        else:
            rows.arrow()
            bad += rows.problems
    return "ok" if report.exit_code == 0 and not bad else "errors"


def _direct_one(path: str, md_dir: str, fused: bool) -> str:
    """One disk's direct scan in a worker process (two disks at a time): fsck + inventory, or the
    audit task's own function (``fused``: one read of each entry log)."""
    from bkdisk.audit.metadata_source import MetadataDirSource
    from bkdisk.audit.rows import DiskInput, RunInfo, scan_disk, split_tables
    meta = MetadataDirSource(md_dir).load()
    if not fused:
        return fsck_and_inventory(path, meta)
    return split_tables(scan_disk(DiskInput(path), meta, RunInfo.new()))["disks"].to_pylist()[0]["status"]


def _page_cache_warm(roots: list[str]) -> None:
    """Read every file of the disks twice: pages read twice go on the kernel's active list, so the
    bench's disks are not the first evicted when other files fill the page cache."""
    from bench.scan_bench import _warm
    files = [os.path.join(dp, n) for r in roots for dp, _dn, fn in os.walk(r) for n in fn]
    _warm(files)
    _warm(files, refill=False)


def disk_scaling(a, spark) -> None:
    from bkdisk.audit.job import run_audit
    from bkdisk.audit.metadata_source import MetadataDirSource
    from bkdisk.audit.rows import DiskInput, RunInfo
    t0 = time.perf_counter()
    roots, sizes, ids = build(os.path.join(a.dir, "cluster"), a.disk_mib)
    print(f"built 8 disks in {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"disks: 8 x {sum(sizes) / len(sizes) / (1 << 20):.1f} MiB of entry logs", flush=True)
    _page_cache_warm(list(roots.values()))
    # Warm numba's cache and each side's first run (on a cluster: a disk on each worker, so that every
    # executor has started its Python workers and loaded the kernels before the timed runs).
    fsck_and_inventory(roots[ids[0]], {})
    warm = [DiskInput(roots[b], b, h) for b, h in zip(ids, a.hosts)] or [DiskInput(roots[ids[0]])]
    run_audit(spark, warm, [], MetadataDirSource(os.path.join(a.dir, "cluster", f"metadata-{8 if a.hosts else 1}")),
              os.path.join(a.dir, "warm"), RunInfo.new())
    print("direct s: fsck + inventory (payload SHA-256) of the disks one after another in this process;")
    print("direct2 s: the same in 2 worker processes (the audit's concurrency on local[2]); task2 s: the audit")
    print("task's own function (audit.rows.scan_disk: one read of each entry log) in 2 worker processes;")
    print("audit s: wall time of run_audit (scan tasks 2 at a time, joins, Parquet writes); task s: sum of")
    print(f"the audit's per-disk scan times; audit/ideal: audit s / (direct s / 2). Medians of {a.repeats} rounds.")
    print(f"{'disks':>5} {'GiB':>6} {'direct s':>9} {'direct2 s':>9} {'task2 s':>8} {'audit s':>8} {'task s':>8} "
          f"{'audit/ideal':>11} {'MiB/s audit':>11}")
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    md1 = os.path.join(a.dir, "cluster", "metadata-2")
    list(pool.map(_direct_one, [roots[ids[0]], roots[ids[1]]], [md1, md1], [True, False]))   # warm both workers
    cols = {name: {} for name in ("direct", "direct2", "task2", "audit", "task")}
    for k in DISK_COUNTS:
        md_dir = os.path.join(a.dir, "cluster", f"metadata-{k}")
        md = MetadataDirSource(md_dir)
        hosts = a.hosts or [None]
        disks = [DiskInput(roots[b], b, hosts[i % len(hosts)]) for i, b in enumerate(ids[:k])]
        meta = md.load()
        rounds = {name: [] for name in cols}
        for _ in range(a.repeats):   # the sides alternate within each round: drifts of the VM hit all alike
            t0 = time.perf_counter()
            statuses = [fsck_and_inventory(d.path, meta) for d in disks]
            rounds["direct"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            statuses += list(pool.map(_direct_one, [d.path for d in disks], [md_dir] * k, [False] * k))
            rounds["direct2"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            statuses += list(pool.map(_direct_one, [d.path for d in disks], [md_dir] * k, [True] * k))
            rounds["task2"].append(time.perf_counter() - t0)
            if set(statuses) != {"ok"}:
                raise SystemExit(f"bench: a disk was not scanned cleanly, figures void: {statuses}")
            t0 = time.perf_counter()
            res = run_audit(spark, disks, [], md, os.path.join(a.dir, f"out-{k}"), RunInfo.new())
            rounds["audit"].append(time.perf_counter() - t0)
            bad = [d for d in res.disks if d["status"] != "ok"]
            if bad:
                raise SystemExit(f"bench: a disk was not scanned cleanly, figures void: {bad[0]}")
            rounds["task"].append(sum(d["scan_seconds"] for d in res.disks))
        for name, vals in rounds.items():
            cols[name][k] = statistics.median(vals)
        mib = sum(sizes[:k]) / (1 << 20)
        c = {name: cols[name][k] for name in cols}
        print(f"{k:>5} {mib / 1024:>6.2f} {c['direct']:>9.2f} {c['direct2']:>9.2f} {c['task2']:>8.2f} "
              f"{c['audit']:>8.2f} {c['task']:>8.2f} {c['audit'] / (c['direct'] / 2):>11.2f} "
              f"{mib / c['audit']:>11.1f}", flush=True)
    pool.shutdown()
    xs = list(DISK_COUNTS)
    # Least-squares seconds per added disk: less at the mercy of one noisy point than the difference of
    # the first and the last.
    per = {name: statistics.linear_regression(xs, [cols[name][k] for k in xs]).slope for name in cols}
    lo = DISK_COUNTS[0]
    print(f"seconds per added disk (least-squares slope over {xs} disks): audit {per['audit']:.2f}, direct on one "
          f"core {per['direct']:.2f} (ideal on 2 slots {per['direct'] / 2:.2f}), direct2 {per['direct2']:.2f}, "
          f"task2 {per['task2']:.2f}", flush=True)
    print(f"per-disk overhead of the audit: {per['audit'] / per['direct2'] - 1:.1%} against the direct scan 2 at a "
          f"time (direct2), {per['audit'] / (per['direct'] / 2) - 1:.1%} against the ideal (direct / 2); "
          f"Spark's share against the task's own function (task2) {per['audit'] / per['task2'] - 1:.1%}; "
          f"fixed cost (audit of {lo} minus its direct scan) {cols['audit'][lo] - cols['direct'][lo]:.1f} s",
          flush=True)


def join_alone(a, spark) -> None:
    """Fault tables over synthetic replicas: 3-bookie ensembles over 12 bookies, Qw 2, 1 in 1000
    first copies missing; the rows are generated in Spark, never on the driver."""
    from pyspark.sql import functions as F

    from bkdisk.audit import tables
    bookies, epl = 12, 1000
    entries = a.join_rows // 2
    n_ledgers = max(1, entries // epl)
    # One ensemble a ledger, as the metadata stage writes the segments (generated in Spark too).
    segments = spark.range(n_ledgers).select(
        F.lit(0).cast("long").alias("ledger_scope"), F.col("id").alias("ledger_id"), F.lit("CLOSED").alias("state"),
        F.lit(epl - 1).cast("long").alias("closed_last"), F.lit(2).cast("int").alias("write_quorum"),
        F.lit(0).cast("long").alias("seg_first"), F.lit(None).cast("long").alias("seg_next"),
        F.array(*[F.concat(F.lit("bk-"), ((F.col("id") + p) % bookies).cast("string")) for p in range(3)]
                ).alias("members"))
    e = spark.range(n_ledgers * epl).select((F.col("id") / epl).cast("long").alias("ledger_id"),
                                           (F.col("id") % epl).alias("entry_id"), "id")
    r = e.select("*", F.explode(F.array(F.lit(0), F.lit(1))).alias("w"))
    r = r.filter(~((F.col("id") % 1000 == 0) & (F.col("w") == 0)))
    pos = (F.col("entry_id") + F.col("w")) % 3
    bookie_id = F.concat(F.lit("bk-"), ((F.col("ledger_id") + pos) % bookies).cast("string"))
    replicas = r.select(F.lit(0).cast("long").alias("ledger_scope"), "ledger_id", "entry_id",
                        bookie_id.alias("bookie_id"),
                        F.sha2(F.col("id").cast("string"), 256).alias("payload_sha256"),
                        F.lit(True).alias("digest_ok"), F.lit(100).cast("long").alias("size"))
    replicas = replicas.cache()
    n = replicas.count()
    audited = [f"bk-{i}" for i in range(bookies)]
    t0 = time.perf_counter()
    out = tables.fault_tables(segments, replicas, audited, [])
    counts, each = {}, {}
    for name, build in out.items():
        t1 = time.perf_counter()
        build().write.mode("overwrite").parquet(os.path.join(a.dir, "join", name))
        each[name] = round(time.perf_counter() - t1, 1)
        counts[name] = spark.read.parquet(os.path.join(a.dir, "join", name)).count()
    secs = time.perf_counter() - t0
    print(f"seconds per table (in order; shared frames are computed by the first that needs them): {each}")
    tables.release(spark)
    print(f"join alone: {n:,} replica rows, {n_ledgers:,} ledgers -> {counts} in {secs:.1f} s: "
          f"{n / secs:,.0f} rows/s", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/bench-audit")
    ap.add_argument("--disk-mib", type=int, default=8, help="entry-log MiB per disk")
    ap.add_argument("--join-rows", type=int, default=1_000_000, help="synthetic replica rows for the join alone")
    ap.add_argument("--skip-disks", action="store_true")
    ap.add_argument("--skip-join", action="store_true")
    ap.add_argument("--driver-memory", default="3g", help="local mode runs everything in the driver JVM")
    ap.add_argument("--repeats", type=int, default=3, help="rounds per disk count (medians are reported)")
    ap.add_argument("--standalone", default="", help="worker hosts of a standalone cluster (comma-separated)")
    a = ap.parse_args(argv)
    a.hosts = [h for h in a.standalone.split(",") if h]
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    from bkdisk.audit.job import spark_session
    t0 = time.perf_counter()
    cluster = None
    if a.hosts:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
        from pathlib import Path

        from spark_cluster import CLUSTER_CONF, start_cluster
        os.makedirs(os.path.join(a.dir, "standalone"))
        cluster = start_cluster(Path(a.dir) / "standalone", a.hosts)
        spark = spark_session(cluster.master_url, dict(CLUSTER_CONF, **{"spark.sql.shuffle.partitions": "16"}))
    else:
        spark = spark_session("local[2]", {"spark.sql.shuffle.partitions": "16",
                                           "spark.driver.memory": a.driver_memory})
    spark.range(1).count()
    print(f"spark start-up (session + first job{', a standalone cluster' if cluster else ''}): "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    try:
        if not a.skip_disks:
            disk_scaling(a, spark)
        if not a.skip_join:
            join_alone(a, spark)
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
