"""bookie-fsck on a cold disk, as a production bookie's is (no page cache holds it), against reads of the
same bytes in the same rounds, each after its files are dropped from the page cache (POSIX_FADV_DONTNEED
on those files only).

    python -m bench.cold_bench [--dir ./bench-out/c2g20k-interleaved] [--runs 3] [--before CHECKOUT]

The bytes are every file bookie-fsck reads: the entry logs, the journals, the ``.idx`` files or the
DbLedgerStorage databases (bench.commands_bench's lists). Two reads of them, in this process:
``sequential`` reads each file in turn, 8 MiB at a time (what ``cat`` does: the kernel's own read-ahead
only); ``asked`` first asks the kernel for every file (POSIX_FADV_WILLNEED, 256 MiB ahead of the reader
at most) and reads them as they come, what the device gives with many requests in flight. Then
``bookie-fsck ROOT`` as a process (start-up included), and with ``--before`` the same command from
another source checkout (``git archive <rev> | tar -x -C DIR``), started as bench.commands_bench starts
one. Per command: wall seconds, CPU seconds and peak RSS, medians over the rounds, and its time against
each read.

Measured 2026-12-05, machine alone (load 1.1-1.7), ``--runs 3 --before`` a checkout of a833697 (before
the index files of a block were asked for at once and the entry logs' pages ahead of their walks);
the VM's disk gives ~0.7-1.0 GB/s to one reader and ~1.3-2.6 GB/s with many requests in flight, and
its speed varies from one run of the bench to the next (compare within a row):

    bookie                                   GiB   sequential  asked   bookie-fsck        before
    2 GiB of 30 KB entries, .idx files       4.18  6.28 s      2.17 s  2.28 s (215 MiB)   3.32 s (196 MiB)
    the same in DbLedgerStorage              4.02  5.42 s      1.66 s  2.13 s (206 MiB)   2.14 s (203 MiB)
    2 GiB of 100-1000-byte entries, .idx     2.19  2.41 s      1.86 s  2.28 s (490 MiB)   3.04 s (490 MiB)

(GiB: with the journals; 19,375 and 20,000 index files.) A check of a cold ``.idx`` bookie takes
0.7-0.75 of its time before, and less than reading its files one after another: the index files, a
few pages each, were read one device round trip at a time. On DbLedgerStorage nothing changed (its
few large files, the logs and a 2 GiB journal, were read with the kernel's read-ahead already); what
keeps it at 0.78 of the asked read was not found.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

from bench import commands_bench as cb
from bench.scrub_bench import evict
from bkdisk.diskio import read_ahead

READ = 8 << 20
AHEAD = 256 << 20


def fsck_files(root: str) -> list[str]:
    return cb.entry_logs(root) + cb.journals(root) + cb.index_files(root) + cb.database_files(root)


def sequential_read(paths: list[str]) -> float:
    """Seconds to read every file in turn, READ bytes at a time."""
    buf = bytearray(READ)
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    return time.perf_counter() - t0


def asked_read(paths: list[str]) -> float:
    """Seconds to read every file in turn while a thread asks for the files ahead of the reader
    (POSIX_FADV_WILLNEED, at most AHEAD bytes ahead)."""
    sizes = [os.path.getsize(p) for p in paths]
    done = [0]   # bytes the reader has read
    cond = threading.Condition()

    def ask() -> None:
        asked = 0
        for p, n in zip(paths, sizes, strict=True):
            with cond:
                while asked - done[0] > AHEAD:
                    cond.wait()
            fd = os.open(p, os.O_RDONLY)
            try:
                read_ahead.ask_range(fd, 0, n)   # (a window at a time: the kernel cuts one request to it)
            finally:
                os.close(fd)
            asked += n

    buf = bytearray(READ)
    t0 = time.perf_counter()
    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    for p, n in zip(paths, sizes, strict=True):
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
        with cond:
            done[0] += n
            cond.notify()
    asker.join()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cold_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="./bench-out/c2g20k-interleaved", help="a bookie (built by bench.commands_bench)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", default=None, metavar="CHECKOUT", help="also bookie-fsck from this source checkout")
    a = ap.parse_args(argv)
    root = os.path.abspath(a.dir)
    paths = fsck_files(root)
    if not paths:
        raise SystemExit(f"{root}: no entry logs, journals or index files: build it with bench.commands_bench")
    total = sum(os.path.getsize(p) for p in paths)
    cmds = {"bookie-fsck ROOT": cb.command("bookie-fsck", [root])}
    if a.before:
        cb.byte_compiled(a.before)
        cmds["bookie-fsck ROOT (before)"] = cb.command("bookie-fsck", [root], a.before)
    print(f"{root}: {len(paths)} files, {total / (1 << 30):.2f} GiB; {a.runs} rounds; load "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    reads: dict[str, list[float]] = {"sequential": [], "asked": []}
    res: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cmds}
    for _ in range(a.runs):
        for name, read in (("sequential", sequential_read), ("asked", asked_read)):
            evict([root])
            reads[name].append(read(paths))
        for name, (cmd, env) in cmds.items():
            evict([root])
            res[name].append(cb.timed(cmd, env, ok=(0, 4)))
    med = {k: statistics.median(v) for k, v in reads.items()}
    for k, v in med.items():
        print(f"{k + ' read':28s} {v:7.2f} s  {total / v / 1e9:5.2f} GB/s")
    for name, rows in res.items():
        wall, rss, cpu = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"{name:28s} {wall:7.2f} s  CPU {cpu:5.2f} s  peak RSS {rss:5.0f} MiB  x{med['sequential'] / wall:.2f} "
              f"of the sequential read, x{med['asked'] / wall:.2f} of the asked read")
    return 0


if __name__ == "__main__":
    sys.exit(main())
