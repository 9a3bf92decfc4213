"""The ``.idx`` hierarchy walk at scale: files/s and peak RSS of each walker, on 2-level and 4-level trees.

    python -m bench.index_walk_bench [--dir /tmp/idxbench] [--files 20000 200000] [--page 8192] [--repeat 3]
                                     [--reference] [--keep] [--baseline CHECKOUT] [--baseline-python PYTHON]
                                     [--root LEDGER_DIR ...]

Builds, for each ``--files`` count, a 2-level tree (scope-0 ledgers numbered from 1, as a bookie's
ledger id generator hands them out) and a 4-level tree (8 scopes of BP-35 ledgers), every file a
version-1 header and one ``--page`` page holding 1-16 locations, as BookKeeper's pageSize writes them.
Each walker runs in its own child process, once to warm the page cache and the compiled kernels,
then ``--repeat`` times; the table shows the median time and the peak RSS of those runs (VmHWM
reset after the warm-up on Linux, so a first run's compilation does not count).

``--root`` walks existing ledger dirs (each holding ``current/``, e.g. a bench bookie's ``ledgers``)
instead of building trees.

Walkers: ``walk`` (indexfiles.scan.walk_index_dirs with its locations given a sink as fsck gives it:
LOCATION_SHARE of the default memory limit); ``list+read`` (os.scandir listing and one read per
file, no decoding: the floor for Python I/O); ``reference`` (walk_index_dirs_reference, the
pure-Python twin, with ``--reference``: slow). ``--baseline`` names another checkout (``git archive
<rev> | tar -x -C DIR``) whose walkers run beside these, tree by tree in the same run; a checkout
whose walk_index_dirs takes a ``native=`` argument is measured both ways (``walk native`` / ``walk
python``). ``--baseline-python`` names another installed checkout's interpreter (its virtualenv's
``python``), which runs this file's walkers on its own packages, in turn with these. The table gives
each walker's median wall and CPU seconds (the process's user + system time of the walk). The trees
are deleted unless ``--keep``.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

MIB = 1 << 20
SCOPES = 8


# --- building ------------------------------------------------------------------------------
def build(tree: str, files: int, levels: int, page: int) -> None:
    """``files`` index files below ``tree/current`` in the 2- or 4-level hierarchy."""
    from bkdisk.formats.ids import LedgerId
    from bkdisk.formats.index import IndexHeader
    from bkdisk.formats.paths import index_relpath
    from bkdisk.indexfiles.writer import index_bytes

    hdr = IndexHeader(1, bytes(20), 0, None)
    made: set[str] = set()
    bodies = [index_bytes(hdr, (np.arange(1, 2 + k, dtype=np.uint64) << np.uint64(32)) | np.uint64(1028), page)
              for k in range(16)]
    for i in range(files):
        lid = LedgerId(0, 1 + i) if levels == 2 else LedgerId(1 + i % SCOPES, 1 + i // SCOPES)
        p = os.path.join(tree, "current", index_relpath(lid))
        d = os.path.dirname(p)
        if d not in made:
            os.makedirs(d, exist_ok=True)
            made.add(d)
        with open(p, "wb") as f:
            f.write(bodies[i % 16])


# --- walkers (run in a child) ----------------------------------------------------------------
def _list_and_read(dirs: list[str]) -> int:
    """os.scandir every folder below ``<dir>/current`` and read every ``.idx`` once: the I/O floor."""
    n = 0
    stack = [os.path.join(d, "current") for d in dirs]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.name.endswith(".idx"):
                    with open(e.path, "rb", buffering=0) as f:
                        f.read()
                    n += 1
    return n


def _walkers() -> dict[str, object]:
    from bkdisk.indexfiles.reference_walk import walk_index_dirs_reference
    from bkdisk.indexfiles.scan import walk_index_dirs

    out: dict[str, object] = {}
    params = inspect.signature(walk_index_dirs).parameters
    if "native" in params:   # an older checkout
        out["walk native"] = lambda d: len(walk_index_dirs(d, native=True).files)
        out["walk python"] = lambda d: len(walk_index_dirs(d, native=False).files)
    elif "sink" in params:
        out["walk"] = lambda d: len(walk_index_dirs(d, sink=_fsck_sink()).files)
    else:
        out["walk"] = lambda d: len(walk_index_dirs(d).files)
    out["list+read"] = _list_and_read
    out["reference"] = lambda d: len(walk_index_dirs_reference(d).files)
    return out


def _fsck_sink():
    """The sink fsck gives the walk's locations (fsck.scans.index_inventory)."""
    from bkdisk.diskio.chunked_array import ChunkedArray
    from bkdisk.diskio.spill import MemoryLimit, SpillFolder
    from bkdisk.fsck.scan_store import LOCATION_SHARE
    from bkdisk.indexfiles.arrays import LOCATION_DTYPE

    limit = MemoryLimit()
    return ChunkedArray(LOCATION_DTYPE, limit.share(LOCATION_SHARE), SpillFolder(limit), "locations")


def _peak_mib() -> float:
    """The process's peak RSS since the last _reset_peak (VmHWM), else since it started."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")   # Linux: VmHWM := the current RSS
    except OSError:
        pass


def child(walker: str, trees: list[str], repeat: int) -> None:
    rss0 = _peak_mib()
    fn = _walkers()[walker]
    n = fn(trees)   # warm: page cache, compiled kernels loaded (or compiled: not counted below)
    _reset_peak()
    times, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn(trees)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    print(json.dumps({"files": n, "times": times, "cpu": cpu, "peak_rss_mib": _peak_mib(), "import_rss_mib": rss0}))


# --- driver ----------------------------------------------------------------------------------
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(checkout: str, *args: str, python: str | None = None) -> str:
    """This file run with ``checkout``'s packages first on the path (or by ``python``, on its own)."""
    if python:
        cmd, env, cwd = [python, os.path.abspath(__file__), *args], dict(os.environ), None
    else:
        env = dict(os.environ, PYTHONPATH=checkout + os.pathsep + REPO)
        cmd, cwd = [sys.executable, os.path.abspath(__file__), *args], checkout
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=cwd).stdout


def _run_child(checkout: str, walker: str, trees: list[str], repeat: int, python: str | None = None) -> dict:
    out = _child(checkout, "--child", walker, "--repeat", str(repeat), "--tree", *trees, python=python)
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/idxbench")
    ap.add_argument("--files", type=int, nargs="+", default=[20_000, 200_000])
    ap.add_argument("--levels", type=int, nargs="+", default=[2, 4], choices=[2, 4])
    ap.add_argument("--page", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reference", action="store_true", help="also time the pure-Python reference walk")
    ap.add_argument("--keep", action="store_true", help="keep the trees (reused by the next run)")
    ap.add_argument("--baseline", metavar="CHECKOUT", help="another checkout whose walkers run beside these")
    ap.add_argument("--baseline-python", metavar="PYTHON", help="another installed checkout's interpreter")
    ap.add_argument("--root", nargs="+", metavar="LEDGER_DIR", help="walk these dirs instead of built trees")
    ap.add_argument("--list-walkers", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tree", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.list_walkers:
        print(json.dumps(list(_walkers())))
        return 0
    if a.child:
        child(a.child, a.tree, a.repeat)
        return 0
    runs = []   # (label suffix, checkout, walker, interpreter)
    for label, checkout, python in (("", REPO, None), (" [baseline]", a.baseline, None),
                                    (" [baseline-python]", REPO if a.baseline_python else None, a.baseline_python)):
        if checkout:
            checkout = os.path.abspath(checkout)
            names = json.loads(_child(checkout, "--list-walkers", python=python).strip().splitlines()[-1])
            runs += [(label, checkout, w, python) for w in names
                     if (w != "reference" or a.reference) and (label == "" or w.startswith("walk"))]
    rows = []
    made = []
    try:
        cases = [(None, 0, a.root)] if a.root else \
            [(files, levels, [os.path.join(a.dir, f"{levels}level-{files}-p{a.page}")])
             for files in a.files for levels in a.levels]
        for files, levels, trees in cases:
            if files is not None and not os.path.isdir(os.path.join(trees[0], "current")):
                t = time.perf_counter()
                build(trees[0], files, levels, a.page)
                made.append(trees[0])
                print(f"built {trees[0]} ({time.perf_counter() - t:.0f} s)", flush=True)
            for label, checkout, walker, python in runs:
                w = walker + label
                r = _run_child(checkout, walker, trees, a.repeat, python)
                if files is not None and r["files"] != files:
                    raise SystemExit(f"{w} found {r['files']} files in {trees[0]}, expected {files}")
                n = r["files"]
                med, cpu = statistics.median(r["times"]), statistics.median(r.get("cpu", [float("nan")]))
                rows.append((n, levels, w, n / med, med, cpu, r["peak_rss_mib"]))
                where = "given dirs" if files is None else f"{levels}-level"
                print(f"{n:>8} {where:<10}  {w:<28} {n / med:>10,.0f} files/s  {med:6.3f} s  cpu {cpu:6.3f} s  "
                      f"peak RSS {r['peak_rss_mib']:6.0f} MiB (after imports {r['import_rss_mib']:.0f})", flush=True)
    finally:
        if not a.keep:
            for tree in made:
                shutil.rmtree(tree, ignore_errors=True)
            if os.path.isdir(a.dir) and not os.listdir(a.dir):
                os.rmdir(a.dir)
    print()
    print(f"| files | hierarchy | walker | files/s | median s (of {a.repeat}) | median CPU s | peak RSS MiB |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for files, levels, w, fps, med, cpu, rss in rows:
        print(f"| {files:,} | {f'{levels}-level' if levels else 'given dirs'} | {w} | {fps:,.0f} | {med:.3f} | "
              f"{cpu:.3f} | {rss:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
