"""Faults under the metadata service: a ZooKeeper restart and an expired ZooKeeper session while clients
watch and write (at most a retry, no write lost or doubled, watches resume, ephemeral registrations
come back); a multi whose reply is lost is applied exactly once; SIGKILL of the service mid-write on
the embedded store loses no acknowledged write."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from metaservice_fixture import with_length
from zookeeper_fixture import started

from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.resolver import DiscoveryClient, service_info
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.metaservice.store import BadVersion
from bkdisk.metaservice.store_url import open_store
from bkdisk.metaservice.zk_store import ZkStore

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def zk_service(tmp_path):
    zk = started(tmp_path / "zk")
    store = open_store(f"zk://{zk.hosts}/ledgers")
    server, port = serve(store)
    yield zk, store, port
    server.stop(0)
    store.close()
    zk.stop()


class Writers:
    """``n`` clients, each CAS-writing its own ledger in a loop; every acknowledged write is kept."""

    def __init__(self, port: int, golden_bin: bytes, n: int = 4):
        self.golden_bin = golden_bin
        self.clients = [MetadataClient(f"127.0.0.1:{port}", timeout=30, retries=60, backoff=0.05)
                        for _ in range(n)]
        for i, c in enumerate(self.clients):
            c.create(golden_bin, ledger_id=1000 + i)
        self.acked: list[list[int]] = [[] for _ in range(n)]
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(n)]

    def _run(self, i: int) -> None:
        c, version = self.clients[i], 0
        while not self.stop.is_set():
            try:
                got = c.write(1000 + i, with_length(self.golden_bin, version + 1), expected_version=version)
            except Exception as exc:   # every failure is reported by the test
                self.errors.append(f"writer {i} at version {version}: {exc}")
                return
            assert got.version == version + 1
            version = got.version
            self.acked[i].append(version)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)
        for c in self.clients:
            c.close()


def _collect(watch, into: list, stop: threading.Event) -> threading.Thread:
    def run():
        try:
            for change in watch:
                into.append(change)
                if stop.is_set():
                    return
        except Exception as exc:   # reported by _check_no_loss
            into.append(exc)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait_for(check, seconds: float = 120.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not check():
        time.sleep(0.05)
    assert check()


def _check_no_loss(store, w: Writers, seen: list, golden_bin: bytes) -> None:
    assert not w.errors, w.errors
    for i, versions in enumerate(w.acked):
        assert versions == list(range(1, len(versions) + 1))     # each acknowledged once, in order
        got = store.read(0, 1000 + i)                             # nothing lost, nothing applied twice
        assert got.version == versions[-1] and got.data == with_length(golden_bin, versions[-1])
    try:
        _wait_for(lambda: any(isinstance(c, Exception) for c in seen)
                  or sum(1 for c in seen if c.change == "UPDATED") >= sum(map(len, w.acked)))
    except AssertionError:
        got = {(c.ledger_id, c.version): c.sequence for c in seen if not isinstance(c, Exception)}
        missing = [(1000 + i, v) for i, vs in enumerate(w.acked) for v in vs if (1000 + i, v) not in got]
        try:
            log = {(x.ledger, x.version): x.sequence for x in store.changes_since(0, 10**6)}
        except BadVersion:          # the ZooKeeper store holds only its newest changes
            log = {}
        raise AssertionError(f"missing {missing} at {[log.get(m) for m in missing]}; "
                             f"head {store.head_sequence()}, last seen {max(got.values())}") from None
    assert not [c for c in seen if isinstance(c, Exception)]
    for i, versions in enumerate(w.acked):
        mine = [c.version for c in seen if c.ledger_id == 1000 + i and c.change == "UPDATED"]
        assert mine == versions                                   # the watch resumed: each change once
    assert [c.sequence for c in seen] == sorted(set(c.sequence for c in seen))


@contextmanager
def _fault_under_load(store, port: int, golden_bin: bytes) -> Iterator[Writers]:
    """Writers and a watcher at work; the body injects a fault once each writer has 5 acknowledged
    updates. After it, every writer must get 5 more through, and nothing may be lost or doubled."""
    watcher = MetadataClient(f"127.0.0.1:{port}", timeout=30)
    seen, stop = [], threading.Event()
    store.follow(0, None)              # every ledger's changes are logged from here on
    w = Writers(port, golden_bin)
    _collect(watcher.watch(watch_all=True, after_sequence=store.head_sequence()), seen, stop)
    try:
        with w:
            _wait_for(lambda: min(map(len, w.acked)) >= 5)
            yield w
            before = [len(a) for a in w.acked]
            _wait_for(lambda: all(len(a) >= b + 5 for a, b in zip(w.acked, before)))
        _check_no_loss(store, w, seen, golden_bin)
    finally:
        stop.set()
        watcher.close()


def test_zookeeper_restart_while_clients_write_and_watch(zk_service, golden_bin):
    zk, store, port = zk_service
    with _fault_under_load(store, port, golden_bin):
        zk.restart()                                              # same data dir and port
        assert store.interruptions >= 1                           # the service saw the outage


def test_expired_session_while_clients_write_watch_and_bookies_stay_registered(zk_service, golden_bin):
    zk, store, port = zk_service
    d = DiscoveryClient(f"127.0.0.1:{port}", timeout=10)
    reg = d.register("bk-1.rack-a", service_info("10.0.0.1", 3181))
    znode = "/ledgers/available/bk-1.rack-a"
    old_session = store.zk.client_id[0]
    with _fault_under_load(store, port, golden_bin):
        # Expire the service's session the way kazoo's own test harness does: a second client joins
        # it with the same id and password and closes it; ZooKeeper ends the session for both.
        thief = KazooClient(hosts=zk.hosts, client_id=store.zk.client_id)
        thief.start(timeout=15)
        thief.stop()
        thief.close()
        _wait_for(lambda: store.zk.client_id is not None and store.zk.client_id[0] != old_session
                  and store._up.is_set())
        assert store.interruptions >= 1
    # ZooKeeper deleted the old session's ephemeral znode; the service wrote it back under the new one.
    _wait_for(lambda: (store.zk.exists(znode) or None) is not None
              and store.zk.exists(znode).ephemeralOwner == store.zk.client_id[0])
    assert store.zk.get(znode)[0] == service_info("10.0.0.1", 3181).SerializeToString()
    reg.close()
    d.close()


def test_iterate_and_read_through_a_zookeeper_outage_see_only_a_retry(zk_service, golden_bin):
    zk, store, port = zk_service
    for i in range(50):
        store.create(0, i, golden_bin)
    c = MetadataClient(f"127.0.0.1:{port}", timeout=30, retries=600, backoff=0.05)
    zk.stop()
    _wait_for(lambda: not store._up.is_set())
    result: dict = {}

    def run():
        result["ids"] = list(c.iterate(limit_per_response=7))
        result["one"] = c.read(3)
    t = threading.Thread(target=run)
    t.start()
    _wait_for(lambda: c.rpc_count >= 3)                      # STORE_UNAVAILABLE, retried
    zk.start()
    t.join(timeout=120)
    assert result["ids"] == [(0, i) for i in range(50)] and result["one"].version == 0
    c.close()


class _LostReply:
    """Wraps one kazoo call of the store (``set`` or ``create``): the first call raises
    ConnectionLoss, after really applying (``applied``) or without sending anything."""

    def __init__(self, store, name: str, applied: bool):
        self.real, self.applied, self.fired = getattr(store.zk, name), applied, False
        self.store, self.name = store, name
        setattr(store.zk, name, self)

    def __call__(self, *args, **kw):
        if self.fired:
            return self.real(*args, **kw)
        self.fired = True
        if self.applied:
            self.real(*args, **kw)
        raise ConnectionLoss()

    def restore(self):
        setattr(self.store.zk, self.name, self.real)


@pytest.mark.parametrize("applied", [True, False])
def test_a_write_whose_reply_is_lost_is_applied_exactly_once(zk_service, golden_bin, applied):
    _zk, store, port = zk_service
    c = MetadataClient(f"127.0.0.1:{port}", timeout=30)
    c.create(golden_bin, ledger_id=5)
    store.follow(0, None)
    head = store.head_sequence()
    hook = _LostReply(store, "set", applied)
    got = c.write(5, with_length(golden_bin, 9), expected_version=0)
    hook.restore()
    assert hook.fired and got.version == 1
    assert store.read(0, 5, consistent=True).version == 1
    hook2 = _LostReply(store, "create", applied)
    created = c.create(golden_bin)                               # a generated id: never resent blindly
    hook2.restore()
    assert hook2.fired and store.read(0, created.ledger_id, consistent=True).version == 0
    _wait_for(lambda: len(store.changes_since(head)) >= 2)
    assert [(x.change, x.ledger, x.version) for x in store.changes_since(head)] == [
        ("UPDATED", 5, 1), ("CREATED", created.ledger_id, 0)]
    assert store.ledger_ids(0, None, 10) == sorted([5, created.ledger_id])
    c.close()


def test_a_resume_point_the_service_does_not_hold_is_bad_version_on_zookeeper(tmp_path, golden_bin):
    zk = started(tmp_path / "zk")
    store = ZkStore(zk.hosts, "/ledgers", retain_changes=10)
    server, port = serve(store)
    c = MetadataClient(f"127.0.0.1:{port}")
    try:
        store.follow(0, None)
        start = store.head_sequence()
        for i in range(40):
            store.create(0, i, golden_bin)
        _wait_for(lambda: store.head_sequence() == start + 40)
        head = store.head_sequence()
        with pytest.raises(BadVersion):
            store.changes_since(start)                       # dropped: only the newest 10 are held
        assert [x.ledger for x in store.changes_since(head - 3)] == [37, 38, 39]
        with pytest.raises(MetadataError) as info:
            next(c.watch(watch_all=True, after_sequence=start))
        assert info.value.code == "BAD_VERSION"
        # a point from before this service started (another instance's) is refused, not resumed after
        with pytest.raises(MetadataError) as info:
            next(c.watch(watch_all=True, after_sequence=store.follower.first - 1))
        assert info.value.code == "BAD_VERSION"
    finally:
        c.close()
        server.stop(0)
        store.close()
        zk.stop()


SERVE = """
import sys
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore
server, port = serve(SqliteStore(sys.argv[1]))
print(port, flush=True)
server.wait_for_termination()
"""


def _spawn(db: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(db)], stdout=subprocess.PIPE, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc, int(proc.stdout.readline())


def test_sigkill_mid_write_on_the_embedded_store_keeps_every_acknowledged_write(tmp_path, golden_bin):
    db = tmp_path / "meta.db"
    proc, port = _spawn(db)
    acked: list[int] = []
    stop = threading.Event()

    def writer(k: int) -> None:
        c = MetadataClient(f"127.0.0.1:{port}", timeout=10, retries=0)
        for i in range(k, 1_000_000, 4):
            if stop.is_set():
                break
            try:
                c.create(golden_bin, ledger_id=i)
            except Exception:   # the service was killed: this write was not acknowledged
                break
            acked.append(i)
        c.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    _wait_for(lambda: len(acked) >= 200)
    os.kill(proc.pid, signal.SIGKILL)                        # while four writers are mid-call
    proc.wait()
    stop.set()
    for t in threads:
        t.join(timeout=60)
    proc, port = _spawn(db)                                   # restart on the same file
    try:
        c = MetadataClient(f"127.0.0.1:{port}", timeout=10)
        present = {lid for _s, lid in c.iterate()}
        assert set(acked) <= present                          # every acknowledged write is there
        assert len(present - set(acked)) <= 4                 # at most the four in flight were applied
        for lid in present:
            assert c.read(lid).serialized == golden_bin
        c.create(golden_bin, ledger_id=10**9)                 # and the store still takes writes
        c.close()
    finally:
        proc.kill()
        proc.wait()
    store = SqliteStore(db)
    assert store.integrity_check() == "ok"
    log = store.changes_since(0, limit=10**6)
    assert [x.sequence for x in log] == sorted(set(x.sequence for x in log))
    assert sorted(x.ledger for x in log if x.change == "CREATED") == sorted(present | {10**9})
    store.close()
