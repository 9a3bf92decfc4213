"""Where a command's CPU goes by thread: runs the command and samples, every ``--slot-ms``, the CPU
seconds of each thread of its processes whose name matches ``--process`` (default ``java``: Spark's
driver JVM, whose threads are named by their role), then prints the seconds per thread name (the
kernel keeps a name's first 15 characters; digits folded: ``Thread-3`` and ``Thread-7`` are one line)
and, with ``--timeline``, the running sums once a second.

    python -m bench.thread_cpu [--process java] [--slot-ms 50] [--timeline] -- bkdisk audit ...

What the names say of a JVM: ``Executor task i`` (launch worker-N) runs Spark's tasks (here the scan
stage's Arrow exchange with the Python workers and the table jobs); ``Thread-N`` are Py4J's threads,
the driver's calls into the JVM (building each DataFrame's plan); ``CN CompilerThre`` the JIT;
``VM Thread`` the serial collector's pauses and safepoints.

A thread that ends between two samples is counted up to its last sample: with slots of 50 ms the
figures are lower bounds of at most one slot per short-lived thread.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import time


def threads_of(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of ``pid``: its name and CPU seconds (user + system) so far; {} once it is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    tick = os.sysconf("SC_CLK_TCK")
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        end = st.rindex(")")
        fields = st[end + 2:].split()
        out[int(tid)] = (st[st.index("(") + 1:end], (int(fields[11]) + int(fields[12])) / tick)
    return out


def by_name(seen: dict[tuple[int, int], tuple[str, float]]) -> collections.Counter:
    """CPU seconds per thread name, its digits folded."""
    total: collections.Counter = collections.Counter()
    for name, cpu in seen.values():
        total[re.sub(r"\d+", "N", name)] += cpu
    return total


def matching(pattern: str) -> list[int]:
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/comm") as f:
                    if re.search(pattern, f.read()):
                        pids.append(int(p))
            except OSError:
                pass
    return pids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.thread_cpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--process", default="java", help="regular expression on the processes' names")
    ap.add_argument("--slot-ms", type=float, default=50)
    ap.add_argument("--timeline", action="store_true")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("give the command after --")
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    seen: dict[tuple[int, int], tuple[str, float]] = {}
    last = t0
    while p.poll() is None:
        for pid in matching(a.process):
            if pid != os.getpid():
                seen.update({(pid, tid): v for tid, v in threads_of(pid).items()})
        now = time.perf_counter()
        if a.timeline and now - last >= 1:
            last = now
            print(f"{now - t0:6.1f} s  " + "  ".join(f"{k} {v:.1f}" for k, v in by_name(seen).most_common(5)),
                  flush=True)
        time.sleep(a.slot_ms / 1000)
    wall = time.perf_counter() - t0
    total = by_name(seen)
    print(f"{' '.join(cmd[:2])}: exit {p.returncode}, {wall:.1f} s wall; CPU of the {a.process!r} processes' "
          f"threads {sum(total.values()):.1f} s")
    for name, cpu in total.most_common(15):
        print(f"{cpu:8.2f} s  {name}")
    return 0 if p.returncode in (0, 4) else p.returncode


if __name__ == "__main__":
    sys.exit(main())
