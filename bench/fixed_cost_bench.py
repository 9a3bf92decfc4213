"""The best ratio a check of the 2 GiB bench bookie could reach while it loads what it loads: its fixed
cost, measured on a twin bookie of a few MiB, plus a read of the big bookie's bytes at memory speed.

bench.commands_bench holds ``bkdisk inventory`` and ``bookie-fsck`` to a ratio: a raw read of what the
command reads (one thread, a numpy XOR over the mapped bytes) / the command's seconds after start-up
(the whole process less one that only imports numpy and numba), >= 0.8. Here each command also runs
on a twin: a bookie built with the same storage, digests, entry sizes and layout, but a few MiB of
entry logs over a few ledgers. What the command spends on the twin after start-up is its fixed cost:
the modules it imports, the kernels it loads from numba's cache, the layout, cookie and index it
opens. On the big bookie it cannot take less than that fixed cost plus a read of the big bookie's
bytes on both cores (two threads, each half of the files; the one-thread read where that is faster).
``x best`` = the one-thread raw read / that sum: the ratio no arrangement of the work beats while the
command loads what it loads (loading on one core while the other reads gains nothing measurable:
the loading holds the GIL a scan needs between its windows; commands_bench's notes). ``fixed cost
allowed`` = the one-thread read / 0.8 - the two-thread read: the most the command may spend on fixed
cost for 0.8 to be reachable at all.

Run: ``python -m bench.fixed_cost_bench --runs 5`` (the ``.idx`` bookie) and ``python -m
bench.fixed_cost_bench --runs 5 --dir bench-out/c2g20k-rocksdb --storage rocksdb``; the bookies are
commands_bench's (built when missing), the twins are built beside them (``<dir>-twin``).

Measured 2026-12-07, machine alone (load 0.4), ``--runs 9``, seconds after start-up, medians (the
twin's figure is the difference of two processes of ~0.25 s each: +-0.02 s between calls):

    bookie       command    twin   raw 1  raw 2  best   x best  today  x today  fixed cost allowed
    .idx files   inventory  0.021  0.089  0.075  0.096  0.92    0.165  0.54     0.036
    .idx files   fsck       0.112  0.340  0.334  0.446  0.76    0.494  0.69     0.091
    rocksdb      inventory  0.068  0.085  0.070  0.138  0.62    0.197  0.43     0.036
    rocksdb      fsck       0.116  0.168  0.133  0.248  0.68    0.430  0.39     0.077

(another call, load ~1: .idx inventory twin 0.016-0.063, rocksdb inventory twin 0.034.) ``inventory``'s
fixed cost is 0.02-0.06 s: its gap on the big bookie is the scan's own work in a fresh process (the
first logs' scans load their kernels, ~25-35 ms; the digest types of 20,000 ledgers sniffed, ~40 ms of
a one-thread scan's 190), not its start-up. ``bookie-fsck``'s fixed cost (0.11 s: the checker's modules,
kernels, layout, cookie and metadata) is above what 0.8 allows on either storage: no faster walk can
meet that target while the check loads what it loads.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import threading
import time

from bench import commands_bench as cb
from bench import scan_bench

TWIN_GIB = 0.004      # 4 MiB of entry logs: some 140 entries of ~30 KB
TWIN_LEDGERS = 40


def _halves(paths: list[str]) -> tuple[list[str], list[str]]:
    """``paths`` split in two lists of about equal bytes (largest first, each to the lighter list)."""
    out: tuple[list[str], list[str]] = ([], [])
    size = [0, 0]
    for p in sorted(paths, key=os.path.getsize, reverse=True):
        i = size.index(min(size))
        out[i].append(p)
        size[i] += os.path.getsize(p)
    return out


def raw_read_two(mapped: list[str], small: list[str], window: int) -> float:
    """Wall seconds of the raw read of ``mapped`` (over a map) and ``small`` (read whole) on two threads,
    each given half the bytes of each."""
    halves_m, halves_s = _halves(mapped), _halves(small)

    def one(i: int) -> None:
        scan_bench.baseline(halves_m[i], window)
        cb.raw_read_small(halves_s[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def twin_of(a) -> argparse.Namespace:
    """The build arguments of ``a``'s twin: the same bookie but TWIN_GIB of logs over TWIN_LEDGERS ledgers."""
    t = copy.copy(a)
    t.dir, t.size_gib, t.ledgers = a.dir.rstrip("/") + "-twin", TWIN_GIB, TWIN_LEDGERS
    return t


def commands(root: str) -> list[tuple[str, list[str], str]]:
    """(label, command line, the raw read it is held to) of the two commands with a ratio target."""
    return [("bkdisk inventory ROOT", cb.command("bkdisk", ["inventory", root])[0], "logs"),
            ("bookie-fsck ROOT", cb.command("bookie-fsck", [root, "--no-progress"])[0], "all")]


def run(a) -> int:
    window = a.window_mib << 20
    scan_bench.ensure_built(a)
    twin = twin_of(a)
    scan_bench.ensure_built(twin)
    root, twin_root = os.path.join(a.dir, "bookie"), os.path.join(twin.dir, "bookie")
    logs, txns = cb.entry_logs(root), cb.journals(root)
    small = cb.index_files(root) + cb.database_files(root)
    reads = {"logs": (logs, []), "all": (logs + txns, small)}
    big, small_twin = commands(root), commands(twin_root)
    for _label, cmd, _ref in big + small_twin:   # once untimed: numba's cache filled, the bytes cached
        cb.timed(cmd, ok=(0, 4))
    scan_bench._warm([os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn])
    cb.raw_read(logs + txns, window)
    cb.raw_read_small(small)
    raw1: dict[str, list[float]] = {"logs": [], "all": []}
    raw2: dict[str, list[float]] = {"logs": [], "all": []}
    after: dict[str, list[float]] = {}
    rss: dict[str, float] = {}   # peak RSS MiB over the rounds
    for _ in range(a.runs):
        t_logs = cb.raw_read(logs, window)[0]
        raw1["logs"].append(t_logs)
        raw1["all"].append(t_logs + cb.raw_read(txns, window)[0] + cb.raw_read_small(small))
        for ref, (mapped, files) in reads.items():
            raw2[ref].append(raw_read_two(mapped, files, window))
        for label, cmd, _ref in [(f"{lb} (twin)", c, r) for lb, c, r in small_twin] + big:
            t0 = cb.timed(cb.STARTUP)[0]
            t, peak, _cpu = cb.timed(cmd, ok=(0, 4))
            after.setdefault(label, []).append(t - t0)
            rss[label] = max(rss.get(label, 0.0), peak)
    med = statistics.median
    print(f"bookie {root}: {sum(map(os.path.getsize, logs)) / cb.GIB:.2f} GiB of entry logs, "
          f"{len(small)} index or database files; twin {twin_root}: "
          f"{sum(map(os.path.getsize, cb.entry_logs(twin_root))) / cb.GIB * 1024:.1f} MiB of entry logs; "
          f"{a.runs} rounds; load {os.getloadavg()[0]:.2f} (1 min)")
    print("seconds after start-up (the command less a process that only imports numpy and numba, run just "
          "before it), medians;\nraw 1: the raw read on one thread (the target's yardstick); raw 2: on two "
          "threads; best: the twin's seconds + the faster raw read")
    print(f"{'command':22s} {'reads':>5s} {'twin':>6s} {'raw 1':>6s} {'raw 2':>6s} {'best':>6s} {'x best':>6s} "
          f"{'today':>6s} {'x today':>7s} {'fixed cost allowed':>18s} {'peak RSS twin/today':>20s}")
    for label, _cmd, ref in big:
        fixed, r1 = med(after[f"{label} (twin)"]), med(raw1[ref])
        r2 = min(med(raw2[ref]), r1)
        today = med(after[label])
        best = fixed + r2
        allowed = r1 / cb.TARGET_AFTER_STARTUP - r2
        print(f"{label:22s} {ref:>5s} {fixed:6.3f} {r1:6.3f} {med(raw2[ref]):6.3f} {best:6.3f} {r1 / best:6.2f} "
              f"{today:6.3f} {r1 / today:7.2f} {allowed:18.3f} {rss[f'{label} (twin)']:9.0f}/{rss[label]:5.0f} MiB")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fixed_cost_bench", description=__doc__.split("\n\n")[0])
    scan_bench.bookie_arguments(ap)
    ap.set_defaults(dir="./bench-out/c2g20k-interleaved", ledgers=20_000, digest="crc32c", idx_files=0, bulk=True,
                    entry_bytes=cb.ENTRY_BYTES)
    ap.add_argument("--runs", type=int, default=5, help="rounds (raw reads, then each command on each bookie)")
    a, _others = ap.parse_known_args(argv)
    a.dir = os.path.abspath(a.dir)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
