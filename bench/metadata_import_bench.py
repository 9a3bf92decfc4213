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

Measured again 2026-12-02 on the machine alone (nothing else running before the first run; the SQLite
run shared a core with a bench writing bookie disks), `--no-baselines --no-export`:

| store, 10^6 ledgers | wall s | ledgers/s | CPU s client / service / ZooKeeper | client MiB | load |
|---|---|---|---|---|---|
| ZooKeeper, `--ids generator` (1.03 znodes a ledger) | **90.5** | 11,050 | 54.9 / 36.4 / 22.1 | 122 | 1.4-3.3 |
| ZooKeeper, `--ids spread` (4.1 znodes a ledger) | 157.9 | 6,333 | 50.7 / 68.0 / 102.2 | 121 | 1.7-2.6 |
| SQLite (`--ids spread`), a core shared | **112.0** | 8,929 | 67.9 / 42.2 / - | 119 | 1.1-3.7 |

With the ids a cluster's id generator gives, a million ledgers go into ZooKeeper in a minute and a
half. Spread over the 64-bit range, each ledger needs three parent znodes of its own: ZooKeeper's own
work for those 4.1 million znodes is 102 CPU seconds (kazoo creating them directly costs it the same,
below), which two cores cannot fit under two minutes beside any client.

Measured 2026-12-02, the import as it is (2 cores shared with two other sessions; the 1-minute load
before and after each run is given: wall times are stretched by it, the CPU seconds are the work;
client MiB: its peak RSS):

    python -m bench.metadata_import_bench --store sqlite
    python -m bench.metadata_import_bench --store zk --no-export --kazoo-ledgers 100000

| store | run | ledgers | wall s | ledgers/s | client CPU s | service CPU s | ZooKeeper CPU s | client MiB | load |
|---|---|---|---|---|---|---|---|---|---|
| SQLite | import before CreateMany | 10^5 | 198.9 | 503 | 39.9 | 86.2 | - | 121 | 4.9-7.3 |
| SQLite | import | 10^5 | 8.5 | 11,765 | 4.5 | 3.5 | - | 67 | 7.3-6.7 |
| SQLite | import | 10^6 | 80.7 | 12,392 | 55.6 | 35.9 | - | 114 | 6.7-3.1 |
| SQLite | export (read-back) | 10^6 | 58.3 | 17,153 | 49.5 | 5.4 | - | 132 | 3.1-3.6 |
| ZooKeeper | import before CreateMany | 10^4 | 110.5 | 90 | 4.9 | 41.1 | 34.6 | 57 | 4.3-5.4 |
| ZooKeeper | import | 10^4 | 3.6 | 2,778 | 0.7 | 0.6 | 2.0 | 60 | 5.4-5.4 |
| ZooKeeper | import | 10^6 | 225.1 | 4,442 | 49.6 | 62.5 | 91.2 | 112 | 5.4-6.6 |
| ZooKeeper | kazoo direct (+300,416 parents, multis of 1000) | 10^5 | 16.2 | 6,173 | 6.3 | - | 10.1 | 145 | 6.6-6.3 |

SQLite: 10^6 ledgers in 81 s at load 3-7, 92 CPU seconds in all (client 56, service 36; before:
304 s, 65 + 64), the client under 120 MiB. ZooKeeper: 10^6 in 225 s at load 5-7, 203 CPU seconds
(client 50, service 63, ZooKeeper 91; before, 10^6 took 1069 s and 120 + 240 + 180).

Where a ledger's CPU goes now (py-spy on 10^5 ledgers, `bkdisk metadata import` against `bkdisk
metadata serve`): the client, about 37 us: parsing each file for the check 10 us (1 us of it
protobuf, the rest building the LedgerMetadata value from its fields), reading it 7, listing and
choosing the names 3, the CreateMany requests and gRPC the rest; at 10^6 also the system time of
reading a million files that are not all in the page cache. The SQLite service, about 36 us: the
batch's statements and commit half, the validation parse (and consistency check) 13 us, the audit
trail and gRPC the rest. The ZooKeeper service, 53 us (63 at 10^6): the multis (serializing them,
kazoo's reading of the replies and its connection loop) a third, the validation parse a fifth, the
parent znodes each ledger needs a tenth, the audit trail a twentieth. ZooKeeper itself, 20-25 us a
znode, a third of it young-generation GC once the tree holds millions of znodes (jstat during a
10^6 import: 29 s of GC in its first 69 CPU seconds), and ids spread over the 64-bit range make a
ledger 4.1 znodes (BookKeeper's long hierarchy: three parents of its own for most ledgers).

What each change took off, on 10^5 ledgers (`bkdisk metadata import shaped-100000 --server` against
`bkdisk metadata serve --store ...`, one run each, the service's and ZooKeeper's CPU from /proc;
client / service / ZooKeeper CPU seconds, load):
- as it was: SQLite 4.3 / 6.6 (load 1.5); ZooKeeper 4.5 / 9.6 / 7.9 (load 0.9).
- the store's create batch as one query for the ledgers that exist and two executemany (not a
  SELECT and two INSERTs a ledger): SQLite service 6.6 -> 5.7 (load 2.1).
- the audit trail's lines of a batch off the call's work (measured with them as one log record, a
  record and a flush a batch; the trail now notes them and writes them from a thread of its own,
  which costs the call less still): SQLite service 5.7 -> 4.4 (load 3.2).
- a multi's creates serialized in one pass (zk_create_ops), not a kazoo op built and packed each:
  ZooKeeper service 9.6 -> 5.3 (with the audit trail's change; load 2.4).
- the checked bytes spooled and sent from the spool (the folder not listed and read twice): client
  4.3-5.4 -> 3.6-3.7 (load 7-9).
- sent in ledger id order from the spool (10^6, ZooKeeper, run against the same 4 GiB ZooKeeper):
  client 68 -> 41, service 71 -> 56, ZooKeeper 112 -> 84 CPU seconds, wall 372 -> 210 s (load 7-8):
  ledgers that share parent znodes go in one batch, so no multi meets a parent another batch made
  and the parents the store remembers are the ones still needed; the SQLite key grows at its end.

ZooKeeper at 10^6 does not reach two minutes on two cores: ZooKeeper's own work is the floor.
kazoo creating the same znodes directly, with nothing checked, no service, no audit trail, cost
ZooKeeper 10.1 and itself 6.3 CPU seconds for 10^5 ledgers (400,416 znodes), about 165 CPU seconds
for 10^6; the import costs 203, 1.2x that, and ZooKeeper's 91 of them are no more than its rate
with kazoo (101 for 10^6). Two
idle cores give at best ~100 s for 203 CPU seconds, plus the check that must finish before the
first create (about 20 s of client CPU at 10^6): about 2 minutes, here 3.75 at load 5-7. With
BookKeeper's own sequential ids a ledger's parents are shared by 10,000 ledgers: a ledger is one
znode, not four.

Before these changes (2026-12-01/02, load 11-23):

    python -m bench.metadata_import_bench --store sqlite                    (rows marked S)
    python -m bench.metadata_import_bench --store zk --no-baselines         (Z1: the code before the
                                                                             multiRead of parents)
    python -m bench.metadata_import_bench --store zk --ledgers 100000       (Z2)

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


def folder_of(data: Path, n: int, ids_from: str = "spread") -> Path:
    """The shaped folder of ``n`` ledgers under ``data``, written once (a marker says it is whole)."""
    from bench.metadata_gen import write_shaped_folder
    folder = data / (f"shaped-{n}" if ids_from == "spread" else f"shaped-{n}-{ids_from}-ids")
    if not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        t0 = time.monotonic()
        write_shaped_folder(str(folder), n, BOOKIES, ids_from=ids_from)
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
    ap.add_argument("--ids", choices=["spread", "generator"], default="spread",
                    help="the big folder's ledger ids: spread over the 64-bit range (about four znodes a ledger "
                         "in ZooKeeper), or consecutive as BookKeeper's ZooKeeper id generator gives them")
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
    big = folder_of(data, a.ledgers, a.ids)
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
