"""`bkdisk metadata import` of a folder of a million ledgers into the service, over SQLite and over a
real ZooKeeper, as the whole client command (wall time and the client's peak RSS), against in the
same run: `bkdisk metadata export` of the same ledgers (the read-back), the import as it was (every
file parsed, then one Create call a ledger) on a smaller folder with the new import on that folder,
and on ZooKeeper kazoo creating the same znodes directly (1000 creates a multi, parents made first).

    python -m bench.metadata_import_bench [--ledgers 1000000] [--baseline-ledgers 100000]
        [--zk-baseline-ledgers 10000] [--kazoo-ledgers N] [--store sqlite|zk|both] [--no-baselines]
        [--no-export] [--data /work/bench-data/metadata-import]

The folders (bench.metadata_gen.write_shaped_folder: 3-bookie ensembles, one ledger in five with an
ensemble change, ids spread over the 64-bit range, mixed digest types) are written once under
--data and reused. Each command runs as its own process under /usr/bin/time -v; the service runs as
`bkdisk metadata serve`, and its CPU seconds (and ZooKeeper's) are read from /proc around each run,
to show where the time goes. Figures depend on the machine (2 shared cores here).

Measured 2026-12-01/02 on this machine (2 cores shared with six other sessions: 1-minute load 11-23
throughout, so wall times are stretched; the CPU seconds are the work itself):

    python -m bench.metadata_import_bench --store sqlite                    (rows marked S)
    python -m bench.metadata_import_bench --store zk --no-baselines         (Z1: the code before the
                                                                             multiRead of parents)
    python -m bench.metadata_import_bench --store zk --ledgers 100000       (Z2: the code as it is)

| store | run | ledgers | wall s | ledgers/s | client CPU s | service CPU s | ZooKeeper CPU s | client peak RSS MiB |
|---|---|---|---|---|---|---|---|---|
| S: SQLite | import before CreateMany | 10^5 | 208.8 | 479 | 30.8 | 56.6 | - | 120 |
| S: SQLite | import (CreateMany) | 10^5 | 31.5 | 3,175 | 5.2 | 4.7 | - | 59 |
| S: SQLite | import (CreateMany) | 10^6 | 304.5 | 3,284 | 64.9 | 63.8 | - | 73 |
| S: SQLite | export (read-back) | 10^6 | 125.9 | 7,943 | 43.3 | 5.2 | - | 133 |
| Z1: ZooKeeper | import (CreateMany) | 10^6 | 1068.9 | 936 | 120.3 | 239.9 | 180.0 | 73 |
| Z1: ZooKeeper | export (read-back), stopped | 297,002 of 10^6 | 411 | ~720 | - | - | - | - |
| Z2: ZooKeeper | import before CreateMany | 10^4 | 172.5 | 58 | 6.1 | 35.0 | 30.9 | 56 |
| Z2: ZooKeeper | import (CreateMany) | 10^4 | 8.8 | 1,136 | 1.0 | 1.0 | 2.3 | 57 |
| Z2: ZooKeeper | import (CreateMany) | 10^5 | 54.9 | 1,821 | 9.5 | 10.3 | 9.2 | 58 |
| Z2: ZooKeeper | export (read-back) | 10^5 | 150.7 | 664 | 6.6 | 55.7 | 42.1 | 54 |
| Z2: ZooKeeper | kazoo direct (+30,920 parents, multis of 1000) | 10^4 | 3.5 | 2,857 | 0.7 | - | 0.7 | 51 |

SQLite: 6.6x the old import's rate on 10^5 (8.8x less CPU), and 10^6 ledgers cost 65 + 64 CPU
seconds (client, service; about half of each is parsing every file's metadata once, as the client's
check and as the service's validation): on two idle cores that is about a minute of wall time;
here it took 5 minutes of a machine at load 18. The client stays at 73 MiB (it was 120 MiB for
10^5 before: it held every file).
ZooKeeper: 19.6x the old import's rate on 10^4 (Z2). Ids spread over the 64-bit range put almost
every ledger under parent znodes of its own (BookKeeper's 4-level long hierarchy): 10^6 ledgers are
4.1 million znodes. Z1 put 10^6 in in 18 minutes at load 11-16 with ZooKeeper spending 180 CPU
seconds and the service 240 (one exists call a parent whenever a multi met parents the batch in
flight beside it had made). The code now asks for them in one multiRead: Z2 costs per ledger less
than half of Z1's (service 103 us, ZooKeeper 92 us of CPU), which for 10^6 is about 100 + 90 CPU
seconds, still more than two minutes of wall time on two cores here; 10^6 was not run again with it.
Where the time goes: ZooKeeper itself, fed multis of creates by a bare kazoo client, took 0.7 CPU s
for 41,000 znodes (about 60,000 a CPU second); through the service it spends 2-3x that (the multis
that meet a concurrent batch's parents are applied partly and sent again), and the service about as
much as ZooKeeper in kazoo's request building and its replies. With BookKeeper's own sequential ids
the parents are shared by 10,000 ledgers each and a ledger is one znode, not four. The export
(ReadLedgers over ZooKeeper's hierarchy walk) is now slower than the import.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.metaservice_bench import Service

BOOKIES = [f"bookie-{i}.pulsar.svc:3181" for i in range(1, 7)]
BKDISK = [sys.executable, "-c", "from bkdisk.cli import main; main()"]

# The import before CreateMany (one Create call a ledger, the folder listed and held whole): the baseline.
_PER_LEDGER_IMPORT = """
import os, sys
from bkdisk.bookie.metadata_dir import ledger_of_file
from bkdisk.diskio.mapped import read_bytes
from bkdisk.formats.metadata import parse_metadata
from bkdisk.metaservice.client import MetadataClient
folder = sys.argv[1]
best = {}
for name in sorted(os.listdir(folder)):
    got = ledger_of_file(name)
    if got is not None and (got[0] not in best or got[1] < best[got[0]][0]):
        best[got[0]] = (got[1], name)
files = []
for lid, (_rank, name) in sorted(best.items()):
    path = os.path.join(folder, name)
    data = read_bytes(path)
    parse_metadata(data, path=path)
    files.append((lid, data))
c = MetadataClient(sys.argv[2], timeout=60)
for lid, data in files:
    c.create(data, scope=lid.scope, ledger_id=lid.ledger)
print(len(files))
"""

# ZooKeeper itself: the same znodes (parents first, level by level), 1000 creates a multi, 16 in flight.
_KAZOO_DIRECT = """
import os, sys
from kazoo.client import KazooClient
from bkdisk.bookie.metadata_dir import ledger_of_file
from bkdisk.metaservice.zk_layout import ledger_path
from bkdisk.metaservice.zk_store import ZkStore
folder, hosts, root = sys.argv[1:4]
ZkStore(hosts, root).close()
kind = "hybrid"
paths = []
for name in os.listdir(folder):
    got = ledger_of_file(name)
    if got is not None:
        paths.append((ledger_path(root, kind, 0, got[0].ledger), os.path.join(folder, name)))
zk = KazooClient(hosts=hosts, timeout=60)
zk.start(30)
depth = root.count("/")
parents = {}
for p, _f in paths:
    parts = p.split("/")
    for d in range(depth + 1, len(parts) - 1):
        parents.setdefault(d, set()).add("/".join(parts[:d + 1]))
def run(items):
    pending = []
    for i in range(0, len(items), 1000):
        t = zk.transaction()
        for path, data in items[i:i + 1000]:
            t.create(path, data)
        pending.append(t.commit_async())
        if len(pending) >= 16:
            pending.pop(0).get(timeout=300)
    for r in pending:
        r.get(timeout=300)
for d in sorted(parents):
    run([(p, b"") for p in sorted(parents[d])])
items = []
for p, f in paths:
    with open(f, "rb") as fh:
        items.append((p, fh.read()))
run(items)
zk.stop()
print(len(paths), sum(len(v) for v in parents.values()))
"""


def folder_of(data: Path, n: int) -> Path:
    """The shaped folder of ``n`` ledgers under ``data``, written once (a marker says it is whole)."""
    from bench.metadata_gen import write_shaped_folder
    folder = data / f"shaped-{n}"
    if not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        t0 = time.monotonic()
        write_shaped_folder(str(folder), n, BOOKIES)
        (folder / ".complete").write_text(f"{n} ledgers, written in {time.monotonic() - t0:.0f} s\n")
    return folder


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` and its children waited for (from /proc)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def timed(argv: list[str], *watched: int | None) -> dict:
    """Run ``argv`` under /usr/bin/time -v: wall and CPU seconds, peak RSS, the last line of its
    output; and the CPU seconds the ``watched`` processes (the service, ZooKeeper) spent meanwhile."""
    before = [cpu_seconds(p) for p in watched]
    load = os.getloadavg()[0]
    p = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{argv[3:]} exited {p.returncode}: {p.stderr[-2000:]}")
    after = [cpu_seconds(q) for q in watched]

    def field(name: str) -> str:
        m = re.search(re.escape(name) + r": ([\d:.]+)", p.stderr)
        assert m is not None, name
        return m.group(1)
    wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
                                                                 .split(":"))))
    out = {"seconds": round(wall, 1), "client_cpu_seconds": round(float(field("User time (seconds)"))
                                                                  + float(field("System time (seconds)")), 1),
           "peak_rss_mib": int(field("Maximum resident set size (kbytes)")) // 1024,
           "said": p.stdout.strip().splitlines()[-1][:200] if p.stdout.strip() else "",
           # the machine's 1-minute load before and after: wall time on a shared machine is the
           # CPU seconds above stretched by whatever else runs
           "load_average": [round(load, 1), round(os.getloadavg()[0], 1)]}
    for name, b, a in zip(("service_cpu_seconds", "zookeeper_cpu_seconds"), before, after):
        out[name] = round(a - b, 1)
    return out


def _rate(r: dict, n: int) -> dict:
    return {**r, "ledgers_per_second": round(n / r["seconds"]) if r["seconds"] else None}


def bench_store(store: str, big: Path, small: Path, n_big: int, n_small: int, tmp: Path,
                baselines: bool = True, export: bool = True, kazoo: tuple[Path, int] | None = None) -> dict:
    out: dict = {}
    tmp.mkdir(parents=True, exist_ok=True)
    zk = None
    if store == "zk":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from zookeeper_fixture import ZooKeeperServer
        zk = ZooKeeperServer(tmp / "zk", heap="4g")
        zk.start()

    def url(name: str) -> str:
        return f"sqlite:{tmp / (name + '.db')}" if zk is None else f"zk://{zk.hosts}/{name}"
    zk_pid = None if zk is None or zk.proc is None else zk.proc.pid
    try:
        runs = (("import_before_createmany_small", [*BKDISK[:2], _PER_LEDGER_IMPORT, str(small)], n_small),
                ("import_small", [*BKDISK, "metadata", "import", str(small)], n_small),
                ("import", [*BKDISK, "metadata", "import", str(big)], n_big))[0 if baselines else 2:]
        for name, argv, n in runs:
            svc = Service(url(name.replace("_", "-")))
            try:
                extra = [svc.target] if argv[1] == "-c" and argv[2] == _PER_LEDGER_IMPORT else ["--server", svc.target]
                out[name] = _rate(timed([*argv, *extra], svc.proc.pid, zk_pid), n)
                print(f"{store} {name}: {json.dumps(out[name])}", file=sys.stderr, flush=True)
                if name == "import" and export:
                    dest = tmp / "exported"
                    out["export"] = _rate(timed([*BKDISK, "metadata", "export", str(dest), "--server", svc.target],
                                                svc.proc.pid, zk_pid), n)
                    print(f"{store} export: {json.dumps(out['export'])}", file=sys.stderr, flush=True)
                    # a million files take many minutes to unlink where the filesystem discards
                    # blocks: removed in the background, at idle I/O priority
                    gone = tmp.parent.parent / f"removing-{os.getpid()}-{store}"
                    dest.rename(gone)
                    subprocess.Popen(["ionice", "-c3", "rm", "-rf", str(gone)], start_new_session=True)
            finally:
                svc.stop()
        if zk is not None and baselines:
            folder, n = kazoo or (small, n_small)
            out["kazoo_multi_direct_small"] = _rate(
                timed([sys.executable, "-c", _KAZOO_DIRECT, str(folder), zk.hosts, "/kazoo-direct"], None, zk_pid), n)
            out["kazoo_multi_direct_small"]["ledgers"] = n
            print(f"{store} kazoo: {json.dumps(out['kazoo_multi_direct_small'])}", file=sys.stderr, flush=True)
    finally:
        if zk is not None:
            zk._kill()       # (its stop() walks every znode: minutes after a million ledgers)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.metadata_import_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--ledgers", type=int, default=1_000_000)
    ap.add_argument("--baseline-ledgers", type=int, default=100_000,
                    help="The smaller folder the import as it was runs on (SQLite).")
    ap.add_argument("--zk-baseline-ledgers", type=int, default=10_000,
                    help="The same on ZooKeeper, where it creates about 70 ledgers a second.")
    ap.add_argument("--store", choices=["sqlite", "zk", "both"], default="both")
    ap.add_argument("--no-baselines", action="store_true",
                    help="Only the import of --ledgers and its export (the baselines measured before).")
    ap.add_argument("--no-export", action="store_true",
                    help="Leave out the read-back (on ZooKeeper, tens of minutes for a million ledgers).")
    ap.add_argument("--kazoo-ledgers", type=int, default=None,
                    help="The folder kazoo creates directly on ZooKeeper (default: --zk-baseline-ledgers).")
    ap.add_argument("--data", default="/work/bench-data/metadata-import",
                    help="Where the folders are written once and reused (outside every repository).")
    a = ap.parse_args(argv)
    data = Path(a.data)
    data.mkdir(parents=True, exist_ok=True)
    big = folder_of(data, a.ledgers)
    out: dict = {"ledgers": a.ledgers, "folder": str(big)}
    with tempfile.TemporaryDirectory(prefix="bkdisk-import-bench-", dir=a.data) as tmp:
        for store in (["sqlite", "zk"] if a.store == "both" else [a.store]):
            n_small = a.baseline_ledgers if store == "sqlite" else a.zk_baseline_ledgers
            kazoo = None if a.kazoo_ledgers is None else (folder_of(data, a.kazoo_ledgers), a.kazoo_ledgers)
            out[store] = r = bench_store(store, big, folder_of(data, n_small), a.ledgers, n_small, Path(tmp) / store,
                                         not a.no_baselines, not a.no_export, kazoo)
            if not a.no_baselines:
                r["baseline_ledgers"] = n_small
                r["speedup_on_baseline_folder"] = round(
                    r["import_before_createmany_small"]["seconds"] / max(r["import_small"]["seconds"], 0.1), 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
