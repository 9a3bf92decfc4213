"""The commands an operator runs, timed as whole processes (start-up included) against a raw read of the
same entry-log bytes in the same run; and the first fsck after a fresh install (empty numba cache).

    python -m bench.commands_bench [--dir ./bench-out/c2g20k] [--size-gib 2] [--ledgers 20000] \\
        [--digest crc32c] [--idx-files 0] [--runs 3] [--before DIR] [--first-runs 1] [--no-first-run]

The bookie is the one bench/scan_bench.py builds (and reuses). Files are dropped from the page cache
and read back once first, so every figure is from the page cache, held the same way in every run (as
reads fill it: on this machine's kernel, mapped through huge pages, so the raw read runs at memory
speed; the same bytes cached as they were written read 2-3x slower, and the ratios looked better).
Each round runs the raw read (a numpy XOR over the same entry-log bytes, mapped through the same
windows as the scanners) and then every command once; a ratio is
raw-read seconds / command seconds of the same round (1.0 = as fast as the raw read), and the
table prints the medians over the rounds. Two more figures put each command beside what no process
of this stack can beat: ``x all`` is the ratio to a raw read of every byte the command reads (fsck
reads the journals and the index files as well as the entry logs: the bench bookie's journals hold
every entry, as a bookie's do until they are garbage-collected, and each ledger's index file is
9 KiB), and the ``floor`` row is a process that only imports numpy and numba (every scanning command
loads them) and then does the raw read: its ratio is the best any command of this stack can show on
these bytes. ``--before DIR`` runs the same commands from another
source checkout too (``git archive <rev> | tar -x -C DIR``; its numba cache warmed first), in the
same rounds, for before/after figures.
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

GIB = 1 << 30
BIN = os.path.dirname(sys.executable)
TARGETS = {"inventory": 0.40, "fsck": 0.20}
FIRST_FSCK_TARGET_S = 5.0
SMALL_FILE_BUFFER = 1 << 20   # index files are read whole into it (9 KiB each here)
FLOOR_LABEL = "floor: python, import numpy and numba, raw read of ROOT's logs"


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
    return _files(root, ".log")


def journals(root: str) -> list[str]:
    return _files(root, ".txn")


def index_files(root: str) -> list[str]:
    return _files(root, ".idx")


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


def measure(root: str, cmds: list[tuple[str, list[str], dict | None, tuple]], runs: int, window: int):
    """Rounds of (raw read, every command once). Per command: median seconds, median ratio to the same
    round's raw read of the entry logs, peak RSS, median CPU seconds, median ratio of CPU seconds (raw
    read's / the command's: less sensitive to a loaded machine), and median ratio to the same round's raw
    read of the entry logs, the journals and the index files. Also the median raw read of the entry
    logs and their bytes."""
    logs, txns, idx = entry_logs(root), journals(root), index_files(root)
    scan_bench._warm([os.path.join(dp, n) for dp, _dn, fn in os.walk(root) for n in fn])
    raws, res = [], {label: ([], [], [], [], [], []) for label, *_ in cmds}
    for _ in range(runs):
        raw, raw_cpu = raw_read(logs, window)
        raw_all = raw + raw_read(txns, window)[0] + raw_read_small(idx)
        raws.append(raw)
        for label, cmd, env, ok in cmds:
            t, rss, cpu = timed(cmd, env=env, ok=ok)
            for col, v in zip(res[label], (t, raw / t, rss, cpu, raw_cpu / cpu, raw_all / t)):
                col.append(v)
    out = {label: (statistics.median(t), statistics.median(r), max(p), statistics.median(c), statistics.median(rc),
                   statistics.median(ra))
           for label, (t, r, p, c, rc, ra) in res.items()}
    return statistics.median(raws), sum(os.path.getsize(p) for p in logs), out


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
    for _label, cmd, env, ok in cmds:     # once untimed: every checkout's numba cache filled first
        timed(cmd, env=env, ok=ok)
    raw, total, res = measure(root, cmds, a.runs, a.window_mib << 20)
    print(f"bookie: {total / GIB:.2f} GiB of entry logs; raw read (numpy XOR over the mapped bytes) median "
          f"{raw:.2f} s = {total / raw / 1e9:.2f} GB/s; {a.runs} rounds")
    print(f"{'command (whole process; medians over the rounds)':62s} {'seconds':>8s} {'CPU s':>6s} {'GB/s':>6s} "
          f"{'x raw':>6s} {'x raw CPU':>9s} {'x all':>6s} {'peak RSS':>9s}")
    for label, (t, ratio, rss, cpu, cpu_ratio, ratio_all) in res.items():
        heavy = "ROOT" in label
        nan = float("nan")
        # fsck reads the journals and the index files too; inventory and the floor, the entry logs only
        everything = ratio_all if "fsck ROOT" in label else ratio
        print(f"{label:62s} {t:8.3f} {cpu:6.2f} {total / t / 1e9 if heavy else nan:6.2f} "
              f"{ratio if heavy else nan:6.2f} {cpu_ratio if heavy else nan:9.2f} "
              f"{everything if heavy else nan:6.2f} {rss:7.0f} MiB")
    first = [] if a.no_first_run else first_fsck_after_install(a.first_runs)
    for label, t in first:
        print(f"{label:62s} {t:8.3f}")
    checks = [(f"inventory --jsonl >= {TARGETS['inventory']:.2f} x raw",
               res["bkdisk inventory ROOT --jsonl > /dev/null"][1] >= TARGETS["inventory"]),
              (f"bookie-fsck >= {TARGETS['fsck']:.2f} x raw", res["bookie-fsck ROOT"][1] >= TARGETS["fsck"]),
              (f"bookie-fsck >= {TARGETS['fsck']:.2f} x raw of the bytes it reads (logs, journals, index)",
               res["bookie-fsck ROOT"][5] >= TARGETS["fsck"])]
    if first:
        checks.append((f"first fsck after warm-up < {FIRST_FSCK_TARGET_S:.0f} s", first[2][1] < FIRST_FSCK_TARGET_S))
    for what, ok in checks:
        print(f"target {'met    ' if ok else 'MISSED '} {what}")
    floor = res[FLOOR_LABEL][1]
    for name, target in TARGETS.items():
        if floor < target:
            print(f"note: the {name} target ({target:.2f} x raw) is out of reach of any process that loads numpy "
                  f"and numba: the floor row reaches {floor:.2f} x raw")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.commands_bench", description=__doc__.split("\n\n")[0])
    scan_bench.bookie_arguments(ap)
    ap.set_defaults(dir="./bench-out/c2g20k", ledgers=20_000, digest="crc32c", idx_files=0)
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
