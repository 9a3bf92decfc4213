"""Streaming every ledger's metadata through the service's bulk read (ReadLedgers), as the whole
client process (`load_all`: read and parse every ledger), against the store read directly in the
same run (SQLite: one SELECT of every row; ZooKeeper: kazoo's getData of every ledger znode, all
sent before any is awaited per 10,000-ledger parent, and the store's multiRead scan without gRPC).

    python -m bench.bulk_read_bench [--ledgers 1000000] [--store sqlite|zk|both]

Each reader runs as its own process under /usr/bin/time -v: wall time and peak RSS are the whole
process's, start-up included. The service runs as `bkdisk metadata serve`. Figures depend on the
machine (shared here).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.metaservice_bench import Service, _payload

_SQLITE_DIRECT = """
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT scope, ledger, version, data FROM ledgers ORDER BY scope, ledger")
n = sum(1 for _ in rows)
print(n)
"""
_THROUGH_SERVICE = """
import sys
from bkdisk.metaservice.client import MetadataClient
c = MetadataClient(sys.argv[1], timeout=60)
print(len(c.load_all()))
"""
_STREAM_THROUGH_SERVICE = """
import sys
from bkdisk.metaservice.client import MetadataClient
c = MetadataClient(sys.argv[1], timeout=60)
n = 0
for page in c.read_ledgers(page_size=1000):
    for x in page:
        x.parse()
    n += len(page)
print(n)
"""
_ZK_MULTIREAD = """
import sys
from bkdisk.metaservice.zk_store import ZkStore
s = ZkStore(sys.argv[1], sys.argv[2])
print(sum(len(b) for b in s.scan(None, None, 1000)))
s.close()
"""
_ZK_KAZOO = """
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=30)
zk.start(30)
root, n = sys.argv[2], 0
for top in sorted(c for c in zk.get_children(root) if c.isdigit()):
    for mid in sorted(zk.get_children(f"{root}/{top}")):
        base = f"{root}/{top}/{mid}"
        for r in [zk.get_async(f"{base}/{leaf}") for leaf in sorted(zk.get_children(base))]:
            r.get(timeout=60)
            n += 1
print(n)
zk.stop()
"""


def timed(code: str, *args: str) -> dict:
    """Run ``python -c code args`` under /usr/bin/time -v: its output, wall seconds and peak RSS."""
    p = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code, *args], capture_output=True,
                       text=True, check=True)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", p.stderr).group(1)
    secs = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.split(":"))))
    return {"ledgers": int(p.stdout.split()[-1]), "seconds": round(secs, 2), "peak_rss_mib": rss // 1024}


def through_service(target: str) -> dict:
    """The service read as a consumer streams it (parse each, keep none) and as load_all (keep all)."""
    return {"service_stream_parse": timed(_STREAM_THROUGH_SERVICE, target),
            "service_load_all": timed(_THROUGH_SERVICE, target)}


def fill_sqlite(path: str, n: int) -> None:
    """``n`` scope-0 ledgers written into the store's table in one transaction (the bench's setup)."""
    from bkdisk.metaservice.sqlite_store import SqliteStore, _k
    SqliteStore(path).close()
    import sqlite3
    db = sqlite3.connect(path)
    data = _payload(7)
    with db:
        db.executemany("INSERT INTO ledgers VALUES (?,?,0,?)", ((_k(0), _k(i), data) for i in range(n)))
    db.close()


def fill_zk(hosts: str, root: str, n: int) -> None:
    """``n`` scope-0 ledgers as BookKeeper's hybrid layout names them, 1000 creates per multi."""
    from kazoo.client import KazooClient

    from bkdisk.metaservice.zk_layout import ledger_path
    from bkdisk.metaservice.zk_store import ZkStore
    ZkStore(hosts, root).close()
    kz = KazooClient(hosts=hosts, timeout=30)
    kz.start(30)
    data = _payload(7)
    parents = sorted({ledger_path(root, "hybrid", 0, i).rsplit("/", 1)[0] for i in range(0, n, 10000)})
    for p in parents:
        kz.ensure_path(p)
    pending = []
    for first in range(0, n, 1000):
        tx = kz.transaction()
        for i in range(first, min(n, first + 1000)):
            tx.create(ledger_path(root, "hybrid", 0, i), data)
        pending.append(tx.commit_async())
        if len(pending) >= 16:
            pending.pop(0).get(timeout=120)
    for p in pending:
        p.get(timeout=120)
    kz.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bulk_read_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--ledgers", type=int, default=1_000_000)
    ap.add_argument("--store", choices=["sqlite", "zk", "both"], default="both")
    a = ap.parse_args(argv)
    out: dict = {"ledgers": a.ledgers}
    with tempfile.TemporaryDirectory(prefix="bkdisk-bulk-bench-") as tmp:
        if a.store in ("sqlite", "both"):
            db = f"{tmp}/meta.db"
            fill_sqlite(db, a.ledgers)
            svc = Service(f"sqlite:{db}")
            try:
                out["sqlite"] = {**through_service(svc.target), "direct_select": timed(_SQLITE_DIRECT, db)}
            finally:
                svc.stop()
        if a.store in ("zk", "both"):
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from zookeeper_fixture import ZooKeeperServer
            zk = ZooKeeperServer(Path(tmp) / "zk", heap="3g")
            zk.start()
            try:
                t0 = time.monotonic()
                fill_zk(zk.hosts, "/ledgers", a.ledgers)
                out["zk_fill_seconds"] = round(time.monotonic() - t0, 1)
                svc = Service(f"zk://{zk.hosts}/ledgers")
                try:
                    out["zookeeper"] = {**through_service(svc.target),
                                        "direct_multiread_no_grpc": timed(_ZK_MULTIREAD, zk.hosts, "/ledgers"),
                                        "direct_kazoo_get_async": timed(_ZK_KAZOO, zk.hosts, "/ledgers")}
                finally:
                    svc.stop()
            finally:
                zk.stop()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
