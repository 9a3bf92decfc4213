"""How bookie-fsck and bkdisk inventory scale: wall time and peak RSS over bookies of several entry-log
sizes and ledger (``.idx`` file) counts, each command a whole process, beside a raw read of the same bytes.

    python -m bench.scaling_bench [--base ./bench-out] [--configs 0.5:20000,2:20000,8:20000,2:200000] \\
        [--runs 3] [--clean]

Each config ``GIB:LEDGERS`` is a bookie bench/scan_bench.py builds (all ledgers CRC32C, no synthetic
index tree) in ``<base>/s<GIB>g-<LEDGERS>``, or reuses when it is there. Its files are read once
first, so the figures are from the page cache (if the machine has the memory for them: the table
says how large each bookie is). ``--clean`` deletes each bookie after it is measured.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

from bench import commands_bench, scan_bench

GIB = 1 << 30


def bookie_dir(base: str, gib: float, ledgers: int) -> str:
    return os.path.join(base, f"s{gib:g}g-{ledgers}")


def build_args(d: str, gib: float, ledgers: int) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    scan_bench.bookie_arguments(ap)
    return ap.parse_args(["--dir", d, "--size-gib", str(gib), "--ledgers", str(ledgers), "--idx-files", "0",
                          "--digest", "crc32c"])


def run(a) -> int:
    configs = [(float(g), int(n)) for g, n in (c.split(":") for c in a.configs.split(","))]
    rows = []
    for gib, ledgers in configs:
        d = os.path.abspath(bookie_dir(a.base, gib, ledgers))
        scan_bench.ensure_built(build_args(d, gib, ledgers))
        root = os.path.join(d, "bookie")
        cmds = [(name, *commands_bench.command(tool, args), (0, 4)) for name, tool, args in (
            ("inventory", "bkdisk", ["inventory", root, "--jsonl"]),
            ("fsck", "bookie-fsck", [root, "--no-progress"]))]
        raw, total, res = commands_bench.measure(root, cmds, a.runs, a.window_mib << 20)
        split = {name: commands_bench.rss_split(cmd, env) for name, cmd, env, _ok in cmds}
        on_disk = sum(os.path.getsize(os.path.join(dp, n)) for dp, _dn, fn in os.walk(root) for n in fn)
        rows.append((gib, ledgers, total, on_disk, raw, res["inventory"], res["fsck"], split))
        print(f"measured {d}: {total / GIB:.2f} GiB of entry logs", flush=True)
        if a.clean:
            shutil.rmtree(d)
    print()
    print(f"Whole processes, page cache warm, medians of {a.runs} rounds; x raw = raw-read seconds / command seconds "
          f"of the same round;")
    print("x all: fsck against the raw read of the entry logs, the journals and the index files: the bytes it reads.")
    print("RSS MiB: peak resident set (ru_maxrss); anon/file: peak anonymous (heap, arrays) and peak file-backed")
    print("(mapped entry-log windows and shared libraries) resident MiB of the process doing the work, one more run.")
    print(f"{'logs GiB':>8s} {'bookie GiB':>10s} {'ledgers':>8s} {'raw s':>6s} | {'inventory s':>11s} {'x raw':>6s} "
          f"{'s/GiB':>6s} {'RSS MiB':>7s} {'anon/file':>9s} | {'fsck s':>7s} {'x raw':>6s} {'x all':>6s} {'s/GiB':>6s} "
          f"{'RSS MiB':>7s} {'anon/file':>9s}")
    for gib, ledgers, total, on_disk, raw, inv, fsck, split in rows:
        g = total / GIB
        ia, iff = split["inventory"]
        fa, ff = split["fsck"]
        print(f"{g:8.2f} {on_disk / GIB:10.2f} {ledgers:8d} {raw:6.2f} | {inv[0]:11.2f} {inv[1]:6.2f} "
              f"{inv[0] / g:6.2f} {inv[2]:7.0f} {f'{ia:.0f}/{iff:.0f}':>9s} | {fsck[0]:7.2f} {fsck[1]:6.2f} "
              f"{fsck[5]:6.2f} {fsck[0] / g:6.2f} {fsck[2]:7.0f} {f'{fa:.0f}/{ff:.0f}':>9s}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scaling_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="./bench-out", help="folder of the bench bookies")
    ap.add_argument("--configs", default="0.5:20000,2:20000,8:20000,2:200000",
                    help="comma-separated GIB:LEDGERS bookies to measure")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window-mib", type=int, default=64, help="bytes the raw read maps at once")
    ap.add_argument("--clean", action="store_true", help="delete each bookie once measured")
    a, _others = ap.parse_known_args(argv)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
