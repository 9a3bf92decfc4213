"""How bookie-fsck, bkdisk inventory and scan-disk scale: wall time, entries/s and peak RSS over bookies
of several entry-log sizes, entry sizes and ledger (``.idx`` file) counts, each command a whole process,
beside a raw read of the same bytes in the same rounds.

    python -m bench.scaling_bench [--base ./bench-out] [--configs 0.5:20000,2:20000,8:20000,2:200000] \\
        [--runs 3] [--rss-runs N] [--clean] [--memory-limit MiB] [--same-at MiB]

Each config ``GIB:LEDGERS`` is a bookie bench/scan_bench.py builds (all ledgers CRC32C, payloads of
1-64 KiB, no synthetic index tree) in ``<base>/s<GIB>g-<LEDGERS>``, or reuses when it is there;
``GIB:LEDGERS:MIN-MAX`` one of MIN-MAX-byte payloads built in bulk (bench/bulk_bookie.py) in
``<base>/b<GIB>g-<LEDGERS>-<MIN>-<MAX>``, its entries interleaved over ledgers as a busy bookie's are
(``GIB:LEDGERS:MIN-MAX:contiguous``: each ledger's entries one run, ids 1..N) (the entries axis:
``2:20000:100-1000,16:20000:100-1000``; many
ledgers: ``1:2000000:100-1000``, one entry a ledger, about 11 GB on disk: each ``.idx`` is a block of
data and a hole). Its files are read once first, so the figures are from the page
cache (if the machine has the memory for them: the table says how large each bookie is). ``--clean``
deletes each bookie after it is measured. Commands: ``bkdisk inventory ROOT --jsonl`` (to /dev/null),
``--parquet FILE``, ``bookie-fsck ROOT``, ``bkdisk scan-disk ROOT --out FILE`` and an audit's disk task
(what a Spark task runs for its disk, in a process without Spark) (``--commands``: some of them), each with
``--memory-limit`` when given. ``--same-at MiB`` runs each command once more at its limit and at MiB (memory
to spare) and says whether the findings and rows are the same (bench/same_outputs.py).

Measured 2026-12-04 (evening, machine otherwise idle), ``--configs 2:20000:100-1000,8:20000:100-1000,
16:20000:100-1000 --journal-keys-only --commands fsck --runs 3``: bookie-fsck 1.24 s on 2 GiB (3.64 M
entries, 2.93 M/s, 517 MiB), 3.23 s on 8 GiB (14.6 M, 4.51 M/s, 734 MiB), 7.49 s on 16 GiB (29.1 M,
3.89 M/s, 723 MiB; its raw read 1.53 s, the bookie not wholly in the page cache beside the others).
The same commands alone an hour before (10 and 6 runs, medians, each bookie warmed alone): 1.20 s
(3.04 M/s), 2.83 s (5.14 M/s), 5.69 s (5.12 M/s). The 2 GiB bookie sits at 3 M/s: its start-up
(Python, numpy, numba, the kernels loaded from the cache) is a third of its time.

Measured 2026-12-05, machine alone, ``--configs 2:20000:100-1000,1:2000000:100-1000 --journal-keys-only
--commands fsck --runs 3``: bookie-fsck 1.06 s on 2 GiB (3.64 M entries, 3.43 M/s, 486 MiB); 13.67 s on
the bookie of 2,000,000 ledgers (1.82 M entries, 11.3 GiB on disk, 712 MiB). On that bookie, where the
index listing is longest, the listing streamed to the walk as it is made against the whole listing
waited for (session start, 93693cf), whole commands as paired processes, 3 pairs: 13.39 s against
16.11 s (median), CPU 17.5 s against 18.4 s, peak RSS 700 against 716 MiB.

Measured 2026-12-05 evening, machine alone, two checkouts started the same way and paired
(``farm-bench``, medians), the code of the evening (976124f: kernels loaded without their bitcode
parsed, the first digest decisions with one sort a window, a window's ledgers looked up in a table of
the smaller set, every decided ledger or those it meets) against c11c620: bookie-fsck on the bookie of
2,000,000 ledgers (4 pairs) 11.37 s against 12.12 s (x0.93), CPU 14.55 s against 16.02 s (x0.91),
peak RSS 697 against 693 MiB; on the 2 GiB of 100-1000-byte entries over 20,000 ledgers (12 pairs)
1.180 s against 1.214 s (x0.97), CPU 2.00 s against 2.05 s (3.64 M entries: 3.1 M entries/s, the
whole command). Measured on its logs' scan alone (one thread, in a process, the page cache warm): a
window made a table of every ledger decided so far, 2,000,000 at the end, where the ledgers it holds
are found in ~115,000 searches; the first decisions took 0.83 s of the scan's 1.14 s, now 0.48 s of
0.76 s.

Measured 2026-12-06, the audit's disk task (DISK_TASK below, no metadata: each of the bookie of 2,000,000
ledgers' 1,194,865 ledgers an orphan finding), in-process with its resident set logged at each stage,
once each: peak 1,769 MiB (the findings made into one batch of ten Python lists) -> 1,309 MiB with the
findings made 65,536 at a time (c4228d9); what is left is the space accounting's (bookie/space.py: its
per-ledger lists and columns, +475 MiB over the 834 MiB it starts from), 1,263 MiB (+419) with its states
and topics held as codes (84079c3): the (log, ledger) rows and their distinct rows, the index's ledger set and
the per-ledger sums and sort names are the rest. Then (``--configs 1:2000000:100-1000 --journal-keys-only
--commands "audit disk task" --runs 1``): 917 MiB (its guarded child; 1,241 MiB the two processes' pages
counted in each) with the findings let go once they are rows, before the ledger keys and the accounting,
and the accounting's per-log arrays let go once joined and its ledgers sorted once. With the topic rows
summed per topic code, the index set searched a scope at a time, the ledger keys' LACs asked of the keys'
table and the ledgers of a metadata view decided a shape at a time (``--commands "audit disk task,audit disk
task --metadata-dir" --runs 1``, the second given the striped metadata of all 1,194,865 ledgers, read in the
task's guarded child, ~100 s of it the folder read cold): 904 MiB in 59.0 s, and 951 MiB in 175.5 s.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

from bench import commands_bench, same_outputs, scan_bench
from bkdisk.diskio.spill import DEFAULT_MEMORY_MIB

GIB = 1 << 30


def bookie_dir(base: str, gib: float, ledgers: int, sizes: str | None = None, layout: str = "interleaved",
               keys_only: bool = False) -> str:
    if sizes:
        return os.path.join(base, f"b{gib:g}g-{ledgers}-{sizes}" + ("-contiguous" if layout == "contiguous" else "")
                            + ("-keys" if keys_only else ""))
    return os.path.join(base, f"s{gib:g}g-{ledgers}")


def build_args(d: str, gib: float, ledgers: int, sizes: str | None = None,
               layout: str = "interleaved", keys_only: bool = False) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    scan_bench.bookie_arguments(ap)
    extra = ["--entry-bytes", sizes.replace("-", ":"), "--bulk", "--layout", layout] if sizes else []
    extra += ["--journal-keys-only"] if sizes and keys_only else []
    return ap.parse_args(["--dir", d, "--size-gib", str(gib), "--ledgers", str(ledgers), "--idx-files", "0",
                          "--digest", "crc32c", *extra])


def parse_configs(text: str) -> list[tuple[float, int, str | None, str]]:
    out = []
    for c in text.split(","):
        parts = c.split(":")
        out.append((float(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else None,
                    parts[3] if len(parts) > 3 else "interleaved"))
    return out


COMMANDS = ("inventory --jsonl", "inventory --parquet", "fsck", "scan-disk", "audit disk task",
            "audit disk task --metadata-dir")
# What a Spark task of `bkdisk audit` runs for its disk (audit.job.disk_task), in a process of its own
# without Spark: the guarded scan, findings and the disk's row passed on, replicas written to a file.
DISK_TASK = """
import sys
from bkdisk.audit.replica_files import write_replicas
from bkdisk.audit.rows import DiskInput, RunInfo, iter_disk
from bkdisk.diskio.spill import MemoryLimit
root, out, mib = sys.argv[1], sys.argv[2], float(sys.argv[3])
metadata = {}
if len(sys.argv) > 4:   # as a task is given it: the ledgers placing entries on its bookie, read in its guarded child
    from bkdisk.bookie.metadata_dir import bookie_metadata_dir
    metadata = lambda bookie: bookie_metadata_dir(sys.argv[4], bookie)[0]
for _batch in write_replicas(iter_disk(DiskInput(root), metadata, RunInfo.new(), memory=MemoryLimit(mib)), out):
    pass
"""
# The disk task with the bookie's metadata: bench.metadata_gen's striped folder beside the bookie
# (``python -m bench.metadata_pass_bench --matched --striped`` writes it).
STRIPED_METADATA = "striped-metadata"


def run(a) -> int:
    rows = []
    limit = ["--memory-limit", str(a.memory_limit)] if a.memory_limit else []
    for gib, ledgers, sizes, layout in parse_configs(a.configs):
        d = os.path.abspath(bookie_dir(a.base, gib, ledgers, sizes, layout, a.journal_keys_only))
        scan_bench.ensure_built(build_args(d, gib, ledgers, sizes, layout, a.journal_keys_only))
        root = os.path.join(d, "bookie")
        out = os.path.join(d, "out")
        os.makedirs(out, exist_ok=True)
        cmds = [(name, *commands_bench.command(tool, args + limit), (0, 4)) for name, tool, args in (
            ("inventory --jsonl", "bkdisk", ["inventory", root, "--jsonl"]),
            ("inventory --parquet", "bkdisk", ["inventory", root, "--parquet", os.path.join(out, "inv.parquet")]),
            ("fsck", "bookie-fsck", [root, "--no-progress"]),
            ("scan-disk", "bkdisk", ["scan-disk", root, "--out", os.path.join(out, "disk.parquet")]))
            if name in a.commands]
        if "audit disk task" in a.commands:
            task = [sys.executable, "-c", DISK_TASK, root, os.path.join(out, "replicas.parquet"),
                    str(a.memory_limit or DEFAULT_MEMORY_MIB)]
            cmds.append(("audit disk task", task, None, (0,)))
        if "audit disk task --metadata-dir" in a.commands:
            md = os.path.join(d, STRIPED_METADATA)
            if not os.path.isdir(md):
                sys.exit(f"{md}: no such folder (python -m bench.metadata_pass_bench {root} --matched --striped)")
            task = [sys.executable, "-c", DISK_TASK, root, os.path.join(out, "replicas.parquet"),
                    str(a.memory_limit or DEFAULT_MEMORY_MIB), md]
            cmds.append(("audit disk task --metadata-dir", task, None, (0,)))
        raw, total, res = commands_bench.measure(root, cmds, a.runs, a.window_mib << 20)
        # Sampled in runs of their own (sampling costs the timed runs CPU): the largest of each peak.
        rss_runs = a.runs if a.rss_runs is None else a.rss_runs
        peaks = [[commands_bench.rss_peaks(cmd, env, 0.01) for _ in range(rss_runs)] or [(0.0, 0.0, 0.0)]
                 for _n, cmd, env, _ok in cmds]
        split = {name: tuple(max(col) for col in zip(*runs)) for (name, *_c), runs in zip(cmds, peaks)}
        on_disk = sum(os.path.getsize(os.path.join(dp, n)) for dp, _dn, fn in os.walk(root) for n in fn)
        entries = scan_bench.built_entries(d)
        same = {}
        if a.same_at:
            for name, cmd, env, _ok in cmds:
                if not name.startswith("audit disk task"):
                    same[name] = same_outputs.same_at(name, cmd, env, a.memory_limit or DEFAULT_MEMORY_MIB,
                                                      a.same_at)
                    print(f"  {name}: {'same' if same[name][0] else 'DIFFERENT'} {same[name][1]} "
                          f"at --memory-limit {a.memory_limit or DEFAULT_MEMORY_MIB} and {a.same_at}", flush=True)
        rows.append((gib, ledgers, sizes or "1024-65536", entries, total, on_disk, raw, res, split, same))
        print(f"measured {d}: {total / GIB:.2f} GiB of entry logs, {entries} entries", flush=True)
        shutil.rmtree(out, ignore_errors=True)
        if a.clean:
            shutil.rmtree(d)
    print()
    limit = f" at --memory-limit {a.memory_limit}" if a.memory_limit else ""
    print(f"Whole processes, page cache warm, medians of {a.runs} rounds{limit}; "
          "raw s: the raw read of the entry logs in the same rounds; x raw = raw-read seconds / command seconds;")
    print("M/s: million entries (rows) per second; CPU s: user + system seconds of the command's processes;")
    print("RSS MiB: peak resident set of its largest process (ru_maxrss, largest of the rounds); tree MiB: peak")
    print("resident MiB of all its processes together (parent and guarded child, shared pages counted in each);")
    print("anon/file: peak anonymous (heap, arrays) and peak file-backed (mapped windows, libraries) resident MiB")
    print("of one process; both sampled every 10 ms in as many more runs (the largest shown).")
    print("x all (fsck): against the raw read of the logs, the journals and the index files.")
    if a.same_at:
        print(f"same: findings and rows at the commands' limit equal those at --memory-limit {a.same_at}.")
    print(f"{'logs GiB':>8s} {'bookie GiB':>10s} {'ledgers':>8s} {'payload B':>11s} {'entries':>10s} {'raw s':>6s} | "
          f"{'command':30s} {'s':>7s} {'CPU s':>6s} {'M/s':>6s} {'x raw':>6s} {'RSS MiB':>7s} {'tree MiB':>8s} "
          f"{'anon/file':>9s}")
    for _gib, ledgers, sizes, entries, total, on_disk, raw, res, split, same in rows:
        for name in COMMANDS:
            if name not in res:
                continue
            t, ratio, rss, cpu, _cr, ratio_all = res[name]
            an, fb, tree = split[name]
            rate = f"{entries / t / 1e6:6.2f}" if entries else "     ?"
            extra = f"  x all {ratio_all:.2f}" if name == "fsck" else ""
            if name in same:
                extra += "  same" if same[name][0] else "  DIFFERENT"
            print(f"{total / GIB:8.2f} {on_disk / GIB:10.2f} {ledgers:8d} {sizes:>11s} {entries or 0:10d} {raw:6.2f} | "
                  f"{name:30s} {t:7.2f} {cpu:6.2f} {rate} {ratio:6.2f} {rss:7.0f} {tree:8.0f} "
                  f"{f'{an:.0f}/{fb:.0f}':>9s}{extra}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scaling_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="./bench-out", help="folder of the bench bookies")
    ap.add_argument("--configs", default="0.5:20000,2:20000,8:20000,2:200000",
                    help="comma-separated GIB:LEDGERS bookies to measure")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rss-runs", type=int, default=None, metavar="N",
                    help="runs sampled for the anonymous/file-backed split (default: --runs; 0: none)")
    ap.add_argument("--same-at", type=int, default=None, metavar="MiB",
                    help="also compare each command's findings and rows with those at this memory limit")
    ap.add_argument("--window-mib", type=int, default=64, help="bytes the raw read maps at once")
    ap.add_argument("--clean", action="store_true", help="delete each bookie once measured")
    ap.add_argument("--commands", type=lambda v: v.split(","), default=list(COMMANDS), metavar="NAME,...",
                    help=f"the commands to measure, of: {', '.join(COMMANDS)}")
    ap.add_argument("--memory-limit", type=int, default=None, metavar="MiB",
                    help="give every command --memory-limit MiB (default: the commands' own, 1024)")
    ap.add_argument("--journal-keys-only", action="store_true",
                    help="bulk bookies whose journal holds the ledgers' keys only (``<dir>-keys``): a bookie whose "
                         "journals of entries were garbage-collected; 16 GiB of logs then fit the page cache")
    a, _others = ap.parse_known_args(argv)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
