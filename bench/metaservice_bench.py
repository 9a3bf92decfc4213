"""The ledger metadata service under 64 concurrent clients on loopback: reads/s, CAS writes/s, p50/p99
latency and Watch fan-out delay, over the embedded store and over ZooKeeper; and the ZooKeeper sessions
the service holds (one) against 64 kazoo clients going to ZooKeeper directly, with their throughput.

    python -m bench.metaservice_bench [--clients 64] [--seconds 4] [--ledgers 256] [--procs 4] [--no-zk|--no-embedded]
    python -m bench.metaservice_bench --token-cost [--rounds 3] [--before PYTHON]

``--token-cost``: reads and CAS writes with the token on every call against the same service with
no token configured, measured in the same run, alternating, on the embedded store; with the service's
peak RSS beside each. ``--before PYTHON``: a third side, the service of another install (a checkout's
venv python, e.g. of the release before the token guarded reads), with no token: the figures the token's
cost is judged against.

The service runs as `bkdisk metadata serve` in its own process; the clients run as threads spread over
a few processes, each thread with its own channel or ZooKeeper session; under "batched" the threads of
a process share one MetadataClient, whose concurrent calls coalesce into ReadMany/WriteMany calls.
ZooKeeper is a local standalone server started as tests/zookeeper_fixture.py starts it. Figures depend
on the machine (shared here).

Measured 2026-12-02, ``python -m bench.metaservice_bench --token-cost --rounds 3 --seconds 4 --before
PYTHON`` where PYTHON is the venv of a checkout of 01bec9b (the service before the token guarded reads,
with no checks in front of its methods and no audit trail), 64 clients, medians of 3 rounds, two runs
(1-minute load 1.5 and 3.0): with the token on every call, reads 1.027 and 0.994 of before, CAS writes
0.975 and 0.925 of before; service CPU per CAS write 824-901 us before, 827-935 us with the token;
service peak RSS 48.5-49.5 MiB on every side. (With the checks as three gRPC interceptors and the audit
trail written by the calls, CAS writes were 0.871 of before.)
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PROCS = 4


def _payload(n: int) -> bytes:
    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.formats.metadata import serialize_metadata
    md = LedgerMetadata(format_version=3, write_quorum=2, ensemble_size=3, ack_quorum=2, length=n,
                        last_entry_id=-1, state="OPEN",
                        ensembles=((0, ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")),),
                        digest_type="CRC32C", password=b"pw", ctime=1700000000000,
                        custom_metadata=(("application", b"bench"),), ctoken=0)
    return serialize_metadata(md)


def _pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


# ------------------------------------------------------------------------------ client processes
def _worker(kind: str, target: str, threads: int, first: int, ledgers: int, seconds: float,
            path_of: dict | None, out: mp.Queue, go: mp.Event, token: str | None = None) -> None:
    """``threads`` clients of one kind; puts (ops, latencies in ms, errors) on ``out``."""
    import logging
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)     # its reconnect chatter at stop
    payload = _payload(7)
    lat: list[float] = []
    ops = [0]
    errors = [0]
    lock = threading.Lock()
    ready = threading.Barrier(threads + 1)
    shared = None
    if kind.startswith("batched-"):     # one client per process: its threads' calls coalesce
        from bkdisk.metaservice.client import MetadataClient
        shared = MetadataClient(target, timeout=30, token=token)

    def one(t: int) -> None:
        rnd = random.Random(first + t)
        mine = (first + t) % ledgers                 # the ledger this client CAS-writes
        if kind.startswith("zk-"):
            from kazoo.client import KazooClient
            c = KazooClient(hosts=target, timeout=10)
            c.start(15)
            get = lambda lid: c.get(path_of[lid])                                 # noqa: E731
            cas = lambda lid, v: c.set(path_of[lid], payload, version=v).version  # noqa: E731
            version = c.get(path_of[mine])[1].version
        else:
            from bkdisk.metaservice.client import MetadataClient
            c = shared if shared is not None else MetadataClient(target, timeout=30, coalesce=False, token=token)
            get = lambda lid: c.read(lid)                                      # noqa: E731
            cas = lambda lid, v: c.write(lid, payload, v).version              # noqa: E731
            version = c.read(mine).version
        ready.wait()
        mine_lat: list[float] = []
        n = bad = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            try:
                if kind.endswith("read"):
                    get(rnd.randrange(ledgers))
                else:
                    version = cas(mine, version)
            except Exception:   # counted, the run goes on
                bad += 1
                continue
            mine_lat.append((time.perf_counter() - t0) * 1000)
            n += 1
        with lock:
            lat.extend(mine_lat)
            ops[0] += n
            errors[0] += bad
        if c is not shared:
            (c.stop() if kind.startswith("zk-") else c.close())

    ts = [threading.Thread(target=one, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    ready.wait()
    out.put(("ready", 0, [], 0, 0.0))
    go.wait()
    cpu0 = time.process_time()          # every thread of this process: the clients' own CPU
    for t in ts:
        t.join()
    used = time.process_time() - cpu0
    if shared is not None:
        shared.close()
    out.put(("done", ops[0], lat, errors[0], used))


def _watch_worker(target: str, threads: int, ledger: int, updates: int, out: mp.Queue) -> None:
    """``threads`` watchers of one ledger; puts every watcher's (version, receive time) list."""
    from bkdisk.metaservice.client import MetadataClient
    got: list[list[tuple[int, float]]] = []
    ready = threading.Barrier(threads + 1)

    def one() -> None:
        c = MetadataClient(target)
        mine: list[tuple[int, float]] = []
        stream = c.watch([(0, ledger)])
        next(stream)                 # CURRENT: the watch is in place
        ready.wait()
        for ch in stream:
            mine.append((ch.version, time.time()))
            if len(mine) == updates:
                break
        got.append(mine)
        c.close()

    ts = [threading.Thread(target=one) for _ in range(threads)]
    for t in ts:
        t.start()
    ready.wait()
    out.put(("ready", None))
    for t in ts:
        t.join()
    out.put(("done", got))


def _spread(n: int) -> list[int]:
    return [n // PROCS + (1 if i < n % PROCS else 0) for i in range(PROCS)]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(kind: str, target: str, clients: int, ledgers: int, seconds: float, path_of: dict | None = None,
         probe=None, servers: dict[str, int] | None = None, token: str | None = None) -> dict:
    """``clients`` clients doing ``kind`` for ``seconds``; ``probe()`` runs once every client is connected.

    Besides throughput and latency: the CPU per operation of the clients (all client processes)
    and of each process in ``servers`` (name -> pid), in microseconds, over the measured phase."""
    ctx = mp.get_context("spawn")
    out, go = ctx.Queue(), ctx.Event()
    procs, first = [], 0
    for n in _spread(clients):
        procs.append(ctx.Process(target=_worker, args=(kind, target, n, first, ledgers, seconds, path_of, out, go,
                                                       token)))
        first += n
    for p in procs:
        p.start()
    for _ in procs:
        out.get(timeout=300)
    probed = probe() if probe is not None else None
    servers = servers or {}
    cpu0 = {name: _cpu_seconds(pid) for name, pid in servers.items()}
    t0 = time.monotonic()
    go.set()
    ops = errors = 0
    client_cpu = 0.0
    lat: list[float] = []
    for _ in procs:
        _tag, n, lt, bad, used = out.get(timeout=seconds + 300)
        ops, errors, client_cpu = ops + n, errors + bad, client_cpu + used
        lat += lt
    wall = time.monotonic() - t0
    cpu = {name: _cpu_seconds(pid) - cpu0[name] for name, pid in servers.items()}
    for p in procs:
        p.join()
    got = {"ops_per_s": round(ops / wall), "p50_ms": round(_pct(lat, 50), 2), "p99_ms": round(_pct(lat, 99), 2),
           "ops": ops, "errors": errors,
           "cpu_us_per_op": {"clients": round(client_cpu / max(ops, 1) * 1e6),
                             **{name: round(c / max(ops, 1) * 1e6) for name, c in cpu.items()}}}
    if probe is not None:
        got["zk_sessions"] = probed
    return got


def fanout(target: str, clients: int, ledger: int, updates: int = 10) -> dict:
    """Delay from a write being sent to each of ``clients`` watchers receiving the change."""
    from bkdisk.metaservice.client import MetadataClient
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_watch_worker, args=(target, n, ledger, updates, out)) for n in _spread(clients)]
    for p in procs:
        p.start()
    for _ in procs:
        out.get(timeout=300)
    c = MetadataClient(target)
    version = c.read(ledger).version
    sent: dict[int, float] = {}
    payload = _payload(11)
    for _ in range(updates):
        t = time.time()
        version = c.write(ledger, payload, version).version
        sent[version] = t
        time.sleep(0.1)             # one change at a time: the delay, not a queue
    delays: list[float] = []
    for _ in procs:
        _tag, got = out.get(timeout=300)
        for mine in got:
            delays += [(t - sent[v]) * 1000 for v, t in mine if v in sent]
    for p in procs:
        p.join()
    c.close()
    return {"watchers": clients, "updates": updates, "deliveries": len(delays),
            "p50_ms": round(_pct(delays, 50), 2), "p99_ms": round(_pct(delays, 99), 2)}


# ------------------------------------------------------------------------------------- services
class Service:
    def __init__(self, store_url: str, token: str | None = None, python: str | None = None):
        # stderr to a file: the audit trail writes a line per mutation, and a pipe nobody reads fills
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([python or sys.executable, "-c", "from bkdisk.cli import main; main()", "metadata",
                                      "serve", "--store", store_url, "--bind", "127.0.0.1:0",
                                      *(["--token", token] if token else [])],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     cwd=tempfile.gettempdir())   # (not a checkout's folder: its install's own code)
        line = self.proc.stdout.readline()
        if " on " not in line:
            self.log.seek(0)
            raise RuntimeError(f"the service did not start: {self.log.read()}")
        self.target = line.rsplit(" on ", 1)[1].strip()

    def peak_rss_mib(self) -> float:
        """The service process's peak resident set so far (VmHWM), MiB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return round(next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM:")) / 1024, 1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def _preload(target: str, ledgers: int, token: str | None = None) -> None:
    from bkdisk.metaservice.client import MetadataClient
    c = MetadataClient(target, token=token)
    data = _payload(1)
    for lid in range(ledgers):
        c.create(data, ledger_id=lid)
    c.close()


def _batched(target: str, a, on: dict[str, int]) -> dict:
    """The same clients sharing one MetadataClient per client process: concurrent calls coalesce."""
    return {"reads": load("batched-read", target, a.clients, a.ledgers, a.seconds, servers=on),
            "cas_writes": load("batched-cas", target, a.clients, a.ledgers, a.seconds, servers=on)}


def bench_service(store_url: str, a) -> dict:
    svc = Service(store_url)
    try:
        _preload(svc.target, a.ledgers)
        on = {"service": svc.proc.pid}
        return {"reads": load("read", svc.target, a.clients, a.ledgers, a.seconds, servers=on),
                "cas_writes": load("cas", svc.target, a.clients, a.ledgers, a.seconds, servers=on),
                "batched": _batched(svc.target, a, on),
                "watch_fanout": fanout(svc.target, a.clients, a.ledgers - 1)}
    finally:
        svc.stop()


def token_cost(a) -> dict:
    """Reads and CAS writes of ``a.clients`` unbatched clients, each call with the token, against the
    same service with no token configured; ``a.rounds`` rounds, the two sides alternating, each on a
    fresh store. The ratio compares the medians of the rounds."""
    import statistics
    token = "bench-" + os.urandom(12).hex()
    sides = [("no_token", None, None), ("token_on_every_call", token, None)]
    if a.before:
        sides.insert(0, ("before_no_token", None, a.before))
    rounds: dict[str, list[dict]] = {side: [] for side, _, _ in sides}
    for _ in range(a.rounds):
        for side, tok, python in sides:
            with tempfile.TemporaryDirectory(prefix="bkdisk-token-bench-") as tmp:
                svc = Service(f"sqlite:{tmp}/meta.db", token=tok, python=python)
                try:
                    _preload(svc.target, a.ledgers, tok)
                    on = {"service": svc.proc.pid}
                    rounds[side].append({
                        "reads": load("read", svc.target, a.clients, a.ledgers, a.seconds, servers=on, token=tok),
                        "cas_writes": load("cas", svc.target, a.clients, a.ledgers, a.seconds, servers=on,
                                           token=tok),
                        "service_peak_rss_mib": svc.peak_rss_mib()})
                finally:
                    svc.stop()
    out: dict = {"rounds": rounds}
    for what in ("reads", "cas_writes"):
        med = {side: statistics.median(r[what]["ops_per_s"] for r in got) for side, got in rounds.items()}
        out[f"{what}_ops_per_s_median"] = med
        out[f"{what}_ratio"] = round(med["token_on_every_call"] / max(med["no_token"], 1), 3)
        if a.before:
            out[f"{what}_ratio_to_before"] = round(med["token_on_every_call"] / max(med["before_no_token"], 1), 3)
    return out


def zk_sessions(zk) -> int:
    """Client sessions ZooKeeper has open (its `cons` listing, less this query's own connection)."""
    return len([x for x in zk.four_letter("cons").splitlines() if "sid=0x" in x])


def bench_zk(a) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from zookeeper_fixture import ZooKeeperServer

    from bkdisk.metaservice.zk_layout import ledger_path
    with tempfile.TemporaryDirectory(prefix="bkdisk-zk-bench-") as tmp:
        zk = ZooKeeperServer(Path(tmp))
        # ZooKeeper admits 60 connections per address by default: 64 clients on loopback need more
        zk.cfg.write_text(zk.cfg.read_text() + "maxClientCnxns=0\n")
        zk.start()
        try:
            url = f"zk://{zk.hosts}/ledgers"
            svc = Service(url)
            try:
                _preload(svc.target, a.ledgers)
                # ZooKeeper sessions counted while the 64 clients are connected to the service
                on = {"service": svc.proc.pid, "zookeeper": zk.proc.pid}
                out = {"reads": load("read", svc.target, a.clients, a.ledgers, a.seconds,
                                     probe=lambda: zk_sessions(zk), servers=on)}
                sessions_during = out["reads"].pop("zk_sessions")
                out["cas_writes"] = load("cas", svc.target, a.clients, a.ledgers, a.seconds, servers=on)
                out["batched"] = _batched(svc.target, a, on)
                out["watch_fanout"] = fanout(svc.target, a.clients, a.ledgers - 1)
                out["zk_sessions_with_service"] = sessions_during
            finally:
                svc.stop()
            from kazoo.client import KazooClient
            probe = KazooClient(hosts=zk.hosts)
            probe.start(15)
            kind = "long" if probe.exists("/ledgers/LAYOUT") and b"LongHierarchical" in \
                probe.get("/ledgers/LAYOUT")[0] else "hierarchical"
            paths = {lid: ledger_path("/ledgers", kind, 0, lid) for lid in range(a.ledgers)}
            probe.stop()
            on = {"zookeeper": zk.proc.pid}
            reads = load("zk-read", zk.hosts, a.clients, a.ledgers, a.seconds, paths, probe=lambda: zk_sessions(zk),
                         servers=on)
            sessions = reads.pop("zk_sessions")
            out["direct_kazoo"] = {"reads": reads,
                                   "cas_writes": load("zk-cas", zk.hosts, a.clients, a.ledgers, a.seconds, paths,
                                                      servers=on),
                                   "zk_sessions": sessions}
            return out
        finally:
            zk.stop()


def main(argv: list[str] | None = None) -> int:
    global PROCS
    ap = argparse.ArgumentParser(prog="python -m bench.metaservice_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=4.0, help="Per measured phase.")
    ap.add_argument("--ledgers", type=int, default=256)
    ap.add_argument("--no-zk", action="store_true", help="Only the embedded store.")
    ap.add_argument("--no-embedded", action="store_true", help="Only ZooKeeper (the service and direct kazoo).")
    ap.add_argument("--token-cost", action="store_true",
                    help="Only reads and writes with the token on every call against none configured.")
    ap.add_argument("--rounds", type=int, default=3, help="--token-cost: rounds of the sides, alternating.")
    ap.add_argument("--before", metavar="PYTHON", default=None,
                    help="--token-cost: the python of another install whose service is a third side (no token).")
    ap.add_argument("--procs", type=int, default=PROCS,
                    help="Client processes the clients are spread over (the same for every side).")
    a = ap.parse_args(argv)
    PROCS = a.procs
    if a.ledgers < a.clients:
        ap.error("--ledgers must be at least --clients (each client CAS-writes a ledger of its own)")
    t0 = time.monotonic()
    result = {"clients": a.clients, "client_procs": PROCS, "seconds_per_phase": a.seconds, "ledgers": a.ledgers,
              "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}
    if a.token_cost:
        result["token_cost"] = token_cost(a)
        result["wall_seconds"] = round(time.monotonic() - t0, 1)
        print(json.dumps(result, indent=2))
        return 0
    if not a.no_embedded:
        with tempfile.TemporaryDirectory(prefix="bkdisk-meta-bench-") as tmp:
            result["embedded"] = bench_service(f"sqlite:{tmp}/meta.db", a)
    if not a.no_zk:
        result["zookeeper"] = bench_zk(a)
    result["wall_seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
