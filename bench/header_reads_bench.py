"""What a light check's reads cost against a deep one's on this machine's disk, page cache cold: each
entry's header page read alone (the pages a light walk touches: every page holding an entry's first
bytes, asked of the kernel all at once as the walk asks them, then read) against every byte of the
entry logs read in order (what a deep check reads), on one bookie; then the disk's nightly scrub as
the commands run it, alternated in the same run: ``bkdisk scan-disk --state`` light (a day's seventh
deep) and ``--deep-all``.

    python -m bench.header_reads_bench --data /work/bench-data/scrub [--disk 0] [--runs 3]

The disk is one of bench.scrub_bench's (2 GiB of 30 KB entries, ``--data`` as built by it). Before each
measurement the disk's files are dropped from the page cache (bench.scrub_bench.evict). The reads are
timed in this process (no start-up: the floor of reading those bytes); the commands as processes
(start-up included), each with its CPU seconds and peak RSS (bench.commands_bench.timed).

A light check reads one page per entry wherever the entries are larger than a page, so its reads cost
what that many scattered page reads cost the device, not the bytes they hold: a bound no code changes.

Measured 2026-12-05 18:50 UTC (machine alone, 2 cores, the VM's disk), ``--runs 3``, disk-0 (71,488
entries in 33 entry logs, 2,049 MiB): the header pages, 72,123 (some headers cross a page), in
0.80-0.81 s (90 k pages/s); every byte in 0.96-1.01 s (2.1-2.2 GB/s): the light reads alone are
x0.80-0.83 of the deep reads. The commands: light 1.65-1.72 s (CPU 1.75-1.87 s, 182 MiB), --deep-all
3.56-3.80 s (CPU 3.95-4.31 s, 177 MiB; SHA-256 of every payload on one core), x0.45-0.47. In an audit
two disks share the device: its light scan tasks took 2.5-3.3 s each (a light run's event log).

The VM's disk changes speed: ninety minutes later (20:20 UTC, three more runs) it read every byte in
1.87-2.56 s (0.84-1.15 GB/s) and the header pages in the same 0.79-0.82 s (x0.31-0.44); light 1.71-1.78 s
(CPU 1.78-1.87 s), --deep-all 2.77-2.99 s (CPU 2.97-3.07 s), x0.60-0.63. Either way a light wave of two
disks needs ~1.6 s of page reads and its seventh read deep, while a --deep-all wave is bound by the
disk (4 GiB at ~1 GB/s) or by hashing 4 GiB on two cores (~3-3.5 s): ~0.55x at the least.
"""
from __future__ import annotations

import argparse
import glob
import mmap
import os
import resource
import shutil
import sys
import time

import numpy as np

from bench import scan_bench
from bench.commands_bench import timed
from bench.scrub_bench import evict

AS_OF = "2026-11-08T02:00:00+00:00"   # the eighth day of bench.scrub_bench's week: every log's offsets known


def header_pages(logs: list[str]) -> dict[str, np.ndarray]:
    """Each log's pages holding an entry's first bytes (its size prefix and header: 37 bytes)."""
    from bkdisk.diskio.mapped import page_runs
    from bkdisk.entrylogs.scan import scan_entry_log
    out = {}
    for p in logs:
        first, n = page_runs(scan_entry_log(p).entries["offset"].astype(np.int64), 37)
        out[p] = np.concatenate([np.arange(f, f + k) for f, k in zip(first.tolist(), n.tolist(), strict=True)]) \
            if len(first) else np.zeros(0, np.int64)
    return out


def read_headers(pages: dict[str, np.ndarray]) -> tuple[float, int]:
    """Seconds to read each listed page, every log's asked for at once first (as a light walk asks)."""
    from bkdisk.diskio.read_ahead import will_need
    t0 = time.perf_counter()
    fds = {p: os.open(p, os.O_RDONLY) for p in pages}
    try:
        for p, pg in pages.items():
            will_need(fds[p], pg * mmap.PAGESIZE, 1)
        for p, pg in pages.items():
            for at in (pg * mmap.PAGESIZE).tolist():
                os.pread(fds[p], 1, at)
    finally:
        for fd in fds.values():
            os.close(fd)
    return time.perf_counter() - t0, sum(len(v) for v in pages.values())


def read_all(logs: list[str]) -> tuple[float, int]:
    """Seconds to read every byte of the logs in order (bench.scan_bench's read into the page cache)."""
    t0 = time.perf_counter()
    scan_bench._warm(logs, refill=False)
    return time.perf_counter() - t0, sum(os.path.getsize(p) for p in logs)


def scan_disk(root: str, data: str, deep: bool) -> tuple[float, float, float]:
    """(wall s, peak RSS MiB, CPU s) of ``bkdisk scan-disk --state`` on a copy of the bench's state, cold."""
    state = os.path.join(data, "header-reads-state")
    shutil.rmtree(state, ignore_errors=True)
    shutil.copytree(os.path.join(data, "state"), state)
    evict([root])
    bk = os.path.join(os.path.dirname(sys.executable), "bkdisk")
    try:
        return timed([bk, "scan-disk", root, "--metadata-dir", os.path.join(data, "metadata"), "--out",
                      state + ".parquet", "--state", state, "--as-of", AS_OF,
                      *(["--deep-all"] if deep else ["--deep-interval", "7d"])], ok=(0, 4))
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="bench.scrub_bench's --data (its disks, state and metadata)")
    ap.add_argument("--disk", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    root = os.path.join(a.data, f"disk-{a.disk}")
    logs = sorted(p for p in glob.glob(os.path.join(root, "**", "*.log"), recursive=True) if os.path.getsize(p))
    if not logs or not os.path.isdir(os.path.join(a.data, "state")):
        raise SystemExit(f"{root}: no entry logs or no state; build them: python -m bench.scrub_bench --data {a.data}")
    pages = header_pages(logs)
    print(f"{root}: {len(logs)} entry logs, {sum(os.path.getsize(p) for p in logs) / 2**20:.0f} MiB, "
          f"{sum(len(v) for v in pages.values())} header pages; page cache dropped before each measurement", flush=True)
    for run in range(a.runs):
        evict([root])
        h, n = read_headers(pages)
        evict([root])
        s, nbytes = read_all(logs)
        print(f"run {run + 1}: header pages {n} in {h:.2f} s ({n / h / 1000:.1f} k pages/s), every byte "
              f"{nbytes / 2**20:.0f} MiB in {s:.2f} s ({nbytes / s / 1e9:.2f} GB/s): headers/every byte x{h / s:.2f}",
              flush=True)
        light, deep = scan_disk(root, a.data, False), scan_disk(root, a.data, True)
        print(f"       scan-disk --state light {light[0]:.2f} s (CPU {light[2]:.2f} s, {light[1]:.0f} MiB), "
              f"--deep-all {deep[0]:.2f} s (CPU {deep[2]:.2f} s, {deep[1]:.0f} MiB): x{light[0] / deep[0]:.2f}",
              flush=True)
    print(f"this process's peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
