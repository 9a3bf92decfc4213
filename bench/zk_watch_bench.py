"""Following every ledger of a ZooKeeper cluster with the store's two kinds of watches: a children
watch per hierarchy znode and a data watch per ledger, re-armed by each re-read (AbstractZkLedgerManager's
way, "ledger"), against one ZooKeeper 3.6+ persistent recursive watch on the ledgers root (addWatch,
spoken through kazoo's protocol layer, "recursive"), which needs no re-arming.

    python -m bench.zk_watch_bench [--ledgers 20000] [--updates 20000] [--creates 2000] [--deletes 2000] [--restart]

Each way runs in a process of its own, against the same ZooKeeper and the same changes, made by a
direct kazoo client (BookKeeper's layout); printed per way: the set-up (follow everything) wall and
CPU seconds, the CPU of the watching process and of ZooKeeper per change, the time until the watcher's
view equals ZooKeeper's, its changes reported, and whether its final view is exactly ZooKeeper's.
With --restart ZooKeeper is restarted in the middle of the changes.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from bench.metaservice_bench import _cpu_seconds, _payload

ROOT = "/ledgers"


class StoreFollower:
    """The store (metaservice/zk_watch.py) following every ledger, with the watches of either way."""

    def __init__(self, hosts: str, recursive: bool):
        from bkdisk.metaservice.zk_store import ZkStore
        self.store = ZkStore(hosts, ROOT, recursive_watch=recursive)
        self.store.follow(0, None)
        assert self.store.follower.recursive == recursive

    @property
    def changes(self) -> int:
        return len(self.store.follower.log)

    def view(self) -> dict:
        with self.store.follower.lock:
            return {k: (-1 if v.data is None else v.version) for k, v in self.store.follower.seen.items()}


def _watcher(way: str, hosts: str, ctl: mp.Queue, out: mp.Queue) -> None:
    import resource
    t0, c0 = time.monotonic(), time.process_time()
    w = StoreFollower(hosts, recursive=way == "recursive")
    out.put(("ready", round(time.monotonic() - t0, 2), round(time.process_time() - c0, 2)))
    c1 = time.process_time()
    truth = ctl.get()                       # ZooKeeper's final view, once every change is made
    t1 = time.monotonic()
    while time.monotonic() - t1 < 120:
        view = w.view()
        if {k: v for k, v in view.items() if v != -1} == truth:
            break
        time.sleep(0.01)
    converged = time.monotonic() - t1
    view = {k: v for k, v in w.view().items() if v != -1}
    out.put(("done", round(time.process_time() - c1, 2), round(converged, 2), view == truth, w.changes,
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024))


def _truth(kz) -> dict:
    from bkdisk.metaservice import zk_layout as L
    kind = L.parse_layout(kz.get(f"{ROOT}/LAYOUT")[0], "LAYOUT")
    out, stack = {}, [ROOT]
    while stack:
        p = stack.pop()
        for n in kz.get_children(p):
            child = f"{p}/{n}"
            if L.is_hierarchy(ROOT, kind, child):
                k = L.key_of_path(ROOT, kind, child)
                if k is None:
                    stack.append(child)
                else:
                    out[k] = kz.exists(child).version
    return out


def run(way: str, a) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from kazoo.client import KazooClient
    from zookeeper_fixture import ZooKeeperServer

    from bkdisk.metaservice.zk_store import ZkStore
    with tempfile.TemporaryDirectory(prefix="bkdisk-zk-watch-bench-") as tmp:
        zk = ZooKeeperServer(Path(tmp))
        zk.start()
        try:
            ZkStore(zk.hosts, ROOT).close()                # BookKeeper's layout, as a new cluster
            kz = KazooClient(hosts=zk.hosts, timeout=10, connection_retry={"max_tries": -1, "max_delay": 1.0},
                             command_retry={"max_tries": -1, "max_delay": 1.0})
            kz.start(15)
            from bkdisk.metaservice import zk_layout as L
            kind = L.parse_layout(kz.get(f"{ROOT}/LAYOUT")[0], "LAYOUT")
            path = lambda lid: L.ledger_path(ROOT, kind, 0, lid)   # noqa: E731
            data = _payload(1)
            for parent in sorted({path(i).rsplit("/", 1)[0] for i in range(a.ledgers + a.creates)}):
                kz.ensure_path(parent)
            for res in [kz.create_async(path(i), data) for i in range(a.ledgers)]:
                res.get()
            ctx = mp.get_context("spawn")
            ctl, out = ctx.Queue(), ctx.Queue()
            p = ctx.Process(target=_watcher, args=(way, zk.hosts, ctl, out))
            p.start()
            _tag, setup_wall, setup_cpu = out.get(timeout=600)
            rnd = random.Random(7)
            zk0 = _cpu_seconds(zk.proc.pid)
            ops = [("u", rnd.randrange(a.ledgers)) for _ in range(a.updates)]
            ops += [("c", a.ledgers + i) for i in range(a.creates)]
            ops += [("d", i) for i in rnd.sample(range(a.ledgers), a.deletes)]
            rnd.shuffle(ops)
            t0 = time.monotonic()
            for n, (op, lid) in enumerate(ops):
                if a.restart and n == len(ops) // 2:
                    zk.restart()                            # ZooKeeper's CPU: of its new process only
                    zk0 = _cpu_seconds(zk.proc.pid)
                try:
                    if op == "u":
                        kz.set(path(lid), data)
                    elif op == "c":
                        kz.create(path(lid), data)
                    else:
                        kz.delete(path(lid))
                except Exception as exc:   # e.g. an update of a ledger deleted before it
                    if type(exc).__name__ != "NoNodeError":
                        raise
            change_wall = time.monotonic() - t0
            truth = _truth(kz)
            ctl.put(truth)
            _tag, cpu, converged, equal, changes, rss = out.get(timeout=600)
            zk_cpu = _cpu_seconds(zk.proc.pid) - zk0
            p.join()
            # leave only BookKeeper's layout: the fixture's check walks the tree at stop
            kz.stop()
            kz.close()
            n = len(ops)
            return {"way": way, "setup_wall_s": setup_wall, "setup_cpu_s": setup_cpu, "changes_made": n,
                    "changes_wall_s": round(change_wall, 2),
                    "watcher_cpu_us_per_change": round(cpu / n * 1e6),
                    "zookeeper_cpu_us_per_change": round(zk_cpu / n * 1e6),
                    "converged_after_last_change_s": converged, "final_view_equal": equal,
                    "changes_reported": changes, "watcher_peak_rss_mib": rss}
        finally:
            zk.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.zk_watch_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--ledgers", type=int, default=20000)
    ap.add_argument("--updates", type=int, default=20000)
    ap.add_argument("--creates", type=int, default=2000)
    ap.add_argument("--deletes", type=int, default=2000)
    ap.add_argument("--restart", action="store_true", help="Restart ZooKeeper half-way through the changes.")
    ap.add_argument("--way", choices=["ledger", "recursive", "both"], default="both")
    a = ap.parse_args(argv)
    ways = ["ledger", "recursive"] if a.way == "both" else [a.way]
    result = {"load_average": os.getloadavg()[0], "ledgers": a.ledgers, "runs": [run(w, a) for w in ways]}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
