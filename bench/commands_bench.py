"""The commands an operator runs, timed as whole processes against raw reads of the bytes they read
in the same rounds, after start-up; and the first fsck after a fresh install (empty numba cache).

    python -m bench.commands_bench [--dir ./bench-out/c2g20k-interleaved] [--size-gib 2] [--ledgers 20000] \\
        [--entry-bytes 1024:60000] [--layout interleaved|contiguous] [--storage index-files|rocksdb] [--writer] \\
        [--runs 3] [--before DIR] [--first-runs 1] [--no-first-run]

The bookie is built by bench/bulk_bookie.py (through bench/scan_bench.py, reused when its parameters
match): 2 GiB of entries of about 30 KB over 20,000 ledgers interleaved in the logs as a busy bookie's
(each entry given to a random ledger, ids over the 64-bit range, one ledger in eleven CRC32, the rest
CRC32C), with their locations in ``.idx`` files or, with ``--storage rocksdb``, in DbLedgerStorage's
``locations`` database. ``--layout contiguous`` (each ledger one run, ids 1..N) and ``--writer``
(bookie.writer's contiguous ledgers) flatter the scans and stay options.

Every checkout's modules are byte-compiled first, as an install leaves them. Files are dropped from
the page cache and read back once first, so every figure is from the page cache,
held the same way in every run (as reads fill it: on this machine's kernel, mapped through huge pages,
so the raw read runs at memory speed). Each round runs the raw reads in this process (a numpy XOR over
the bytes: the entry logs and the journals mapped through the same windows as the scanners, each
``.idx`` or database file read whole), then each command, each right after a process that only starts
Python and imports numpy and numba (what every scanning command loads first). A command's time "after
start-up" is its seconds minus those of its own start-up process; its ratio is the raw read's seconds /
that, median over the rounds (1.0 = as fast as the raw read). ``bookie-fsck`` is held to the raw read of
every byte it reads (logs, journals, index or database files), the others to the raw read of the logs;
the target is 0.8 and each is printed met or missed. CPU seconds (user + system) are shown beside wall
seconds, and the same ratio of CPU seconds (less sensitive to a loaded machine). The ``floor`` row
imports numpy and numba and then does the raw read of the logs in a fresh process. ``--before DIR``
runs the same commands from another source checkout too (``git archive <rev> | tar -x -C DIR``; its
numba cache warmed first), in the same rounds, for before/after figures (its commands start through
``python -P -c`` with the checkout on PYTHONPATH: about 0.3 s more CPU than the installed scripts for the
same code, so compare two checkouts with each other, not a checkout with this install).

Measured 2026-12-02 (2 GiB, 20,000 ledgers, 70,242 entries of 1-60 KB, interleaved, 5 entry logs,
journal 2.02 GiB; ``--runs 5 --no-first-run``), the machine shared with two other sessions' tests and
Spark jobs: 1-minute load 3.5-9.5, the lanes waiting for a core most of the time, so the wall ratios
say little and the CPU ratios (x cpu) are the steadier figures. Medians, seconds after start-up (the
start-up process itself 0.53-1.33 s), x = raw read / that, peak RSS:

    storage      load  command                   after s  CPU after  x     x cpu  RSS MiB
    .idx files   3.5-6  inventory ROOT            1.41     0.94       0.41  0.43   689
                        inventory --jsonl         0.91     0.96       0.36  0.38   693
                        bookie-fsck ROOT          2.03     2.12       0.40  0.38   258
                        bookie-fsck --jobs 2      1.76     1.73       0.46  0.50   256
                        floor (raw read)          0.38     0.40       1.04  0.92   155
    rocksdb      9-9.5  inventory ROOT            2.10     1.11       0.58  0.46   693
                        bookie-fsck ROOT          3.96     1.85       0.45  0.46   259
                        floor (raw read)          0.84     0.42       1.38  1.07   155

Every target (0.8) missed. Where the CPU goes, each piece on one thread in one process beside the raw
read of the same files (load 3.5-4, medians of 3): entry logs scanned with digests 0.63 s against the
raw read's 0.46 (framing alone 0.26); the journal scanned with its digest facts 0.37 against 0.34; the
.idx hierarchy listed and read 0.49 against 0.19 for reading the 19,375 files whole (16,984 folders
listed: ids spread over the 64-bit range put almost every file in a folder of its own); the RocksDB
databases (1.3 MB) 0.02. fsck's whole CPU after start-up (1.7-2.1 s) is about twice the raw read's of
the same bytes (0.8 s), so 0.8 needs both cores busy for the whole check. On the DbLedgerStorage
bookie pass 3's look-ups of the 20,000 ledgers the journal names took 0.48-0.75 s of CPU (0.08-0.13 s
now, one process each, alternated); the whole command's CPU, 8 pairs of two checkouts alternated
(load 7.7-8.7), 3.67 -> 3.05 s (median of the pairs' differences 0.72 s).

Measured 2026-12-04 on a machine alone, DbLedgerStorage, two checkouts paired and alternated (medians):
pass 3 comparing the master keys without parsing each ledger's value, and pass 5 searching the
locations in ascending order, against the code before them. A bookie of many ledgers (``--size-gib 1
--ledgers 200000 --entry-bytes 100:1000 --storage rocksdb --journal-keys-only``: 1,819,822 entries), 8
pairs: 2.44 s against 3.79 s (wall x0.65, CPU x0.72), peak RSS 519 MiB both; the 30 KB bookie, 12 pairs:
1.13 s against 1.22 s (x0.92, CPU x0.95). Then this bench on the 30 KB DbLedgerStorage bookie (``--runs 5
--no-first-run``, start-up process 0.26 s): bookie-fsck 0.51 s after start-up, x0.34 (CPU x0.25);
inventory 0.27 s, x0.33.

Measured 2026-12-04 22:30 UTC, machine alone (load ~2), ``--runs 5 --no-first-run`` on the 2 GiB bookie
of 30 KB entries and ``--size-gib 8 --runs 3 --no-first-run`` on one of 8 GiB (280,945 entries, 17
logs, 16.21 GiB with its journals), seconds after start-up (start-up process 0.23 s), medians:

    bookie  raw logs  raw all  inventory       bookie-fsck          fsck CPU after  RSS fsck / inventory
    2 GiB   0.088     0.326    0.267  x0.33   0.568  x0.57         0.97            257 / 722 MiB
    8 GiB   0.350     0.832    0.588  x0.62   1.221  x0.68         2.15            275 / 718 MiB

Measured 2026-12-05, machine alone (load 1.3-1.7), page cache dropped before the run, ``--runs 5
--no-first-run``, seconds after start-up (start-up process 0.25 s), medians, against 2026-12-04's:
the index listing streamed to the walk as it is made, the kernels loaded without numba's array
implementation, numba's runtime loaded from its cache, and inventory's side-by-side logs keeping the
digest rows of ledgers their forks decided alike:

    storage      raw logs  raw all  inventory              bookie-fsck            RSS inventory / fsck
    .idx files   0.086     0.328    0.214 x0.40 (0.267)    0.520 x0.62 (0.568)    255 / 232 MiB (722 / 257)
    rocksdb      0.083     0.161    0.178 x0.45 (0.27)     0.417 x0.38 (0.51)     255 / 234 MiB

A check has a fixed cost beside its reads: bookie-fsck of a golden bookie of a few kilobytes takes
0.22 s after start-up (0.46 s against 0.24), its own modules' imports ~0.09 s and the loads of its
21 kernels from numba's cache ~0.1 s. Four times the bytes cost 2.15x the time: past the fixed cost
the check runs at x0.77 of the raw read of what it reads (0.65 s more for 0.51 s more raw read), so the
ratio rises with the bookie's size; at 2 GiB read at memory speed (0.33 s) the fixed cost alone is
two thirds of it.

Measured 2026-12-05 evening, machine alone, with the kernels' LLVM bitcode left unparsed at their load
(diskio.lazy_link: numba parsed it, 1-2 ms a kernel, only to list the symbols it defines). The change
alone, two checkouts started the same way and paired (``farm-bench -n 15 --warmup 2``, medians): wall
0.419 s against 0.462 on the golden bookie (x0.93), 0.951 against 0.968 on the 2 GiB ``.idx`` bookie
(x0.97), 0.842 against 0.872 on its DbLedgerStorage twin (x0.95), ``inventory`` 0.533 against 0.552
(x0.97), CPU likewise. A check of the golden bookie now takes 0.11 s after start-up (its kernels'
loads 30 ms of it, 66 before). This bench after it (``--runs 5 --no-first-run``; start-up process
0.25-0.27 s), seconds after start-up, medians:

    storage      raw logs  raw all  inventory       bookie-fsck            fsck CPU after
    .idx files   0.088     0.347    0.176  x0.50    0.511-0.524  x0.66-0.67  0.95
    rocksdb      0.092     0.174    0.184  x0.47    0.424-0.440  x0.38-0.39  0.55-0.58

On ``.idx`` files the check keeps both cores busy (0.95 s of CPU in 0.51 s): 0.8 (0.43 s) needs some
0.15 s less CPU, not more overlap. Of that CPU the index listing's process takes ~0.2 s (os.scandir of
16,984 folders; the same walk by getdents64 in a jitted loop, measured alone: 0.105 s), the first
digest decisions of 20,000 ledgers ~0.035 s (sniffing, the decided table's merges), imports ~0.07 s. On
DbLedgerStorage the check uses 1.3 cores: its log scans are the longest lane (lane_timeline: the other
core idle 52% of a warm check). ``inventory`` is held by what it does before its first scan (0.08 s
of imports, the layout, the cookie) and its kernels' loads: at 2 GiB the raw read of its logs (0.09 s)
is less than those.

Measured 2026-12-05 19:00 UTC, machine alone, page cache dropped then the bookies read back: with the
entry-log scans yielding to the passes' thread and the journal lane (fsck.scans.yielding_thread: a
lower priority, per thread), no digest thread per log where the scans already fill the cores (the
walk checks each window itself, its entries in cache), the header pages a walk finds in the page cache
not asked for again (read_ahead.resident_pages: one mincore a log instead of a posix_fadvise a page:
62,919 calls -> 489 on a scrub disk's light scan) and numba typing plain arrays without numpy.ma.
Whole commands as their console scripts start them, paired against 2a1d170 (``farm-bench -n 20 --warmup
2``, medians): ``.idx`` bookie 0.657 s against 0.696 (x0.94, CPU 1.11 s against 1.16, peak RSS 177
against 217 MiB: no digest threads' windows), DbLedgerStorage twin 0.715 against 0.760 (x0.94, 183
against 219 MiB), the bookie of 100-1000-byte entries (3.64 M entries) 1.045 against 1.094 (x0.96, 3.5 M
entries/s), the golden bookie 0.398 against 0.405. This bench after them (``--runs 5 --no-first-run``,
start-up process 0.23-0.25 s), seconds after start-up, medians:

    storage      raw logs  raw all  inventory       bookie-fsck               fsck CPU after
    .idx files   0.093     0.315    0.167  x0.50    0.414-0.430  x0.73-0.76   0.77-0.78
    rocksdb      0.089     0.155    0.168  x0.47    0.359-0.361  x0.43        0.46-0.47

On ``.idx`` files the check's cores are now busy 93% of its time after start-up (0.77 s of CPU in
0.414 s): 0.8 (0.39-0.40 s) needs ~0.03 s less CPU; the passes' thread spends 0.13 s of its 0.23 s
opening, reading and closing the 19,375 index files (three system calls each; a raw read pays the same
calls). DbLedgerStorage's check, in-process and warm (bench.lane_timeline), takes 0.26 s for 0.42 s of
CPU, near its two cores' bound (0.21 s); the command adds its modules' imports and kernel loads, ~0.1
s, before it, against a raw read of 0.155 s.
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

import numpy as np

from bench import scan_bench
from bkdisk.formats.paths import CURRENT_DIR, LEDGERS_DB, LOCATIONS_DB, parse_entry_log_name

GIB = 1 << 30
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # this checkout, installed
BIN = os.path.dirname(sys.executable)
FIRST_FSCK_TARGET_S = 5.0
ENTRY_BYTES = "1024:60000"    # payloads of about 30 KB on average
SMALL_FILE_BUFFER = 1 << 20   # index files are read whole into it (9 KiB each here)
FLOOR_LABEL = "floor: python, import numpy and numba, raw read of ROOT's logs"
TARGET_AFTER_STARTUP = 0.80   # command after start-up / raw read of what it reads
STARTUP = [sys.executable, "-c", "import numpy, numba"]   # what every scanning command loads first


# A small launcher process starts each command, so that the command's peak RSS is its own and not the
# bench's (Linux carries a process's high-water mark across fork and exec).
LAUNCHER = """
import os, sys, time
t0 = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_pid, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
      usage.ru_utime + usage.ru_stime)
"""


def timed(cmd: list[str], env: dict | None = None, ok=(0,)) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB, CPU seconds) of one process, output discarded."""
    r = subprocess.run([sys.executable, "-c", LAUNCHER, *cmd], capture_output=True, text=True, env=env)
    seconds, rss, code, cpu = r.stdout.split()
    if int(code) not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {r.stderr[-500:]}")
    return float(seconds), float(rss), float(cpu)


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the guarded child does a command's work)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def rss_split(cmd: list[str], env: dict | None = None, every: float = 0.002) -> tuple[float, float]:
    """Peak anonymous and peak file-backed resident MiB of one process of the command (sampled from
    /proc every ``every`` seconds): heap and arrays apart from mapped files (entry-log windows, which
    the page cache holds anyway, and the shared libraries)."""
    anon, file, _tree_peak = rss_peaks(cmd, env, every)
    return anon, file


def rss_peaks(cmd: list[str], env: dict | None = None, every: float = 0.002) -> tuple[float, float, float]:
    """``rss_split``'s two peaks, and the peak of the resident MiB of all the command's processes
    together (a guarded command's parent and its child run at once: scan-disk's parent writes the
    rows its child scans). Pages the two share after the fork count in both: an upper bound."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    anon = file = tree = 0
    while p.poll() is None:
        together = 0
        for pid in _tree(p.pid):
            try:
                with open(f"/proc/{pid}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if line.startswith(("RssAnon", "RssFile")))
            except OSError:
                continue
            if len(fields) == 2:
                a, b = int(fields["RssAnon"].split()[0]), int(fields["RssFile"].split()[0])
                anon, file, together = max(anon, a), max(file, b), together + a + b
        tree = max(tree, together)
        time.sleep(every)
    return anon / 1024, file / 1024, tree / 1024


def command(tool: str, args: list[str], checkout: str | None = None) -> tuple[list[str], dict | None]:
    """The command line of ``tool`` (bkdisk, bookie-fsck) from this install, or from a source checkout."""
    if checkout is None:
        return [os.path.join(BIN, tool), *args], None
    module = {"bkdisk": "bkdisk.cli", "bookie-fsck": "bkdisk.fsck_cli"}[tool]
    src = f"import sys; sys.argv[0] = {tool!r}; from {module} import main; sys.exit(main())"
    # -P: the current folder (maybe this checkout) must not shadow the other one on sys.path
    return [sys.executable, "-P", "-c", src, *args], dict(os.environ, PYTHONPATH=namespace_tree(checkout))


def namespace_tree(checkout: str) -> str:
    """A folder whose ``bkdisk/`` is ``checkout`` laid out as installed: its ``bkdisk/*.py`` and a link per
    package of its ``[tool.setuptools.package-dir]``. On PYTHONPATH it comes before the editable install's
    finder, which would otherwise serve ``bkdisk.<package>`` from this install's tree, not the checkout's."""
    import tomllib
    tree = os.path.join(checkout, ".bench-namespace")
    target = os.path.join(tree, "bkdisk")
    if os.path.isdir(target):
        return tree
    with open(os.path.join(checkout, "pyproject.toml"), "rb") as f:
        mapping = dict(tomllib.load(f)["tool"]["setuptools"]["package-dir"])
    top = os.path.join(checkout, mapping.pop("bkdisk"))
    os.makedirs(target + ".part", exist_ok=True)
    for n in os.listdir(top):
        if n.endswith(".py"):
            os.symlink(os.path.join(top, n), os.path.join(target + ".part", n))
    for name, folder in mapping.items():
        os.symlink(os.path.join(checkout, folder), os.path.join(target + ".part", name.removeprefix("bkdisk.")))
    os.rename(target + ".part", target)
    return tree


def entry_logs(root: str) -> list[str]:
    """The entry logs (``<hex>.log`` in a ledger dir's ``current``; not a RocksDB database's WAL)."""
    return [p for p in _files(root, ".log") if os.path.basename(os.path.dirname(p)) == CURRENT_DIR
            and parse_entry_log_name(os.path.basename(p)) is not None]


def journals(root: str) -> list[str]:
    return _files(root, ".txn")


def index_files(root: str) -> list[str]:
    return _files(root, ".idx")


def database_files(root: str) -> list[str]:
    """Every file of DbLedgerStorage's ``locations`` and ``ledgers`` databases (none for .idx storage)."""
    return sorted(os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn
                  if os.path.basename(os.path.dirname(dp)) == CURRENT_DIR
                  and os.path.basename(dp) in (LOCATIONS_DB, LEDGERS_DB))


def _files(root: str, suffix: str) -> list[str]:
    return sorted(os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn if n.endswith(suffix))


# The least a scanning command's process does: start Python, import what every scan loads (numpy, and
# numba for the kernels' cache), and read the bytes with the raw read itself (bench.scan_bench imports
# nothing else at the top).
FLOOR = """
import sys
import numba
from bench.scan_bench import baseline
baseline(sys.argv[2:], int(sys.argv[1]))
"""


def floor_command(root: str, window: int) -> tuple[list[str], dict]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return ([sys.executable, "-c", FLOOR, str(window), *entry_logs(root)],
            dict(os.environ, PYTHONPATH=here))


def raw_read(logs: list[str], window: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one raw read of ``logs``."""
    c0 = time.process_time()
    wall = scan_bench._best(lambda: scan_bench.baseline(logs, window), 1)[0]
    return wall, time.process_time() - c0


def raw_read_small(paths: list[str]) -> float:
    """Wall seconds of a raw read of many small files (index files) as fsck reads them: open, read
    into one buffer, the same XOR, close."""
    buf = np.zeros(SMALL_FILE_BUFFER, np.uint8)
    view = memoryview(buf)
    t0 = time.perf_counter()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            while True:
                n = os.readv(fd, [view])
                np.bitwise_xor.reduce(buf[:n // 8 * 8].view(np.uint64))
                if n < len(buf):
                    break
        finally:
            os.close(fd)
    return time.perf_counter() - t0


def measure_rounds(root: str, cmds: list[tuple[str, list[str], dict | None, tuple]], runs: int, window: int,
                   startup: bool = False) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    """Rounds of (raw reads, every command once; with ``startup``, each command right after a process
    that only starts Python and imports numpy and numba, paired with it). Per round: the raw reads'
    wall and CPU seconds, of the entry logs ("logs") and of every byte fsck reads ("all": the logs
    mapped, the journals mapped, each index or database file read whole); per command its wall
    seconds "t", peak RSS "rss", CPU seconds "cpu" and its start-up's "t0", "cpu0" (0 without)."""
    logs, txns, small = entry_logs(root), journals(root), index_files(root) + database_files(root)
    scan_bench._warm([os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn])
    # Once untimed: the first mapping of pages a read has just cached costs 3-5x the later ones (the
    # commands meet them already mapped once), so it would slow the first round's raw read alone.
    raw_read(logs + txns, window)
    raw_read_small(small)
    raw: dict[str, list[float]] = {k: [] for k in ("logs", "logs cpu", "all", "all cpu")}
    res = {label: {k: [] for k in ("t", "rss", "cpu", "t0", "cpu0")} for label, *_ in cmds}
    for _ in range(runs):
        c0 = time.process_time()
        t_logs = raw_read(logs, window)[0]
        c1 = time.process_time()
        t_all = t_logs + raw_read(txns, window)[0] + raw_read_small(small)
        for k, v in zip(raw, (t_logs, c1 - c0, t_all, time.process_time() - c0)):
            raw[k].append(v)
        for label, cmd, env, ok in cmds:
            t0, _rss0, cpu0 = timed(STARTUP) if startup else (0.0, 0.0, 0.0)
            t, rss, cpu = timed(cmd, env=env, ok=ok)
            for k, v in zip(("t", "rss", "cpu", "t0", "cpu0"), (t, rss, cpu, t0, cpu0)):
                res[label][k].append(v)
    return raw, res


def measure(root: str, cmds: list[tuple[str, list[str], dict | None, tuple]], runs: int, window: int):
    """Rounds of (raw read, every command once). Per command: median seconds, median ratio to the same
    round's raw read of the entry logs, peak RSS, median CPU seconds, median ratio of CPU seconds (raw
    read's / the command's: less sensitive to a loaded machine), and median ratio to the same round's raw
    read of the entry logs, the journals and the index (or database) files. Also the median raw read of
    the entry logs and their bytes."""
    raw, res = measure_rounds(root, cmds, runs, window)
    zero = [0.0] * runs
    out = {label: (statistics.median(r["t"]), after_startup(raw["logs"], r["t"], zero), max(r["rss"]),
                   statistics.median(r["cpu"]), after_startup(raw["logs cpu"], r["cpu"], zero),
                   after_startup(raw["all"], r["t"], zero))
           for label, r in res.items()}
    return statistics.median(raw["logs"]), sum(os.path.getsize(p) for p in entry_logs(root)), out


def after_startup(raw: list[float], command: list[float], startup: list[float]) -> float:
    """Median over the rounds of raw-read seconds / (command seconds - its start-up's seconds), each
    round's figures paired (nan when a command took no longer than its start-up)."""
    return statistics.median(r / (c - s) if c > s else float("nan") for r, c, s in zip(raw, command, startup))


def reference(label: str) -> str:
    """The raw read a command is held to: fsck reads every byte ("all"), the others the entry logs."""
    return "all" if "bookie-fsck ROOT" in label else "logs"


def summary(raw: dict[str, list[float]], res: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per command: medians of its seconds, CPU seconds and both after start-up; its peak RSS; its
    ratios to its reference raw read after start-up (wall "x", CPU "x cpu") and whole ("x whole")."""
    out = {}
    for label, r in res.items():
        ref = reference(label)
        out[label] = {"t": statistics.median(r["t"]), "cpu": statistics.median(r["cpu"]), "rss": max(r["rss"]),
                      "after": statistics.median(c - s for c, s in zip(r["t"], r["t0"])),
                      "cpu after": statistics.median(c - s for c, s in zip(r["cpu"], r["cpu0"])),
                      "x": after_startup(raw[ref], r["t"], r["t0"]),
                      "x cpu": after_startup(raw[ref + " cpu"], r["cpu"], r["cpu0"]),
                      "x whole": after_startup(raw[ref], r["t"], [0.0] * len(r["t"]))}
    return out


def verdicts(rows: dict[str, dict[str, float]], target: float = TARGET_AFTER_STARTUP) -> list[str]:
    """One line per bookie-fsck and inventory row: its ratio after start-up against ``target``."""
    out = []
    for label, row in rows.items():
        if "ROOT" in label and FLOOR_LABEL not in label:
            what = "every byte it reads" if reference(label) == "all" else "the entry logs"
            ok = row["x"] >= target
            out.append(f"target {'met    ' if ok else 'MISSED '} {label}: {row['x']:.2f} x a raw read of {what} "
                       f"after start-up (>= {target:.2f}; CPU {row['x cpu']:.2f})")
    return out


def first_fsck_after_install(runs: int, checkout: str | None = None) -> list[tuple[str, float]]:
    """The demo bookie checked with an empty numba cache (as after `pip install`): without warm-up (the
    fsck compiles what it runs), and after `bkdisk warm-up` (what setup runs), whose own time is shown."""
    out = []
    with tempfile.TemporaryDirectory() as d:
        demo = os.path.join(d, "demo")
        cmd, env = command("bkdisk", ["demo", "--out", demo], checkout)
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        root = os.path.join(demo, "bookie")
        cache = os.path.join(d, "numba-cache")
        fsck, env = command("bookie-fsck", [root, "--no-progress"], checkout)
        warmup, _ = command("bkdisk", ["warm-up"], checkout)
        env = dict(env or os.environ, NUMBA_CACHE_DIR=cache, BKDISK_NUMBA_CACHE_DIR=cache)
        cold, warm_ups, after = [], [], []
        for _ in range(runs):
            shutil.rmtree(cache, ignore_errors=True)
            cold.append(timed(fsck, env=env, ok=(0, 4))[0])
            shutil.rmtree(cache, ignore_errors=True)
            warm_ups.append(timed(warmup, env=env)[0])
            after.append(timed(fsck, env=env, ok=(0, 4))[0])
        out.append(("first bookie-fsck of the demo bookie, empty numba cache, no warm-up", statistics.median(cold)))
        out.append(("bkdisk warm-up with an empty numba cache (setup runs it)", statistics.median(warm_ups)))
        out.append(("first bookie-fsck of the demo bookie after bkdisk warm-up", statistics.median(after)))
    return out


def command_table(root: str, parquet: str, checkout: str | None = None, tag: str = "") \
        -> list[tuple[str, list[str], dict | None, tuple]]:
    rows = []
    for label, tool, args, ok in (
            ("bkdisk --help", "bkdisk", ["--help"], (0,)),
            ("bookie-fsck --help", "bookie-fsck", ["--help"], (0,)),
            ("bkdisk inventory ROOT", "bkdisk", ["inventory", root], (0, 4)),
            ("bkdisk inventory ROOT --jsonl > /dev/null", "bkdisk", ["inventory", root, "--jsonl"], (0, 4)),
            ("bkdisk inventory ROOT --parquet FILE", "bkdisk", ["inventory", root, "--parquet", parquet], (0, 4)),
            ("bookie-fsck ROOT", "bookie-fsck", [root, "--no-progress"], (0, 4)),
            ("bookie-fsck ROOT --jobs 2", "bookie-fsck", [root, "--no-progress", "--jobs", "2"], (0, 4))):
        if checkout and "--parquet" in args and "--parquet" not in (
                _source(checkout, "bkdisk/inventory_cli.py") or _source(checkout, "bkdisk/inventory.py")):
            continue    # an older checkout without Parquet output
        cmd, env = command(tool, args, checkout)
        rows.append((tag + label, cmd, env, ok))
    return rows


def byte_compiled(checkout: str) -> None:
    """Every module of ``checkout`` compiled to its ``__pycache__``, as an install leaves it: a process
    that may not write bytecode (PYTHONDONTWRITEBYTECODE, set on some machines) would otherwise compile
    each module changed since its last bytecode from source, in every run, and the figures would hold
    that compilation."""
    import tomllib
    with open(os.path.join(checkout, "pyproject.toml"), "rb") as f:
        folders = sorted(set(tomllib.load(f)["tool"]["setuptools"]["package-dir"].values()))
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(os.path.join(checkout, d) for d in folders)],
                   check=True, stdout=subprocess.DEVNULL)


def _source(checkout: str, rel: str) -> str:
    try:
        with open(os.path.join(checkout, rel)) as f:
            return f.read()
    except OSError:
        return ""


def run(a) -> int:
    scan_bench.ensure_built(a)
    root = os.path.join(a.dir, "bookie")
    parquet = os.path.join(a.dir, "inventory.parquet")
    cmds = command_table(root, parquet)
    cmds.append((FLOOR_LABEL, *floor_command(root, a.window_mib << 20), (0,)))
    if a.before:
        cmds = command_table(root, parquet, a.before, "before: ") + cmds
    for checkout in (REPO, a.before) if a.before else (REPO,):
        byte_compiled(checkout)
    for _label, cmd, env, ok in cmds:     # once untimed: every checkout's numba cache filled first
        timed(cmd, env=env, ok=ok)
    raw, res = measure_rounds(root, cmds, a.runs, a.window_mib << 20, startup=True)
    rows = summary(raw, res)
    total = sum(os.path.getsize(p) for p in entry_logs(root))
    every = total + sum(os.path.getsize(p) for p in journals(root) + index_files(root) + database_files(root))
    small = len(index_files(root)) + len(database_files(root))
    print(f"bookie: {total / GIB:.2f} GiB of entry logs, {every / GIB:.2f} GiB with the journals and {small} index or "
          f"database files; {a.runs} rounds; load {os.getloadavg()[0]:.2f} (1 min)")
    print(f"raw read of the entry logs (numpy XOR over the mapped bytes) median {statistics.median(raw['logs']):.3f} s "
          f"(CPU {statistics.median(raw['logs cpu']):.3f} s); of every byte fsck reads "
          f"{statistics.median(raw['all']):.3f} s (CPU {statistics.median(raw['all cpu']):.3f} s)")
    t0s = [v for r in res.values() for v in r["t0"]]
    print(f"start-up (python -c 'import numpy, numba', run before each command): median {statistics.median(t0s):.3f} s")
    print("after: the command's seconds minus those of the start-up process run just before it; x: raw-read seconds "
          "/ seconds after start-up\n(reference: bookie-fsck against the raw read of every byte it reads, the others "
          "against the entry logs'); x cpu: the same with CPU seconds; x whole: start-up included")
    print(f"{'command (whole process; medians over the rounds)':58s} {'s':>6s} {'CPU s':>6s} {'after':>6s} "
          f"{'CPU af':>6s} {'ref':>4s} {'x':>5s} {'x cpu':>5s} {'x whole':>7s} {'peak RSS':>9s}")
    for label, row in rows.items():
        heavy = "ROOT" in label
        nan = float("nan")
        print(f"{label:58s} {row['t']:6.3f} {row['cpu']:6.2f} {row['after']:6.3f} {row['cpu after']:6.2f} "
              f"{reference(label) if heavy else '':>4s} {row['x'] if heavy else nan:5.2f} "
              f"{row['x cpu'] if heavy else nan:5.2f} {row['x whole'] if heavy else nan:7.2f} {row['rss']:6.0f} MiB")
    first = [] if a.no_first_run else first_fsck_after_install(a.first_runs)
    for label, t in first:
        print(f"{label:62s} {t:8.3f}")
    for line in verdicts(rows):
        print(line)
    if first:
        ok = first[2][1] < FIRST_FSCK_TARGET_S
        print(f"target {'met    ' if ok else 'MISSED '} first fsck after warm-up < {FIRST_FSCK_TARGET_S:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.commands_bench", description=__doc__.split("\n\n")[0])
    scan_bench.bookie_arguments(ap)
    ap.set_defaults(dir="./bench-out/c2g20k-interleaved", ledgers=20_000, digest="crc32c", idx_files=0, bulk=True,
                    entry_bytes=ENTRY_BYTES)
    ap.add_argument("--writer", dest="bulk", action="store_false",
                    help="build with bookie.writer (each ledger's entries one run, ids 1..N, --digest) instead of "
                         "bench/bulk_bookie.py's interleaved ledgers")
    ap.add_argument("--runs", type=int, default=3, help="rounds (raw read + every command); medians are printed")
    ap.add_argument("--before", default=None, metavar="DIR",
                    help="a source checkout whose commands run beside these, in the same rounds")
    ap.add_argument("--first-runs", type=int, default=1,
                    help="runs of the first fsck after install (each compiles the kernels: slow)")
    ap.add_argument("--no-first-run", action="store_true", help="skip the first-fsck-after-install figures")
    a, _others = ap.parse_known_args(argv)
    a.dir = os.path.abspath(a.dir)
    if a.before:
        a.before = os.path.abspath(a.before)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
