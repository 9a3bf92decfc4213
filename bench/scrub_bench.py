"""The nightly audit (``bkdisk audit --state``): a week of runs a day apart against the audit that
reads every byte (``--deep-all``), on ``--disks`` bulk-written bookies of ``--disk-gib`` each with
30 KB entries (bench/bulk_bookie.py, interleaved, 64 MiB entry logs, the journals holding the
ledgers' keys only), built once under ``--data`` and kept for the next run.

    python -m bench.scrub_bench --data /work/bench-data/scrub [--disks 8] [--disk-gib 2]
                                [--master local[2]] [--build-only] [--cold]

Each audit is `bkdisk audit` run as a process (start-up included; bench.audit_scale_bench's
measure: wall time, CPU of every process, peak RSS of the driver, the largest PySpark worker and the
JVM). Seven runs on one state, `--deep-interval 7d --as-of` a day apart, each paired with the
baseline run just before it, `--deep-all` on a state of its own (a baseline measured once, first,
stood for a shared machine's load at another time): per run the deep bytes' share of the payload
bytes, the entry logs deep-checked per disk, wall time, CPU, peak RSS and both ratios to its
baseline; after the seventh, whether every log was deep-checked once. The metadata folder is empty: every
ledger is an orphan, which every run computes alike. The host's load average is printed beside.

With ``--cold`` each audit first drops the disks' files from the page cache (POSIX_FADV_DONTNEED on
those files only), so every audit reads them from the disk as on a production bookie; without it, what
the page cache holds of the 16 GiB (on a 23 GiB machine) differs from run to run.

Where a run's time goes (one light run and one --deep-all, warm-ish page cache, load 3-6, Spark's
event log and py-spy on the driver and workers, with the JVM's own defaults): process and JVM start
to the first job ~14 s; the scan stage (one Spark job of 8 tasks, 2 at a time) 45 s light, 65 s deep;
the driver planning the fault tables (each DataFrame step a call into the JVM) ~7 s; writing the
tables (about 40 small Spark jobs over the 572k replica rows) ~21 s; state and reports ~4 s. Only the
scan stage depends on what is read deep: ~46 s of every run was fixed, and Spark's JVM burnt 60-67 s
of a light run's CPU, taken from the scan tasks on 2 cores. A light log that the state holds record
offsets for (its last deep read) asks for its headers' pages only (12 cold logs: 106 MiB instead of
768, 0.53-0.72 s instead of 1.17-1.30 s); in the first week only the logs deep-read on an earlier run
have them.

What the driver JVM now starts with (audit/job.py DRIVER_JVM_OPTIONS, audit/jvm_archive.py), each
measured on whole audits, cold, paired and alternating, CPU per process role (load 6-9 throughout):
C1 only (-XX:TieredStopAtLevel=1) and the serial GC: the JVM's CPU in a light run 60-67 s -> 36-39 s,
in a --deep-all 67-77 s -> 34-48 s, its peak RSS 904-1033 -> 687-706 MiB (deep 1061-1087 -> 732-740);
Spark's classes mapped from the class-data archive `bkdisk warm-up` writes: JVM start to a session
12.7 s -> 3.3-5.8 s, the JVM's CPU of the table phase alone 38.6-47.5 s -> 28.8-30.8 s. Tried and
not kept (the table phase alone, on a finished run's replicas): coalesce(1) instead of repartition(1)
before each table's sort (43 Spark jobs -> 39, the JVM's CPU 35.6-36.5 s against 33.5-36.0 s, the
writes slower: the last stage's work in one task), adaptive execution off (JVM CPU 47.9-56.6 s against
41.4-47.5 s). The ~40 table jobs themselves remain. One light run each way right after the bench
(day 8 on a copy of the state, cold): before 165.1 s, JVM CPU 75.7 s, JVM 1182 MiB (load 9.4-8.8);
now 103.0 s, JVM CPU 32.4 s, JVM 718 MiB (load 6.9-9.4).

Measured 2026-12-02 16:00 UTC, full size (8 disks x 2 GiB, 16.01 GiB of payload, 34 entry logs a disk,
71,488 entries a disk), shared 2-core machine (23 GiB of RAM) with two other sessions' work running
(another session's Spark test suite among it), archive written by `bkdisk warm-up`,
``python -m bench.scrub_bench --data /work/bench-data/scrub --disks 8 --disk-gib 2 --cold``
(CPU: user + system seconds of every process of the audit):

    load average at start 8.03
    --deep-all: 197.9 s (CPU 103 s), load ~8.4
    --deep-all again, right after run 7 (its CPU by process: JVM 35 s, scans 47 s, driver 3 s):
        102.4 s, load 6.3-6.9: runs 4-7, at that load, are x0.78-0.92 of it
    run 1: 141.5 s (CPU 81 s), deep 0.141, 5 logs per disk of 34, load 8.72
    run 2: 119.9 s (CPU 75 s), deep 0.141, 5 logs per disk, load 8.33
    run 3: 114.2 s (CPU 75 s), deep 0.152, 5 logs per disk, load 8.82
    run 4:  85.9 s (CPU 67 s), deep 0.148, 5 logs per disk, load 6.87
    run 5:  88.8 s (CPU 73 s), deep 0.148, 5 logs per disk, load 7.29
    run 6:  93.8 s (CPU 75 s), deep 0.152, 5 logs per disk, load 7.14
    run 7:  79.4 s (CPU 64 s), deep 0.117, 4 logs per disk, load 6.82; every log deep-checked: yes
    (peak RSS: driver 286-301 MiB, python worker 268-273 MiB, JVM 672-731 MiB; the load: 1 minute,
    at each run's end; the bench printed x0.40-0.71 against its first, slowed baseline)
    before these JVM options (the same bench, load 3.4-7.2): --deep-all 136.1 s (CPU 126 s) alone,
    runs 124.8-195.4 s (CPU 96-135 s), JVM 829-1154 MiB

Each run deep-read its seventh of the payload bytes (1/7 = 0.143; 34 logs / 7 runs = 4.9 a disk)
and after the seventh every log had been deep-checked once. A light run's CPU fell from 96-135 s to
64-81 s and --deep-all's from 121-126 s to 103 s. The issue's "a run <= 0.35x the --deep-all audit"
is still NOT met on this machine: at the same load a light run takes x0.78-0.92 of --deep-all's
time (--deep-all gained as much from the JVM options as the light runs did). What prevents it, in
CPU (the resource a 2-core host runs out of): a light run's 64-81 s against --deep-all's 103 s; the
payload hashing of 16 GiB that a light run skips is ~25 s of it. Of a light run, Spark's JVM is still
32-39 s (start, the table planning and the ~40 table jobs: fixed per run, whatever is read), the
Python workers with the disks' forked scans 26-38 s (the light part, index files, every header, the
space accounting and the replica rows, is several seconds a disk), the driver ~3 s. Larger disks (the deep part
grows with the bytes, the fixed part with the entries), or a host not shared, make the deep part the
larger share; this bench does not show it.

Measured 2026-12-03 on a machine alone (load 1.9-3.4, the bench's own), the tables written from four
threads (audit/job.py write_tables): --deep-all 43.4-87.0 s (CPU 66-92 s), runs 37.1-57.4 s (CPU
47-62 s), x0.61-1.02 of the --deep-all before each; the same bench an hour before, the tables written
one after another: --deep-all 44.3-76.5 s, runs 34.2-62.3 s, x0.68-1.11. Deep 0.117-0.152 of the bytes
per run, every log deep-checked after the seventh, both times. Alone, a --deep-all of the 16 GiB is
only ~8-10 s more than a light run, while ~15 s of any audit is fixed (a golden cluster-3 audit, whole:
14.8 s) and each disk's light scan costs ~2.4 s of CPU (fsck's passes, the space accounting, the
replica rows): at 2 GiB a disk, 0.35x of --deep-all is below the fixed cost alone.

Measured 2026-12-03 17:00 UTC, machine alone (load 2.2-3.4, the bench's own), the same command: the
VM's disk changed speed during the bench. While it read cold files at 30 MiB/s (the first pair), the
--deep-all took 458.5 s and run 1 55.8 s: x0.12. Once it read them at 200+ MiB/s again: --deep-all
53.7-69.6 s (CPU 82-91 s), runs 46.5-65.0 s (CPU 56-68 s), x0.75-0.97. Deep 0.117-0.152 of the bytes
a run, every log deep-checked after the seventh. What a light run reads from the disk (day 8, every
log's record offsets in the state): 4,417 MiB of the 16.01 GiB, 2.25 GiB of them the deep seventh and
~2.0 GiB the pages of 30 KB entries' headers (a page per entry: 0.137 of the bytes): a disk that
reading bounds gives a run ~0.28 of --deep-all's reads plus the fixed cost. Its time then (event log,
40.7 s whole): session 4.3 s, the scan stage 21.7 s (8 tasks two at a time, 3.3-4.5 s a disk, the
first two 8.6 s with the workers' start), the tables 10 s (45 jobs), stop and reports 2 s.

Measured 2026-12-05 10:00-10:45 UTC, machine alone (load 1.1-3.6, the bench's own), ``--cold``, the
disk reading cold files at ~1.1 GB/s: --deep-all 35.5-44.5 s (CPU 56-69 s), runs 27.9-33.9 s (CPU 38-43
s), x0.72-0.83. Then with the light scan's per-ledger work summed at once (bookie/space_rows.py, the
journals' keys walked without a look-up each, the header pages asked for as runs computed at once):
--deep-all 34.0-37.0 s (CPU 53-57 s), runs 26.4-34.1 s (CPU 34-41 s; runs 4-7, the logs' record offsets
in the state: 26.4-27.7 s against 27.9-29.4 s), x0.75-0.96. Where a light run's time goes (day 8,
cold, a copy of the state each run, ``python -m bench.thread_cpu --timeline -- bkdisk audit ...``):
27-29 s whole, CPU 35-40 s: Spark's JVM 18-21 s (its task threads 8.5 s: the scan stage's Arrow
exchange and the table jobs; Py4J's threads, the driver's plan building, 4.4 s; the C1 compiler 3.7 s;
the collector 0.8 s), the Python workers 14-17 s (per disk the forked scan 1.25-1.36 s, each worker's
own start, imports and replica files ~1.2 s, the metadata stage's workers 0.6 s), the driver ~2 s;
the scan stage from ~3 s to ~17 s, the tables to ~25 s. A disk's light scan alone (``bkdisk scan-disk
--state``, day 8): 1.39 s whole against 1.58 s before (12 pairs), cold 2.5 s, reading 522 MiB of its
2.1 GB (the deep seventh and a page per 30 KB entry's header). Alone on this machine the scan stage
of a light run is ~14 s and a --deep-all's ~21-25 s (its whole less the same ~13 s of session,
tables and stop): with no fixed Spark cost at all a light run would still be ~0.6x, because the
light part (every header page, the index, the metadata and space accounting) costs about as much as
CRC32C and SHA-256 over the payloads at hardware speed. Tried and
not kept: ``spark.sql.codegen.wholeStage=false`` and ``spark.sql.shuffle.partitions=4`` (light runs,
3 pairs, no difference beyond the noise). The first week's runs are slower (30.6-34.1 s) because a
light log whose record offsets the state does not hold yet is read whole by the kernel's read-ahead.

Measured 2026-12-05 12:50-13:30 UTC, machine alone (load 2.6-4.0), ``--cold``, two benches. With the
index files of a block asked for at once and the entry logs' pages asked ahead of their walks on a
thread (fsck.log_read_ahead): --deep-all 30.7-33.9 s (CPU 48-54 s), runs 1-3 28.6-29.0 s, runs 4-7
25.4-26.6 s, x0.77-0.94. Then with a light log the state has no offsets for asked for the header pages
its ``.idx`` locations give (fsck.index_hints): --deep-all 32.9-36.4 s (CPU 52-58 s), runs 1-3 23.9-24.4
s, runs 4-7 24.4-27.1 s (CPU 33-38 s), x0.67-0.82; peak RSS driver 291-306 MiB, python worker 248-254
MiB, JVM 699-722 MiB; deep 0.117-0.152 of the bytes a run, every log deep-checked after the seventh.
One disk's scrub alone (``bkdisk scan-disk --state``, cold, 5-6 runs each, two checkouts alternated):
day 8 2.37-2.45 s -> 1.89-1.97 s, day 1 (no state) 3.12 s -> 2.92 s (the asks) -> 1.90 s (the index's
offsets). Then with a log read whole asked for a device read-ahead window at a time (one request is cut
to it: before, only a log's first window was read ahead): --deep-all 34.7-37.3 s (CPU 56-60 s), runs
1-7 23.3-26.5 s (CPU 33-40 s), x0.66-0.76; peak RSS driver 289-311 MiB, python worker 245-257 MiB,
JVM 695-786 MiB (load 2.0-3.5). The 0.35x is still not met: ~13 s of every run is Spark's (session,
table jobs, stop), and the --deep-all gained from the same asks.

Measured 2026-12-05 18:45-18:50 UTC, machine alone, cold, day 8 on a copy of the state (one run each,
alternated, the same harness): --deep-all 41.1 and 41.4 s (CPU 68 s), light 25.5 and 27.1 s (CPU 36-38 s),
x0.62-0.66. A light run's event log (23.6 s from the session's start): the scan stage 1.8-15.7 s, its
eight tasks two at a time, the first two 4.6 s (the workers' start), the others 2.5-3.3 s; the tables
16.0-23.5 s (44 jobs). A disk alone (bench.header_reads_bench, cold): its light scan-disk 1.65-1.72 s,
its --deep-all 3.56-3.80 s, CPU-bound (SHA-256 of every payload on one core); reading only the page of
each entry's header (72,123 pages) takes the disk 0.80-0.81 s, x0.80-0.83 of reading every byte
(0.96-1.01 s). Two disks at once share the device: a light wave of two tasks is bound by 144 k page
reads and its seventh read deep (~1.9 s at the least), a --deep-all wave by the hashing of 4 GiB on the
two cores (~3.5 s): on this machine no light run, even with no Spark cost at all, comes under ~0.54x
of a --deep-all.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import time

ENTRY_BYTES = 30_000
LOG_LIMIT = 64 << 20
LEDGERS_PER_GIB = 2000
T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.UTC)


def build(data: str, disks: int, disk_gib: float) -> list[str]:
    """The bookies (each written once; a disk whose stamp matches is kept)."""
    from bench import bulk_bookie
    roots = []
    for i in range(disks):
        root = os.path.join(data, f"disk-{i}")
        stamp = os.path.join(root, "bench-params.json")
        want = {"disk_gib": disk_gib, "entry_bytes": ENTRY_BYTES, "log_limit": LOG_LIMIT, "seed": 100 + i}
        if not (os.path.exists(stamp) and json.load(open(stamp)) == want):
            shutil.rmtree(root, ignore_errors=True)
            t = time.perf_counter()
            c = bulk_bookie.build(root, disk_gib, max(1, int(LEDGERS_PER_GIB * disk_gib)), ENTRY_BYTES, ENTRY_BYTES,
                                  100 + i, bookie_id=f"bench-{i}:3181", log_limit=LOG_LIMIT, journal_entries=False)
            with open(stamp, "w") as f:
                json.dump(want, f)
            print(f"built disk-{i}: {c['entries']} entries in {c['logs']} entry logs "
                  f"({time.perf_counter() - t:.0f} s)", flush=True)
        roots.append(root)
    return roots


def evict(roots: list[str]) -> None:
    """Drop the bookies' files from the page cache (POSIX_FADV_DONTNEED, these files only): the audit
    then reads them from the disk, as it does a production bookie's, which no page cache holds."""
    for root in roots:
        for folder, _dirs, names in os.walk(root):
            for n in names:
                fd = os.open(os.path.join(folder, n), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def audit(roots: list[str], data: str, state: str, master: str, cold: bool, *extra: str) -> tuple[dict, dict]:
    """One `bkdisk audit --state` as a process (``cold``: its disks' files out of the page cache
    first): its measure and summary.json's scrub."""
    from bench.audit_scale_bench import run_measured
    if cold:
        evict(roots)
    bk = os.path.join(os.path.dirname(sys.executable), "bkdisk")
    md, out = os.path.join(data, "metadata"), os.path.join(data, "out")
    os.makedirs(md, exist_ok=True)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    r = run_measured([bk, "audit", *roots, "--metadata-dir", md, "--out", out, "--master", master, "--quiet",
                      "--state", state, *extra], env)
    summary = json.load(open(os.path.join(out, "summary.json")))
    import pyarrow.parquet as pq
    disks = pq.read_table(os.path.join(out, "disks")).to_pylist()
    return r, dict(summary["scrub"], per_disk=sorted(d["logs_deep_checked"] for d in disks))


def mib(n: int) -> str:
    return f"{n / (1 << 20):.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scrub_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/work/bench-data/scrub", help="where the bookies are built and kept")
    ap.add_argument("--disks", type=int, default=8)
    ap.add_argument("--disk-gib", type=float, default=2.0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--cold", action="store_true", help="each audit reads the disks from the disk, none of "
                    "their pages cached (otherwise what the page cache holds of them varies run to run)")
    a = ap.parse_args(argv)
    roots = build(a.data, a.disks, a.disk_gib)
    if a.build_only:
        return 0
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    for s in ("state-all", "state"):
        shutil.rmtree(os.path.join(a.data, s), ignore_errors=True)
    worst = worst_cpu = 0.0
    for day in range(7):
        # Each run's baseline is a --deep-all run just before it (its own state), so that both see the
        # same load: one baseline measured first would stand for a machine that has changed since.
        base, bc = audit(roots, a.data, os.path.join(a.data, "state-all"), a.master, a.cold, "--deep-all",
                         "--as-of", (T0 + datetime.timedelta(days=day)).isoformat())
        print(f"--deep-all before run {day + 1}: {base['wall']:.1f} s (CPU {base['cpu']:.0f} s), deep "
              f"{bc['deep_bytes'] / bc['payload_bytes']:.3f} of {bc['payload_bytes'] / (1 << 30):.2f} GiB; peak RSS "
              f"driver {mib(base['driver'])} MiB, python worker {mib(base['python worker'])} MiB, JVM "
              f"{mib(base['jvm'])} MiB; load {os.getloadavg()[0]:.2f}", flush=True)
        r, sc = audit(roots, a.data, os.path.join(a.data, "state"), a.master, a.cold, "--deep-interval", "7d",
                      "--as-of", (T0 + datetime.timedelta(days=day)).isoformat())
        worst, worst_cpu = max(worst, r["wall"] / base["wall"]), max(worst_cpu, r["cpu"] / base["cpu"])
        print(f"run {day + 1}: {r['wall']:.1f} s (CPU {r['cpu']:.0f} s; x{r['wall'] / base['wall']:.2f} of the "
              f"--deep-all before it, CPU x{r['cpu'] / base['cpu']:.2f}), deep "
              f"{sc['deep_bytes'] / sc['payload_bytes']:.3f} of the payload bytes, logs deep-checked per disk "
              f"{sc['per_disk']} of {sc['logs_total'] // a.disks}; peak RSS driver {mib(r['driver'])} MiB, "
              f"python worker {mib(r['python worker'])} MiB, JVM {mib(r['jvm'])} MiB; every log verified: "
              f"{sc['all_verified_within_interval']}; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"after the 7th run every log deep-checked within the interval: {sc['all_verified_within_interval']}; "
          f"slowest run x{worst:.2f} of its --deep-all (CPU x{worst_cpu:.2f})")
    return 0 if sc["all_verified_within_interval"] else 1


if __name__ == "__main__":
    sys.exit(main())
