"""The nightly audit (``bkdisk audit --state``): a week of runs a day apart against the audit that
reads every byte (``--deep-all``), on ``--disks`` bulk-written bookies of ``--disk-gib`` each with
30 KB entries (bench/bulk_bookie.py, interleaved, 64 MiB entry logs, the journals holding the
ledgers' keys only), built once under ``--data`` and kept for the next run.

    python -m bench.scrub_bench --data /work/bench-data/scrub [--disks 8] [--disk-gib 2]
                                [--master local[2]] [--build-only]

Each audit is `bkdisk audit` run as a process (start-up included; bench.audit_scale_bench's
measure: wall time, peak RSS of the driver, the largest PySpark worker and the JVM). The baseline,
measured first in the same run, is `--deep-all` on a state of its own. Then seven runs on one state,
`--deep-interval 7d --as-of` a day apart: per run the deep bytes' share of the payload bytes,
the entry logs deep-checked per disk, wall time, peak RSS and the ratio to `--deep-all`'s time;
after the seventh, whether every log was deep-checked once. The metadata folder is empty: every
ledger is an orphan, which every run computes alike. The host's load average is printed beside.

Measured once, the full size (8 disks x 2 GiB, 16.01 GiB of payload, 34 entry logs a disk, 71,488
entries a disk), on the shared 2-core machine (23 GiB of RAM) while two other sessions ran their own
work: load average 3.1 (1 min) at the start, 4.7-10.2 during the runs,
``python -m bench.scrub_bench --data /work/bench-data/scrub --disks 8 --disk-gib 2``:

    --deep-all: 168.7 s, deep 1.000; peak RSS driver 294 MiB, python worker 276 MiB, JVM 1053 MiB
    run 1: 150.6 s (x0.89), deep 0.141, 5 logs per disk of 34, load 6.11
    run 2: 130.5 s (x0.77), deep 0.141, 5 logs per disk, load 8.26
    run 3:  99.0 s (x0.59), deep 0.152, 5 logs per disk, load 7.22
    run 4: 138.3 s (x0.82), deep 0.148, 5 logs per disk, load 10.17
    run 5: 206.4 s (x1.22), deep 0.148, 5 logs per disk, load 6.22
    run 6: 148.3 s (x0.88), deep 0.152, 5 logs per disk, load 4.75
    run 7: 160.9 s (x0.95), deep 0.117, 4 logs per disk, load 4.97; every log deep-checked: yes
    (each run: peak RSS driver 292-303 MiB, python worker 269-272 MiB, JVM 866-1101 MiB)

Each run deep-read its seventh of the payload bytes (1/7 = 0.143; 34 logs / 7 runs = 4.9 a disk)
and after the seventh every log had been deep-checked once. The issue's "a run <= 0.35x the
--deep-all audit" was NOT met here: the deep part is a small share of the audit on these disks. One
disk checked directly (fsck in-process, its files in the page cache), all logs light against all
deep with payload SHA-256: 2.6 s against 5.7 s; eight such disks are about 23 s of deep scanning on
two cores, against the 100-200 s each audit took, which go to Spark (start-up, the tables' joins over
572k replica rows, writing the tables), the same in every run, and to the other sessions' load (the
run times vary by 2x with it). Larger disks, or more of them a host, make the deep part the larger
share; this bench does not show it.
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


def audit(roots: list[str], data: str, state: str, master: str, *extra: str) -> tuple[dict, dict]:
    """One `bkdisk audit --state` as a process: its measure and summary.json's scrub."""
    from bench.audit_scale_bench import run_measured
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
    a = ap.parse_args(argv)
    roots = build(a.data, a.disks, a.disk_gib)
    if a.build_only:
        return 0
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    for s in ("state-all", "state"):
        shutil.rmtree(os.path.join(a.data, s), ignore_errors=True)
    base, sc = audit(roots, a.data, os.path.join(a.data, "state-all"), a.master, "--deep-all",
                     "--as-of", T0.isoformat())
    print(f"--deep-all: {base['wall']:.1f} s, deep {sc['deep_bytes'] / sc['payload_bytes']:.3f} of "
          f"{sc['payload_bytes'] / (1 << 30):.2f} GiB, logs per disk {sc['per_disk']}; peak RSS driver "
          f"{mib(base['driver'])} MiB, python worker {mib(base['python worker'])} MiB, JVM {mib(base['jvm'])} MiB",
          flush=True)
    worst = 0.0
    for day in range(7):
        r, sc = audit(roots, a.data, os.path.join(a.data, "state"), a.master, "--deep-interval", "7d",
                      "--as-of", (T0 + datetime.timedelta(days=day)).isoformat())
        worst = max(worst, r["wall"] / base["wall"])
        print(f"run {day + 1}: {r['wall']:.1f} s (x{r['wall'] / base['wall']:.2f} of --deep-all), deep "
              f"{sc['deep_bytes'] / sc['payload_bytes']:.3f} of the payload bytes, logs deep-checked per disk "
              f"{sc['per_disk']} of {sc['logs_total'] // a.disks}; peak RSS driver {mib(r['driver'])} MiB, "
              f"python worker {mib(r['python worker'])} MiB, JVM {mib(r['jvm'])} MiB; every log verified: "
              f"{sc['all_verified_within_interval']}; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"after the 7th run every log deep-checked within the interval: {sc['all_verified_within_interval']}; "
          f"slowest run x{worst:.2f} of --deep-all")
    return 0 if sc["all_verified_within_interval"] else 1


if __name__ == "__main__":
    sys.exit(main())
