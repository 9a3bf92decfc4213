"""Changes made by a plain ZooKeeper client, as BookKeeper's client makes them (its znode paths, its
LedgerMetadataSerDe bytes, create at version 0, close as a setData at the version read, delete),
reach watchers through the service, across a ZooKeeper restart and an expired session; and reads
through the service's cache follow them. On an open ZooKeeper, and on one secured as a BookKeeper cluster
with zkEnableSecurity (SASL required, or digest), the service and the writer then the bookies' identity."""
from __future__ import annotations

import dataclasses
import queue
import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.security import CREATOR_ALL_ACL
from metaservice_fixture import count_reads, uncount_reads
from zookeeper_fixture import started

from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.formats.metadata import serialize_metadata
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.zk_auth import ZkCredentials
from bkdisk.metaservice.zk_store import ZkStore

ROOT = "/ledgers"


def bookkeeper_path(ledger: int) -> str:
    """HierarchicalLedgerManager's path below Integer.MAX_VALUE: %010d split 2-4-4, leaf L<last 4>."""
    d = f"{ledger:010d}"
    return f"{ROOT}/{d[:2]}/{d[2:6]}/L{d[6:]}"


def opened(ledger: int) -> LedgerMetadata:
    return LedgerMetadata(format_version=3, write_quorum=2, ensemble_size=3, ack_quorum=2, length=0,
                          last_entry_id=-1, state="OPEN",
                          ensembles=((0, ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")),),
                          digest_type="CRC32C", password=b"pw", ctime=1700000000000 + ledger,
                          custom_metadata=(("application", b"zk-direct"),), ctoken=ledger)


def closed(md: LedgerMetadata, entries: int) -> LedgerMetadata:
    return dataclasses.replace(md, state="CLOSED", last_entry_id=entries - 1, length=entries * 100)


def identity(zk) -> ZkCredentials | None:
    """The service's credentials on ZooKeeper server ``zk``: the bookies' (None on an open ZooKeeper)."""
    from zookeeper_fixture import PASSWORD, USER
    return {"sasl": ZkCredentials(sasl=(USER, PASSWORD)), "digest": ZkCredentials(digest=(USER, PASSWORD)),
            None: None}[zk.security]


@pytest.fixture(params=["recursive", "ledger", "recursive sasl", "ledger digest"])
def cluster(tmp_path, request):
    """Either kind of watch: one persistent recursive watch, or a watch per ledger and listing; on an
    open ZooKeeper or a secured one."""
    kind, _, security = request.param.partition(" ")
    zk = started(tmp_path / "zk", security=security or None)
    store = ZkStore(zk.hosts, ROOT, recursive_watch=kind == "recursive", auth=identity(zk))
    server, port = serve(store)
    # The test's own writer (standing in for a BookKeeper client) keeps its session across a ZooKeeper
    # restart on a loaded machine: only the service's session is expired on purpose. On a secured
    # ZooKeeper it is a bookie: its identity, CREATOR_ALL on what it creates.
    secured = {"default_acl": CREATOR_ALL_ACL, **zk.client_options()} if security else {}
    bk = KazooClient(hosts=zk.hosts, timeout=30, connection_retry={"max_tries": -1, "max_delay": 0.5},
                     command_retry={"max_tries": -1, "max_delay": 0.5}, **secured)
    bk.start(15)
    try:
        yield zk, store, port, bk
    finally:
        bk.stop()
        bk.close()
        server.stop(0)
        store.close()
        zk.stop()


def _again(bk: KazooClient, op: str, path: str, *args, **kw):
    """A writer's call as a BookKeeper client makes it across a restart on a loaded machine: retried
    through connection loss and session expiry (kazoo's retry), and an attempt that went through
    before the loss taken for done (create: the node exists; delete: it is gone; a versioned set: the
    version moved on, whose new version is returned)."""
    try:
        return bk.retry(getattr(bk, op), path, *args, **kw)
    except NodeExistsError:
        return None
    except NoNodeError:
        if op == "delete":
            return None
        raise
    except BadVersionError:
        if op != "set":
            raise
        return bk.retry(bk.exists, path)


_WATCHING: list[MetadataClient] = []


@pytest.fixture(autouse=True)
def _close_watching_clients():
    """A watch that was once answered reopens for as long as its thread runs: each test's watching
    clients are closed when it ends, or their threads would call the stopped service until the
    process exits (and other tests would find those calls)."""
    yield
    while _WATCHING:
        _WATCHING.pop().close()


def _stream(c: MetadataClient, **kw) -> queue.Queue:
    _WATCHING.append(c)
    out: queue.Queue = queue.Queue()

    def run():
        try:
            for ch in c.watch(**kw):
                out.put(ch)
        except Exception as exc:   # the test reads it from the queue
            out.put(exc)
    threading.Thread(target=run, daemon=True).start()
    return out


def _next(q: queue.Queue, seconds: float = 60.0):
    got = q.get(timeout=seconds)
    if isinstance(got, Exception):
        raise got
    return got


def _expire(zk, store) -> None:
    """End the service's session as kazoo's own tests do: join it from a second client and close."""
    end = time.monotonic() + 60
    while time.monotonic() < end and not (store._up.is_set() and store.zk.client_id):
        time.sleep(0.05)                  # after a restart the service may still be reconnecting
    old = store.zk.client_id
    thief = KazooClient(hosts=zk.hosts, client_id=old, **zk.client_options())
    thief.start(15)
    thief.stop()
    thief.close()
    end = time.monotonic() + 60
    while time.monotonic() < end:
        now = store.zk.client_id          # None while kazoo reconnects
        if now is not None and now[0] != old[0] and store._up.is_set():
            return
        time.sleep(0.05)
    raise AssertionError("the service's ZooKeeper session did not come back renewed within 60 s")


def test_one_ledger_created_closed_and_deleted_directly_reaches_watchers_across_restart_and_expiry(cluster):
    zk, store, port, bk = cluster
    c = MetadataClient(f"127.0.0.1:{port}", timeout=30, retries=60)
    one = _stream(c, ledgers=[(0, 7)])                 # watches a ledger that does not exist yet
    everything = _stream(MetadataClient(f"127.0.0.1:{port}", timeout=30), watch_all=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and not (store.follower.all_since and (0, 7) in store.follower.since):
        time.sleep(0.05)
    assert store.follower.recursive == store.follower.recursive_allowed   # following all: the kind asked
    md = opened(7)
    bk.create(bookkeeper_path(7), serialize_metadata(md), makepath=True)
    delays = []
    t0 = time.monotonic()
    for q in (one, everything):
        got = _next(q)
        assert (got.change, got.ledger_id, got.version, got.serialized) == ("CREATED", 7, 0, serialize_metadata(md))
    delays.append(time.monotonic() - t0)
    assert c.read(7).version == 0
    steps = [("restart", lambda: zk.restart()), ("expire", lambda: _expire(zk, store)), ("none", lambda: None)]
    version = 0
    for i, (_name, fault) in enumerate(steps):
        fault()
        md = closed(md, i + 1)
        version = _again(bk, "set", bookkeeper_path(7), serialize_metadata(md), version=version).version
        t0 = time.monotonic()
        for q in (one, everything):
            got = _next(q)
            assert (got.change, got.version, got.serialized) == ("UPDATED", version, serialize_metadata(md))
        delays.append(time.monotonic() - t0)
        # the cache follows the change: a plain read through the service sees the new version
        assert c.read(7).version == version
    _again(bk, "delete", bookkeeper_path(7), version=version)
    t0 = time.monotonic()
    for q in (one, everything):
        got = _next(q)
        assert (got.change, got.ledger_id, got.version) == ("DELETED", 7, version)
    delays.append(time.monotonic() - t0)
    assert one.empty() and everything.empty()
    print(f"watch delays (s) create, update after restart, after expiry, update, delete: "
          f"{[round(d, 3) for d in delays]}")


def test_many_ledgers_written_directly_while_zookeeper_restarts_and_the_session_expires(cluster):
    zk, store, port, bk = cluster
    watcher = MetadataClient(f"127.0.0.1:{port}", timeout=30, retries=60)
    seen = _stream(watcher, watch_all=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and not store.follower.all_since:
        time.sleep(0.05)
    final: dict[int, int | None] = {}

    def bookkeeper_client(ledgers: range) -> None:
        for lid in ledgers:        # create, close, and delete every third, as a BookKeeper client would
            md = opened(lid)
            _again(bk, "create", bookkeeper_path(lid), serialize_metadata(md), makepath=True)
            v = _again(bk, "set", bookkeeper_path(lid), serialize_metadata(closed(md, 3)), version=0).version
            final[lid] = v
            if lid % 3 == 0:
                _again(bk, "delete", bookkeeper_path(lid), version=v)
                final[lid] = None

    bookkeeper_client(range(0, 40))
    zk.restart()
    bookkeeper_client(range(40, 80))
    _expire(zk, store)
    bookkeeper_client(range(80, 120))
    # every ledger's last state arrives; per ledger the changes are in order, none twice
    events: dict[int, list] = {}
    deadline = time.monotonic() + 120

    def settled() -> bool:
        for lid, v in final.items():
            got = events.get(lid, [])
            last = got[-1] if got else None
            # A ledger created and deleted between two re-reads may go unseen: ZooKeeper's children
            # watch says that a list changed, not what was in it meanwhile.
            if v is None and last is not None and last.change != "DELETED":
                return False
            if v is not None and (last is None or (last.change, last.version) != ("UPDATED", v)
                                  and (last.change, last.version) != ("CREATED", v)):
                return False
        return True
    while not settled():
        try:
            ch = _next(seen, max(1.0, deadline - time.monotonic()))
        except queue.Empty:
            late = {lid: (v, [(e.change, e.version) for e in events.get(lid, [])]) for lid, v in final.items()}
            unsettled = [(k, x) for k, x in late.items() if x[0] is not None and (not x[1] or x[1][-1][1] != x[0])]
            raise AssertionError(f"not settled: {unsettled[:8]}") from None
        events.setdefault(ch.ledger_id, []).append(ch)
    for lid, got in events.items():
        kinds = [(e.change, e.version) for e in got]
        assert kinds[0][0] == "CREATED", (lid, kinds)
        assert len(set(kinds)) == len(kinds), (lid, kinds)                 # nothing twice
        assert [v for _k, v in kinds if _k != "DELETED"] == sorted(v for _k, v in kinds if _k != "DELETED")
        assert [k for k, _v in kinds].count("DELETED") <= 1 and ("DELETED" not in [k for k, _ in kinds[:-1]])
    assert {lid for lid, v in final.items() if v is not None} <= set(events) <= set(final)


def test_the_layout_check_finds_a_znode_bookkeeper_would_not_write(cluster):
    zk, store, port, bk = cluster
    from zookeeper_fixture import foreign_znodes
    c = MetadataClient(f"127.0.0.1:{port}", timeout=30)
    c.create(serialize_metadata(opened(1)), ledger_id=1)
    c.create(serialize_metadata(opened(2)), scope=9, ledger_id=2)
    c.watch(watch_all=True)
    on_zk = zk.client_options()
    assert foreign_znodes(zk.hosts, **on_zk) == []           # the service wrote only BookKeeper's znodes
    bk.create(f"{ROOT}/bkdisk/changelog", b"", makepath=True)
    assert foreign_znodes(zk.hosts, **on_zk) == [f"{ROOT}/bkdisk", f"{ROOT}/bkdisk/changelog"]
    bk.delete(f"{ROOT}/bkdisk", recursive=True)
    c.close()


def test_a_cached_ledger_written_and_not_followed_costs_zookeeper_no_read_until_it_is_read_again(cluster):
    zk, store, port, bk = cluster
    c = MetadataClient(f"127.0.0.1:{port}")
    first = serialize_metadata(opened(7))
    c.create(first, ledger_id=7)
    assert c.read(7).version == 0                       # now in the read cache, its watch armed
    reads = count_reads(store.zk)
    try:
        v = c.write(7, serialize_metadata(closed(opened(7), 1)), 0).version
        v = c.write(7, serialize_metadata(closed(opened(7), 2)), v).version
        store.follower.wait(lambda: False, 0.5)         # room for the watch event and any re-read
        assert reads == []
        got = c.read(7)                                 # read through ZooKeeper, cached again
        assert (got.version, got.serialized) == (2, serialize_metadata(closed(opened(7), 2)))
        assert len(reads) == 1
        # a change made directly still reaches the next read
        bk.set(bookkeeper_path(7), serialize_metadata(closed(opened(7), 3)), version=2)
        deadline = time.monotonic() + 60
        while c.read(7).version != 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.read(7).serialized == serialize_metadata(closed(opened(7), 3))
    finally:
        uncount_reads(store.zk)
        c.close()


def test_a_zookeeper_that_refuses_the_recursive_watch_is_watched_per_ledger(tmp_path, monkeypatch):
    from kazoo.exceptions import UnimplementedError

    from bkdisk.metaservice import zk_persistent

    def refused(zk, path, timeout=30.0):
        raise UnimplementedError()        # what a ZooKeeper older than 3.6 answers addWatch
    monkeypatch.setattr(zk_persistent, "add_recursive_watch", refused)
    zk = started(tmp_path / "zk")
    store = ZkStore(zk.hosts, ROOT)
    bk = KazooClient(hosts=zk.hosts)
    bk.start(15)
    try:
        store.follow(0, None)
        assert store.follower.recursive is False
        head = store.head_sequence()
        bk.create(bookkeeper_path(9), serialize_metadata(opened(9)), makepath=True)
        assert store.wait_for_change(head, 30)
        assert [(c.change, c.ledger) for c in store.changes_since(head)] == [("CREATED", 9)]
    finally:
        bk.stop()
        bk.close()
        store.close()
        zk.stop()
