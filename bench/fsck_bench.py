"""bookie-fsck over the bench bookie: wall time, GB/s, ratio to a raw read of the same bytes, and an
extrapolation to a 10 GiB / 100k-ledger bookie.

    python -m bench.fsck_bench [--dir ./bench-out] [--size-gib 2] [--ledgers 12000] [--jobs 2]

The bookie is the one bench/scan_bench.py builds (and reuses). Every file is read once first so the
figures are from the page cache; the baseline is a numpy XOR reduction over the same mapped bytes.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

from bench import scan_bench

GIB = 1 << 30
GOAL_SECONDS = 60.0
GOAL_BYTES = 10 * GIB
GOAL_LEDGERS = 100_000
# Passes whose work grows with the bytes on disk, and those that grow with the number of ledgers.
BYTE_PASSES = {4, 5, 6}
LEDGER_PASSES = {2, 3, 7}


def _files(root: str) -> tuple[list[str], list[str], list[str]]:
    logs, journals, idx = [], [], []
    for dp, _dn, fn in os.walk(root):
        for n in fn:
            p = os.path.join(dp, n)
            (logs if n.endswith(".log") else journals if n.endswith(".txn") else idx if n.endswith(".idx") else [])\
                .append(p)
    return logs, journals, idx


def run(a) -> int:
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions

    scan_bench.ensure_built(a)
    root = os.path.join(a.dir, "bookie")
    logs, journals, idx = _files(root)
    data = logs + journals
    total = sum(os.path.getsize(p) for p in data)
    scan_bench._warm(data + idx)
    window = a.window_mib << 20
    t_base, _ = scan_bench._best(lambda: scan_bench.baseline(data, window), a.repeat)
    base_gbps = total / t_base / 1e9
    print(f"bookie: {len(logs)} entry logs + {len(journals)} journals = {total / GIB:.2f} GiB, {len(idx)} index files")
    print(f"raw baseline (numpy XOR over the mapped bytes): {base_gbps:6.2f} GB/s ({t_base:.2f} s)")
    dirs = discover(root)
    worst = 0
    for label, opts in (("fsck, digests verified, 1 job", CheckOptions(jobs=1)),
                        (f"fsck, digests verified, {a.jobs} jobs", CheckOptions(jobs=a.jobs)),
                        ("fsck, framing only (--no-digests)", CheckOptions(verify_digests=False, jobs=a.jobs))):
        t0 = time.perf_counter()
        rep = check_bookie(dirs, opts)
        t = time.perf_counter() - t0
        errors = len(rep.errors)
        worst = max(worst, 1 if errors else 0)
        print(f"{label:40s} {t:7.2f} s  {total / t / 1e9:6.2f} GB/s  {t_base / t * 100:5.1f} % of baseline  "
              f"errors={errors}")
        for p in rep.passes:
            print(f"    pass {p.number} {p.name:36s} {p.seconds:7.2f} s")
        if opts.jobs == a.jobs and opts.verify_digests:
            est = 0.0
            ledgers = len(idx) or a.ledgers
            for p in rep.passes:
                f = GOAL_BYTES / total if p.number in BYTE_PASSES else \
                    GOAL_LEDGERS / ledgers if p.number in LEDGER_PASSES else 1.0
                est += p.seconds * f
            print(f"    extrapolated to 10 GiB / 100k ledgers: {est:.1f} s (goal < {GOAL_SECONDS:.0f} s on 2 cores)")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fsck_bench", description=__doc__.split("\n\n")[0])
    scan_bench.bookie_arguments(ap)
    ap.add_argument("--jobs", type=int, default=2, help="fsck --jobs for the parallel runs")
    a, _others = ap.parse_known_args(argv)   # bench.run_all hands every bench the same arguments
    a.dir = os.path.abspath(a.dir)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
