"""The audit as the ledger count grows: the golden cluster-3's three disks audited with their own
6 ledgers, then with 10^4, 10^6 and 10^7 more (empty, closed) ledgers of synthetic BookKeeper-
serialized metadata (bench.metadata_gen), from a metadata folder and through the metadata service.

    python -m bench.audit_scale_bench --data /work/bench-data/27 [--counts 10000,1000000]
        [--sources folder,service] [--master local[2]] [--golden ../shared/golden] [--runs 3]

Each audit is `bkdisk audit` run as a process (start-up included). Reported per run: wall time;
peak RSS of the driver (the bkdisk process), of the largest PySpark worker and of the JVM, sampled
from /proc every 0.1 s over the process tree; and the driver's exact peak (/usr/bin/time's %M: the
kernel's ru_maxrss; the JVM the driver starts is not waited for, so not in it); the CPU seconds of
the audit's processes (sampled from /proc likewise) and of the metadata service. The baseline is the
same audit with only the cluster's own ledgers, measured in the same round; with ``--runs`` the
rounds repeat, and the medians are reported.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

GOLDEN_DEFAULT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "golden")
BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
FIRST_SYNTHETIC = 1 << 32   # above every id of the cluster's own ledgers


def _tree(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(d))
            except OSError:
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def _rss_and_role(pid: int) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    rss = next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    exe = cmd.split(" ")
    role = ("driver" if (" audit " in cmd or " salvage " in cmd) and any(x.endswith("/bkdisk") for x in exe[:2]) else
            "jvm" if exe[0].endswith("java") else
            "python worker" if "python" in os.path.basename(exe[0]) else "other")
    return rss, role


def run_measured(args: list[str], env: dict[str, str]) -> dict:
    """Run a command; wall time, per-role peak RSS (sampled) and the driver's exact peak."""
    import tempfile
    fd, maxrss_file = tempfile.mkstemp(prefix="bench-maxrss-")
    os.close(fd)
    t0 = time.perf_counter()
    # /usr/bin/time's %M: the command's largest resident set (and of the descendants it waited for).
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", maxrss_file, *args], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks = {"driver": 0, "python worker": 0, "jvm": 0}
    cpu: dict[int, float] = {}   # per process of the tree: its CPU seconds when last seen
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            for pid in _tree(p.pid):
                got = _rss_and_role(pid)
                if got and got[1] in peaks:
                    peaks[got[1]] = max(peaks[got[1]], got[0])
                cpu[pid] = max(cpu.get(pid, 0.0), cpu_seconds(pid))
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    _out, err = p.communicate()
    done.set()
    th.join()
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 4):
        raise SystemExit(f"{' '.join(args)} exited {p.returncode}:\n{err[-3000:]}")
    with open(maxrss_file) as f:
        exact = int(f.read().split()[-1]) * 1024
    os.unlink(maxrss_file)
    return {"wall": wall, "exit": p.returncode, **peaks, "max_rss_exact": exact, "cpu": sum(cpu.values())}


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return 0.0
    fields = st[st.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def audit_args(golden: str, md: str, out: str, master: str) -> list[str]:
    bk = os.path.join(os.path.dirname(sys.executable), "bkdisk")
    return [bk, "audit", *[os.path.join(golden, "cluster-3", "bookies", b) for b in BOOKIES], "--metadata" if
            md.startswith("grpc://") else "--metadata-dir", md, "--out", out, "--master", master, "--quiet",
            "--conf", "spark.sql.shuffle.partitions=8"]


def folder_run(a, count: int, own: str, env: dict[str, str], remove: bool) -> dict:
    """The audit with ``count`` synthetic ledgers and the cluster's own in a metadata folder."""
    from bench.metadata_gen import write_folder
    md = os.path.join(a.data, f"folder-{count}")
    if not os.path.isdir(md):
        write_folder(md, count, FIRST_SYNTHETIC, list(BOOKIES), processes=2)
        for n in os.listdir(own):
            shutil.copyfile(os.path.join(own, n), os.path.join(md, n))
    r = run_measured(audit_args(a.golden, md, os.path.join(a.data, "out"), a.master), env)
    if remove:
        shutil.rmtree(md)
    return r


def service_run(a, count: int, own: str, env: dict[str, str], remove: bool) -> dict:
    """The audit with ``count`` synthetic ledgers and the cluster's own through the metadata service
    (a SQLite store); the service's CPU seconds during the audit as ``service cpu``."""
    from bench.metadata_gen import write_sqlite
    from bkdisk.metaservice.sqlite_store import SqliteStore
    from bkdisk.metaservice.store import LedgerExists
    db = os.path.join(a.data, f"service-{count}.db")
    if not os.path.exists(db):
        write_sqlite(db, count, FIRST_SYNTHETIC, list(BOOKIES))
    store = SqliteStore(db)
    for n in sorted(os.listdir(own)):   # the cluster's own ledgers beside the synthetic ones
        if n.endswith(".bin"):
            with open(os.path.join(own, n), "rb") as f:
                try:
                    store.create(0, int(n[:-4], 16), f.read())
                except LedgerExists:
                    pass
    store.close()
    bk = os.path.join(os.path.dirname(sys.executable), "bkdisk")
    srv = subprocess.Popen([bk, "metadata", "serve", "--store", f"sqlite:{db}", "--bind", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = srv.stdout.readline() if srv.stdout is not None else ""   # a pipe: stdout=PIPE
        port = line.strip().rsplit(":", 1)[-1].split()[0]
        if not port.isdigit():
            raise SystemExit(f"the metadata service did not say its port: {line!r}")
        srv_cpu = cpu_seconds(srv.pid)
        r = run_measured(audit_args(a.golden, f"grpc://127.0.0.1:{port}", os.path.join(a.data, "out"), a.master),
                         env)
        r["service cpu"] = cpu_seconds(srv.pid) - srv_cpu
    finally:
        srv.terminate()
        srv.wait()
    if remove:
        os.unlink(db)
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="where the synthetic metadata goes (kept outside worktrees)")
    ap.add_argument("--counts", default="10000,1000000")
    ap.add_argument("--sources", default="folder,service")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--golden", default=GOLDEN_DEFAULT)
    ap.add_argument("--keep", action="store_true", help="keep the generated metadata")
    ap.add_argument("--runs", type=int, default=1, help="rounds of every audit, for medians")
    a = ap.parse_args(argv)
    os.makedirs(a.data, exist_ok=True)
    own = os.path.join(a.golden, "cluster-3", "metadata")
    env = dict(os.environ)
    rows = []

    def record(name: str, count: int, r: dict) -> None:
        rows.append((name, count, r))
        mib = lambda v: f"{v / 2**20:7.0f}"   # noqa: E731
        print(f"{name:8s} {count:>9d} ledgers: {r['wall']:7.1f} s  driver {mib(r['driver'])} MiB  "
              f"python worker {mib(r['python worker'])} MiB  jvm {mib(r['jvm'])} MiB  "
              f"(driver by ru_maxrss: {mib(r['max_rss_exact'])} MiB; exit {r['exit']}); "
              f"CPU {r['cpu']:.1f} s over the audit's processes (sampled)"
              + (f", {r['service cpu']:.1f} s in the metadata service" if "service cpu" in r else ""), flush=True)

    counts = [int(c) for c in a.counts.split(",")]
    sources = a.sources.split(",")
    for rnd in range(a.runs):   # rounds interleave the runs: a busy spell of a shared machine hits them alike
        last = rnd == a.runs - 1
        record("own", 0, run_measured(audit_args(a.golden, own, os.path.join(a.data, "out"), a.master), env))
        for count in counts:
            for source in sources:
                if source == "folder":
                    record(source, count, folder_run(a, count, own, env, remove=last and not a.keep))
                else:
                    record(source, count, service_run(a, count, own, env, remove=last and not a.keep))
    print(f"\nmedians of {a.runs} run(s); x baseline: the median of each round's ratio to its own baseline")
    base = [r for n, _c, r in rows if n == "own"]
    for name, count in [("own", 0)] + [(s, c) for c in counts for s in sources]:
        mine = [r for n, c, r in rows if (n, c) == (name, count)]
        ratios = [r["wall"] / b["wall"] for r, b in zip(mine, base)]
        cpu = statistics.median(r["cpu"] + r.get("service cpu", 0.0) for r in mine)
        walls = ", ".join(f"{r['wall']:.1f}" for r in mine)
        peak = {k: max(r[k] for r in mine) / 2**20 for k in ("driver", "python worker", "jvm")}
        print(f"{name:8s} {count:>9d}: wall {statistics.median(r['wall'] for r in mine):6.1f} s (runs {walls}), "
              f"CPU {cpu:6.1f} s, x baseline {statistics.median(ratios):.2f} "
              f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}); peak RSS driver {peak['driver']:.0f} MiB, "
              f"python worker {peak['python worker']:.0f} MiB, jvm {peak['jvm']:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
