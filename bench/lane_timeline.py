"""Where a check's time goes: each lane's busy time and the idle share of each core, over one bookie-fsck
check run in this process (as the command runs it: ``--jobs``, the index listed ahead by a process of its
own), beside a raw read of every byte the check reads, in the same run.

    python -m bench.lane_timeline ROOT [--jobs 2] [--slot-ms 100] [--memory-limit MiB] [--warm]

``--warm`` checks once first, unmeasured, so the timeline is of a check past its fixed costs.

A sampler reads each thread's scheduler counters (``/proc/self/task/*/schedstat``: nanoseconds on a
core, nanoseconds ready but waiting for one) and those of the process listing the index ahead, every
slot. Lanes are named by thread: ``passes`` (the thread that runs passes 1-7), ``lane 1`` and ``lane 2``
(the background lanes: the journal scans; the entry-log scans then the journals' digests), ``log scans``
(the entry-log scan threads), ``joins`` (pass 5's range joins), ``routing`` (the second half of pass 5's
routing of locations, the lane that plans the join doing the first), ``listing`` (the process listing the
index). ``wait`` is the time a lane was ready to run but had no core: on a machine shared with other
work it says how much of the wall time is not this check's. A core's idle share is the part of the
check's wall time it did not run the check, the busier core counted first; the strip per lane shows
each slot as ``#`` (busy most of it), ``+`` (part), ``.`` (a little) or blank.

Measured 2026-12-02 on the 2 GiB interleaved bookie (``bench.scaling_bench --configs 2:20000:100-1000``:
3.64 M entries, 20,000 ledgers), the machine shared (1-minute load 5-7 on its 2 cores: the lanes waited
for a core 3-5x their busy time, so the wall times and idle shares say little). CPU seconds of one
thread per step, ``--jobs 1``, three runs alternated with the code before: the index walk 0.8-1.2, the
entry-log walks 0.9-1.4 (their digest thread apart), the journal walks 0.7-1.1, pass 5's joins 0.84-0.96
(before 0.97-1.5: the lookups now ask for their rows ahead), pass 4's ledgers-map check 0.075-0.093
(before 0.22-0.33: entries counted into the map's rows, not sorted). The whole command (``bookie-fsck
ROOT``, 8 runs paired with the code before): CPU 6.45 s against 6.62 (user 0.86 of before, pair by pair),
wall 10.8 s against 10.6 (the load), peak RSS 724 MiB both; 0.34 M entries/s.

Measured 2026-12-05 on the 2 GiB bookie of 30 KB entries (bench.commands_bench's, 19,375 ``.idx`` files
in 16,984 folders), machine alone, ``--slot-ms 20 --warm``: with the whole listing waited for, the
passes' thread sat idle for the listing's 0.27-0.32 s and then read the index alone for 0.25 s, the
other core idle 46-55% of the 0.56-0.58 s; with the listing streamed a block at a time, the reading
overlaps it (other core idle 36-40%), the same 0.55-0.57 s: the check is bound by its CPU (0.9 s of
it, the lanes waiting for a core 1.1 s). The whole command, page cache dropped before each run
(``echo 3 > /proc/sys/vm/drop_caches``; two runs each, alternated): 4.35 and 4.62 s against 5.24 and
5.31 s with the whole listing waited for; page cache warm, 12 pairs (start-up included): 0.97 s
against 1.00 s median, CPU 1.55 s against 1.57 s.

The check runs with the settings the command makes for itself (diskio.config: collector_eased, numpy's
arrays in small pages); its user and system seconds and minor page faults are printed beside its wall
time. Small pages, measured the same day on the same bookie (load 6-7), the whole command alternated
with the code before (medians): 6 pairs, system 1.77 -> 1.13 s, user 3.52 -> 3.17 s, minor faults 99 k
-> 214 k (4 KiB pages where they were 2 MiB), peak RSS 725 -> 713 MiB; spilled (``--memory-limit
300``), 3 pairs, system 1.90 -> 1.74 s, user 2.95 -> 2.91 s, faults 116 k -> 283 k, RSS 414 -> 410 MiB;
``--jobs 1`` (load 4-5), 3 pairs, a wash: system 1.03 -> 1.30 s, user 3.54 -> 3.27 s, RSS 650 -> 664 MiB
(alone, a thread zero-fills huge pages no slower than small ones; the cost shows with the lanes at once).
This timeline then (``--jobs 2``): 4.56 s wall, user 2.40 s, system 0.73 s, 195 k faults.

Measured 2026-12-05 19:00 UTC on the 2 GiB bookie of 30 KB entries, machine alone, ``--slot-ms 10
--warm``. Before the entry-log scans yielded: 0.52 s, the listing's process to 0.34 s, the passes'
thread reading the index alone from 0.43 s to the end, the lanes waiting 1.04 s for a core. With the
scan threads at a lower priority and no digest thread per log (fsck.scans): 0.43 s, the listing done
at 0.22 s and the journal lane at 0.27 s, the log scans running on both cores from ~0.2 s to 0.40 s,
0.73 s of CPU in all (other core idle 32%). On its DbLedgerStorage twin: 0.26 s for 0.42 s of CPU,
pass 3 waiting for the journal lane to 0.14 s, the log scans done at 0.23 s.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time
from collections import defaultdict

from bench import commands_bench, scan_bench

GIB = 1 << 30


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class Sampler(threading.Thread):
    """Every ``slot`` seconds: per lane, the nanoseconds run and waited since the last sample."""

    def __init__(self, slot: float):
        super().__init__(name="bench-sampler", daemon=True)
        self.slot, self.done = slot, threading.Event()
        self.last: dict[tuple[int, int, int], tuple[int, int]] = {}
        self.names: dict[tuple[int, int, int], str] = {}
        self.slots: list[tuple[float, dict[str, tuple[int, int]]]] = []
        self.lanes_seen = 0

    def _lane(self, key: tuple[int, int, int], thread: threading.Thread | None) -> str | None:
        """The lane of a thread (``key``: process, thread id, and the Python thread's identity, as the
        system gives a finished thread's id to a later one)."""
        if key not in self.names:
            name = thread.name if thread is not None else ""
            if key[0] != os.getpid():
                self.names[key] = "listing"
            elif thread is threading.main_thread():
                self.names[key] = "passes"
            elif name.startswith("fsck-scans"):
                self.lanes_seen += 1
                self.names[key] = f"lane {self.lanes_seen}"
            elif name.startswith("ThreadPoolExec"):
                self.names[key] = "log scans"
            elif name.startswith("fsck-join"):
                self.names[key] = "joins"
            elif name.startswith("fsck-routing"):
                self.names[key] = "routing"
            elif name.startswith("bench-sampler"):
                self.names[key] = ""
            else:
                self.names[key] = "other"
        return self.names[key] or None

    def _children(self) -> list[int]:
        out = []
        for tid in os.listdir("/proc/self/task"):
            out += [int(p) for p in (_read(f"/proc/self/task/{tid}/children") or "").split()]
        return out

    def sample(self) -> None:
        now = time.perf_counter()
        got: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
        threads = {t.native_id: t for t in threading.enumerate()}
        for pid in [os.getpid(), *self._children()]:
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                text = _read(f"/proc/{pid}/task/{tid}/schedstat")
                thread = threads.get(tid) if pid == os.getpid() else None
                key = (pid, tid, id(thread))
                lane = self._lane(key, thread) if text else None
                if lane is None or text is None:
                    continue
                run, wait = (int(v) for v in text.split()[:2])
                r0, w0 = self.last.get(key, (0, 0))
                self.last[key] = (run, wait)
                r, w = got[lane]
                got[lane] = (r + run - r0, w + wait - w0)
        self.slots.append((now, dict(got)))

    def run(self) -> None:
        while not self.done.wait(self.slot):
            self.sample()


def strip(fracs: list[float]) -> str:
    return "".join("#" if f > 0.75 else "+" if f > 0.25 else "." if f > 0.02 else " " for f in fracs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lane_timeline", description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="the bookie to check")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--slot-ms", type=float, default=100.0)
    ap.add_argument("--memory-limit", type=int, default=None, metavar="MiB")
    ap.add_argument("--window-mib", type=int, default=64, help="bytes the raw read maps at once")
    ap.add_argument("--warm", action="store_true",
                    help="check once first, unmeasured: the figures are then of a check past its fixed costs "
                         "(modules imported, kernels loaded)")
    a = ap.parse_args(argv)
    root = os.path.abspath(a.root)
    logs, txns, idx = commands_bench.entry_logs(root), commands_bench.journals(root), commands_bench.index_files(root)
    scan_bench._warm([os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn])
    raw_logs = commands_bench.raw_read(logs, a.window_mib << 20)[0]
    raw_all = raw_logs + commands_bench.raw_read(txns, a.window_mib << 20)[0] + commands_bench.raw_read_small(idx)

    from bkdisk.bookie.layout import discover
    from bkdisk.diskio.config import arrays_in_small_pages, collector_eased, freeze_loaded
    from bkdisk.diskio.spill import MemoryLimit, SpillFolder
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    from bkdisk.indexfiles.listing_ahead import ListingAhead
    memory = MemoryLimit(a.memory_limit) if a.memory_limit else MemoryLimit()
    dirs = discover(root)
    if a.warm:
        check_bookie(dirs, CheckOptions(jobs=a.jobs, memory=memory)).close()
    sampler = Sampler(a.slot_ms / 1000)
    sampler.sample()   # (the counters so far: the slots count from here)
    sampler.slots.clear()
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    sampler.start()
    ahead = ListingAhead.start(dirs.effective_index_dirs, SpillFolder(memory, dirs.all_dirs).root) \
        if a.jobs > 1 and dirs.storage_kind == "index-files" else None
    try:
        with collector_eased():   # the process-wide settings the command checks with
            freeze_loaded()
            arrays_in_small_pages()
            report = check_bookie(dirs, CheckOptions(jobs=a.jobs, memory=memory, index_listing=ahead))
    finally:
        if ahead is not None:
            ahead.close()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    user, system, faults = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt
    cpu = user + system
    sampler.done.set()
    sampler.join()
    sampler.sample()
    report.close()

    lanes = sorted({lane for _t, got in sampler.slots for lane in got},
                   key=lambda n: ("passes", "listing", "lane 1", "lane 2", "log scans", "joins").index(n)
                   if n in ("passes", "listing", "lane 1", "lane 2", "log scans", "joins") else 9)
    prev = t0
    per_slot: list[tuple[float, dict[str, tuple[int, int]]]] = []
    for t, got in sampler.slots:
        per_slot.append((max(t - prev, 1e-9), got))
        prev = t
    entries = report.stats.get("entries", 0)
    print(f"{root}: {report.stats.get('entry_log_bytes', 0) / GIB:.2f} GiB of entry logs, {entries} entries, "
          f"{len(idx)} .idx files, {sum(os.path.getsize(p) for p in txns) / GIB:.2f} GiB of journals; --jobs {a.jobs}")
    print(f"check {wall:.2f} s wall, {cpu:.2f} s CPU of this process (user {user:.2f}, system {system:.2f}; "
          f"{faults} minor page faults; {entries / wall / 1e6:.2f} M entries/s); "
          f"raw read of the logs {raw_logs:.2f} s, of every byte it reads {raw_all:.2f} s (x all {raw_all / wall:.2f})")
    print("passes (wall s, in order on the passes' thread): " +
          ", ".join(f"{p.number} {p.seconds:.2f}" for p in report.passes))
    print(f"{'lane':10s} {'busy s':>7s} {'wait s':>7s} {'first s':>7s} {'last s':>7s}  "
          f"timeline ({a.slot_ms:g} ms a slot)")
    for lane in lanes:
        fr = [got.get(lane, (0, 0))[0] / 1e9 / dt for dt, got in per_slot]
        busy = sum(got.get(lane, (0, 0))[0] for _dt, got in per_slot) / 1e9
        wait = sum(got.get(lane, (0, 0))[1] for _dt, got in per_slot) / 1e9
        active = [i for i, f in enumerate(fr) if f > 0.02]
        first = sum(dt for dt, _g in per_slot[:active[0]]) if active else 0.0
        last = sum(dt for dt, _g in per_slot[:active[-1] + 1]) if active else 0.0
        print(f"{lane:10s} {busy:7.2f} {wait:7.2f} {first:7.2f} {last:7.2f}  |{strip(fr)}|")
    total = [sum(r for r, _w in got.values()) / 1e9 / dt for dt, got in per_slot]
    span = sum(dt for dt, _g in per_slot)
    core1 = sum(min(1.0, c) * dt for c, (dt, _g) in zip(total, per_slot)) / span
    core2 = sum(min(1.0, max(0.0, c - 1)) * dt for c, (dt, _g) in zip(total, per_slot)) / span
    waited = sum(w for _dt, got in per_slot for _r, w in got.values()) / 1e9
    print(f"{'all':10s} {sum(c * dt for c, (dt, _g) in zip(total, per_slot)):7.2f} {waited:7.2f} "
          f"{'':7s} {'':7s}  |{strip([c / 2 for c in total])}|")
    print(f"idle share of the check's wall time: busier core {1 - core1:.0%}, other core {1 - core2:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
