"""The commands an operator runs, timed as whole processes (start-up included) against a raw read of the
same entry-log bytes in the same run; and the first fsck after a fresh install (empty numba cache).

    python -m bench.commands_bench [--dir ./bench-out] [--size-gib 2] [--ledgers 12000] [--runs 3]

The bookie is the one bench/scan_bench.py builds (and reuses). Files are read once first, so every
figure is from the page cache. Ratios are raw-read seconds / command seconds (1.0 = as fast as the
raw read), medians of --runs runs each.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench import scan_bench

GIB = 1 << 30
BIN = os.path.dirname(sys.executable)


# A small launcher process starts each command, so that the command's peak RSS is its own and not the
# bench's (Linux carries a process's high-water mark across fork and exec).
LAUNCHER = """
import os, sys, time
t0 = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_pid, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status))
"""


def _timed(cmd: list[str], env: dict | None = None, ok=(0,)) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one process, output discarded."""
    r = subprocess.run([sys.executable, "-c", LAUNCHER, *cmd], capture_output=True, text=True, env=env)
    seconds, rss, code = r.stdout.split()
    if int(code) not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {r.stderr[-500:]}")
    return float(seconds), float(rss)


def _median(cmd: list[str], runs: int, **kw) -> tuple[float, float]:
    times, peak = [], 0.0
    for _ in range(runs):
        t, rss = _timed(cmd, **kw)
        times.append(t)
        peak = max(peak, rss)
    return statistics.median(times), peak


def first_fsck_after_install(runs: int) -> list[tuple[str, float]]:
    """The demo bookie checked with an empty numba cache (as after `pip install`), then with `bkdisk warm-up`
    run first when the command exists."""
    out = []
    with tempfile.TemporaryDirectory() as d:
        demo = os.path.join(d, "demo")
        subprocess.run([os.path.join(BIN, "bkdisk"), "demo", "--out", demo], check=True, capture_output=True)
        root = os.path.join(demo, "bookie")
        cache = os.path.join(d, "numba-cache")
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, BKDISK_NUMBA_CACHE_DIR=cache)
        cold = []
        for _ in range(runs):
            shutil.rmtree(cache, ignore_errors=True)
            cold.append(_timed([os.path.join(BIN, "bookie-fsck"), root, "--no-progress"], env=env, ok=(0, 4))[0])
        out.append(("first bookie-fsck of the demo bookie, empty numba cache", statistics.median(cold)))
        warm = _median([os.path.join(BIN, "bookie-fsck"), root, "--no-progress"], runs, env=env, ok=(0, 4))[0]
        out.append(("bookie-fsck of the demo bookie, numba cache warm", warm))
    return out


def run(a) -> int:
    scan_bench.ensure_built(a)
    root = os.path.join(a.dir, "bookie")
    logs = sorted(os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn if n.endswith(".log"))
    total = sum(os.path.getsize(p) for p in logs)
    scan_bench._warm([os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn])
    window = a.window_mib << 20
    raw = statistics.median(scan_bench._best(lambda: scan_bench.baseline(logs, window), 1)[0] for _ in range(a.runs))
    print(f"bookie: {len(logs)} entry logs, {total / GIB:.2f} GiB; raw read (numpy XOR over the mapped bytes) "
          f"{raw:.2f} s = {total / raw / 1e9:.2f} GB/s")
    print(f"{'command (whole process, median of %d)' % a.runs:62s} {'seconds':>8s} {'GB/s':>6s} {'x raw':>6s} "
          f"{'peak RSS':>9s}")
    cmds = [
        ("bkdisk --help", [os.path.join(BIN, "bkdisk"), "--help"], (0,)),
        ("bookie-fsck --help", [os.path.join(BIN, "bookie-fsck"), "--help"], (0,)),
        ("bkdisk inventory ROOT --jsonl > /dev/null", [os.path.join(BIN, "bkdisk"), "inventory", root, "--jsonl"],
         (0, 4)),
        ("bkdisk inventory ROOT --parquet FILE",
         [os.path.join(BIN, "bkdisk"), "inventory", root, "--parquet", os.path.join(a.dir, "inventory.parquet")],
         (0, 4)),
        ("bookie-fsck ROOT", [os.path.join(BIN, "bookie-fsck"), root, "--no-progress"], (0, 4)),
        ("bookie-fsck ROOT --jobs 2", [os.path.join(BIN, "bookie-fsck"), root, "--no-progress", "--jobs", "2"],
         (0, 4)),
    ]
    for label, cmd, ok in cmds:
        t, rss = _median(cmd, a.runs, ok=ok)
        heavy = "ROOT" in label
        print(f"{label:62s} {t:8.3f} {total / t / 1e9 if heavy else float('nan'):6.2f} "
              f"{raw / t if heavy else float('nan'):6.2f} {rss:7.0f} MiB")
    for label, t in first_fsck_after_install(a.runs):
        print(f"{label:62s} {t:8.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.commands_bench", description=__doc__.split("\n\n")[0])
    scan_bench.bookie_arguments(ap)
    ap.add_argument("--runs", type=int, default=3, help="runs per command; the median is printed")
    a, _others = ap.parse_known_args(argv)
    a.dir = os.path.abspath(a.dir)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
