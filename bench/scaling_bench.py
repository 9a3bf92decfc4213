"""How bookie-fsck, bkdisk inventory and scan-disk scale: wall time, entries/s and peak RSS over bookies
of several entry-log sizes, entry sizes and ledger (``.idx`` file) counts, each command a whole process,
beside a raw read of the same bytes in the same rounds.

    python -m bench.scaling_bench [--base ./bench-out] [--configs 0.5:20000,2:20000,8:20000,2:200000] \\
        [--runs 3] [--clean] [--memory-limit MiB]

Each config ``GIB:LEDGERS`` is a bookie bench/scan_bench.py builds (all ledgers CRC32C, payloads of
1-64 KiB, no synthetic index tree) in ``<base>/s<GIB>g-<LEDGERS>``, or reuses when it is there;
``GIB:LEDGERS:MIN-MAX`` one of MIN-MAX-byte payloads built in bulk (bench/bulk_bookie.py) in
``<base>/b<GIB>g-<LEDGERS>-<MIN>-<MAX>`` (the entries axis: ``2:20000:100-1000,16:20000:100-1000``; many
ledgers: ``2:2000000:100-1000``). Its files are read once first, so the figures are from the page
cache (if the machine has the memory for them: the table says how large each bookie is). ``--clean``
deletes each bookie after it is measured. Commands: ``bkdisk inventory ROOT --jsonl`` (to /dev/null),
``--parquet FILE``, ``bookie-fsck ROOT`` and ``bkdisk scan-disk ROOT --out FILE``, each with
``--memory-limit`` when given.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

from bench import commands_bench, scan_bench

GIB = 1 << 30


def bookie_dir(base: str, gib: float, ledgers: int, sizes: str | None = None) -> str:
    if sizes:
        return os.path.join(base, f"b{gib:g}g-{ledgers}-{sizes}")
    return os.path.join(base, f"s{gib:g}g-{ledgers}")


def build_args(d: str, gib: float, ledgers: int, sizes: str | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    scan_bench.bookie_arguments(ap)
    extra = ["--entry-bytes", sizes.replace("-", ":"), "--bulk"] if sizes else []
    return ap.parse_args(["--dir", d, "--size-gib", str(gib), "--ledgers", str(ledgers), "--idx-files", "0",
                          "--digest", "crc32c", *extra])


def parse_configs(text: str) -> list[tuple[float, int, str | None]]:
    out = []
    for c in text.split(","):
        parts = c.split(":")
        out.append((float(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else None))
    return out


COMMANDS = ("inventory --jsonl", "inventory --parquet", "fsck", "scan-disk")


def run(a) -> int:
    rows = []
    limit = ["--memory-limit", str(a.memory_limit)] if a.memory_limit else []
    for gib, ledgers, sizes in parse_configs(a.configs):
        d = os.path.abspath(bookie_dir(a.base, gib, ledgers, sizes))
        scan_bench.ensure_built(build_args(d, gib, ledgers, sizes))
        root = os.path.join(d, "bookie")
        out = os.path.join(d, "out")
        os.makedirs(out, exist_ok=True)
        cmds = [(name, *commands_bench.command(tool, args + limit), (0, 4)) for name, tool, args in (
            ("inventory --jsonl", "bkdisk", ["inventory", root, "--jsonl"]),
            ("inventory --parquet", "bkdisk", ["inventory", root, "--parquet", os.path.join(out, "inv.parquet")]),
            ("fsck", "bookie-fsck", [root, "--no-progress"]),
            ("scan-disk", "bkdisk", ["scan-disk", root, "--out", os.path.join(out, "disk.parquet")]))]
        raw, total, res = commands_bench.measure(root, cmds, a.runs, a.window_mib << 20)
        split = {name: commands_bench.rss_split(cmd, env) for name, cmd, env, _ok in cmds}
        on_disk = sum(os.path.getsize(os.path.join(dp, n)) for dp, _dn, fn in os.walk(root) for n in fn)
        entries = scan_bench.built_entries(d)
        rows.append((gib, ledgers, sizes or "1024-65536", entries, total, on_disk, raw, res, split))
        print(f"measured {d}: {total / GIB:.2f} GiB of entry logs, {entries} entries", flush=True)
        shutil.rmtree(out, ignore_errors=True)
        if a.clean:
            shutil.rmtree(d)
    print()
    limit = f" at --memory-limit {a.memory_limit}" if a.memory_limit else ""
    print(f"Whole processes, page cache warm, medians of {a.runs} rounds{limit}; "
          "raw s: the raw read of the entry logs in the same rounds; x raw = raw-read seconds / command seconds;")
    print("M/s: million entries (rows) per second; RSS MiB: peak resident set (ru_maxrss, largest of the rounds);")
    print("anon/file: peak anonymous (heap, arrays) and peak file-backed (mapped windows, libraries) resident MiB,")
    print("one more run. x all (fsck): against the raw read of the logs, the journals and the index files.")
    print(f"{'logs GiB':>8s} {'bookie GiB':>10s} {'ledgers':>8s} {'payload B':>11s} {'entries':>10s} {'raw s':>6s} | "
          f"{'command':20s} {'s':>7s} {'M/s':>6s} {'x raw':>6s} {'RSS MiB':>7s} {'anon/file':>9s}")
    for _gib, ledgers, sizes, entries, total, on_disk, raw, res, split in rows:
        for name in COMMANDS:
            t, ratio, rss, _cpu, _cr, ratio_all = res[name]
            an, fb = split[name]
            rate = f"{entries / t / 1e6:6.2f}" if entries else "     ?"
            extra = f"  x all {ratio_all:.2f}" if name == "fsck" else ""
            print(f"{total / GIB:8.2f} {on_disk / GIB:10.2f} {ledgers:8d} {sizes:>11s} {entries or 0:10d} {raw:6.2f} | "
                  f"{name:20s} {t:7.2f} {rate} {ratio:6.2f} {rss:7.0f} {f'{an:.0f}/{fb:.0f}':>9s}{extra}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scaling_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="./bench-out", help="folder of the bench bookies")
    ap.add_argument("--configs", default="0.5:20000,2:20000,8:20000,2:200000",
                    help="comma-separated GIB:LEDGERS bookies to measure")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window-mib", type=int, default=64, help="bytes the raw read maps at once")
    ap.add_argument("--clean", action="store_true", help="delete each bookie once measured")
    ap.add_argument("--memory-limit", type=int, default=None, metavar="MiB",
                    help="give every command --memory-limit MiB (default: the commands' own, 1024)")
    a, _others = ap.parse_known_args(argv)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
