"""Bookie discovery and BP-41's BookieAddressResolver over a real gRPC server on 127.0.0.1: registration
that lives as long as its session, writable and read-only listings, BookieServiceInfo, the registration
watch, and the resolver's cache (hits without an RPC, counted at the server), invalidation, legacy mode."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from metaservice_fixture import served

from bkdisk.formats.bookieid import HostPort
from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.discovery import Registry
from bkdisk.metaservice.resolver import BookieAddressResolver, DiscoveryClient, ResolveError, service_info
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore

WAIT = 30.0     # upper bound for something asynchronous to happen; never asserted as a timing


class CountingRegistry(Registry):
    """Counts the lookups GetBookieServiceInfo makes: one per RPC that reaches the server."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0
        self.unregisters: list[tuple[str, bool]] = []     # (bookie id, whether it removed anything)

    def unregister(self, bookie_id, session=None):
        removed = super().unregister(bookie_id, session)
        self.unregisters.append((bookie_id, removed))
        return removed

    def get(self, bookie_id):
        self.lookups += 1
        return super().get(bookie_id)


@pytest.fixture()
def service(tmp_path):
    registry = CountingRegistry()
    with served(SqliteStore(tmp_path / "m.db"), DiscoveryClient, registry=registry) as (client, port):
        yield registry, client, port


def until(predicate, what: str):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _ids(bookies) -> list[str]:
    return [b.bookie_id for b in bookies]


def _code(fn) -> str:
    with pytest.raises(MetadataError) as info:
        fn()
    return info.value.code


def test_register_list_info_unregister(service):
    _reg, d, _port = service
    info = service_info("10.0.0.1", 3181, {"rack": "/r1", "version": "4.17"})
    info.endpoints.add(id="http-server", host="10.0.0.1", port=8000, protocol="http")
    a = d.register("bk-1.rack-a", info)
    b = d.register("10.0.0.2:3181", service_info("10.0.0.2", 3181), read_only=True)
    c = d.register("bk-3", service_info("10.0.0.3", 3181))
    assert _ids(d.list()) == ["bk-1.rack-a", "bk-3"]
    assert _ids(d.list(read_only=True)) == ["10.0.0.2:3181"]
    got = d.info("bk-1.rack-a")
    assert got.read_only is False and got.properties == {"rack": "/r1", "version": "4.17"}
    assert got.endpoints == (("bookie-rpc", "10.0.0.1", 3181, "bookie-rpc"), ("http-server", "10.0.0.1", 8000, "http"))
    assert d.info("10.0.0.2:3181").read_only is True
    d.unregister("bk-3")
    assert _ids(d.list()) == ["bk-1.rack-a"]
    assert _code(lambda: d.info("bk-3")) == "BOOKIE_NOT_FOUND"
    assert _code(lambda: d.unregister("bk-3")) == "BOOKIE_NOT_FOUND"
    assert _code(lambda: d.info("bad id")) == "BAD_REQUEST"
    assert _code(lambda: d.register("a/b", service_info("h", 1))) == "BAD_REQUEST"
    for r in (a, b, c):
        r.close()


def test_a_registration_goes_with_its_session(service):
    _reg, d, port = service
    r = d.register("bk-1", service_info("10.0.0.1", 3181))
    assert _ids(d.list()) == ["bk-1"]
    r.close()                                           # the session ends
    until(lambda: d.list() == [], "bk-1 gone after its session closed")
    # a bookie process killed outright: its registration goes too
    code = ("import time; from bkdisk.metaservice.resolver import DiscoveryClient, service_info; "
            f"r = DiscoveryClient('127.0.0.1:{port}').register('bk-2', service_info('10.0.0.2', 3181), "
            "read_only=True); "
            "print('up', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        assert _ids(d.list(read_only=True)) == ["bk-2"]
        proc.kill()
        proc.wait(30)
        until(lambda: d.list(read_only=True) == [], "bk-2 gone after its process was killed")
    finally:
        proc.kill()


def test_a_bookie_id_a_live_session_holds_is_refused_and_a_restart_waits_for_the_old_session(service):
    """Two bookies answering to one id would each be sent the other's entries: as a BookKeeper bookie
    refuses to start while another session holds its registration, Register waits for the holder's
    session to end (a restart: the old stream being torn down) and refuses with BOOKIE_EXISTS after it."""
    registry, d, _port = service
    registry.takeover_wait = 0.5
    old = d.register("bk-1", service_info("10.0.0.1", 3181))
    assert _code(lambda: d.register("bk-1", service_info("10.0.0.9", 3181))) == "BOOKIE_EXISTS"
    assert d.info("bk-1").endpoints[0][1] == "10.0.0.1" and _ids(d.list()) == ["bk-1"]
    registry.takeover_wait = WAIT
    got: list = []
    restarted = threading.Thread(target=lambda: got.append(d.register("bk-1", service_info("10.0.0.9", 3181))))
    restarted.start()
    time.sleep(0.3)         # the new registration is waiting when the old session ends
    old.close()
    restarted.join(WAIT)
    assert len(got) == 1, "the registration after the old session ended was refused"
    new = got[0]
    assert d.info("bk-1").endpoints[0][1] == "10.0.0.9"
    assert _ids(d.list()) == ["bk-1"]
    new.close()
    until(lambda: d.list() == [], "every bookie gone")


def test_the_registration_watch_reports_current_then_each_change(service):
    _reg, d, port = service
    a = d.register("bk-1", service_info("10.0.0.1", 3181))
    events: list[tuple[str, str, bool]] = []
    watcher = DiscoveryClient(f"127.0.0.1:{port}")
    stream = watcher.watch()

    def follow():
        for change, b in stream:
            events.append((change, b.bookie_id, b.read_only))
            if len(events) == 4:
                return

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    until(lambda: events, "the snapshot arrived")
    b = d.register("bk-2", service_info("10.0.0.2", 3181), read_only=True)
    d.unregister("bk-1")
    b.close()
    t.join(WAIT)
    assert events == [("CURRENT", "bk-1", False), ("CREATED", "bk-2", True), ("DELETED", "bk-1", False),
                      ("DELETED", "bk-2", True)]
    a.close()
    watcher.close()


def test_a_token_guards_registration(tmp_path):
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store, token="s3cret")
    try:
        anon = DiscoveryClient(f"127.0.0.1:{port}")
        good = DiscoveryClient(f"127.0.0.1:{port}", token="s3cret")
        assert _code(lambda: anon.register("bk-1", service_info("h", 1))) == "PERMISSION_DENIED"
        r = good.register("bk-1", service_info("h", 1))
        assert _code(lambda: anon.unregister("bk-1")) == "PERMISSION_DENIED"
        assert _code(lambda: anon.list()) == "PERMISSION_DENIED"   # reading needs the token too
        assert _ids(good.list()) == ["bk-1"]
        r.close()
    finally:
        server.stop(0)


def test_resolver_cache_hits_make_no_rpc(service):
    registry, d, port = service
    regs = [d.register("bk-1.rack-a", service_info("10.0.0.1", 3181)),
            d.register("bk-2.rack-a", service_info("10.0.0.2", 3182))]
    resolver = BookieAddressResolver(DiscoveryClient(f"127.0.0.1:{port}"))
    try:
        before, client_before = registry.lookups, resolver.discovery.rpc_count
        assert resolver.resolve("bk-1.rack-a") == HostPort("10.0.0.1", 3181)
        assert resolver.resolve("bk-2.rack-a") == HostPort("10.0.0.2", 3182)
        assert registry.lookups - before == 2
        for _ in range(50):
            assert resolver.resolve("bk-1.rack-a") == HostPort("10.0.0.1", 3181)
            assert resolver.resolve("bk-2.rack-a") == HostPort("10.0.0.2", 3182)
        assert registry.lookups - before == 2                        # counted at the server
        assert resolver.discovery.rpc_count - client_before == 2
        with pytest.raises(ResolveError, match="BOOKIE_NOT_FOUND"):
            resolver.resolve("bk-9")
        with pytest.raises(ResolveError, match="invalid BookieId"):
            resolver.resolve("bk 1")
    finally:
        resolver.close()
        for r in regs:
            r.close()


def test_resolver_drops_an_entry_when_the_bookie_re_registers_with_a_new_address(service):
    registry, d, port = service
    first = d.register("bk-1.rack-a", service_info("10.0.0.1", 3181))
    resolver = BookieAddressResolver(DiscoveryClient(f"127.0.0.1:{port}"))
    try:
        assert resolver.resolve("bk-1.rack-a") == HostPort("10.0.0.1", 3181)
        g = resolver.generation
        first.close()
        until(lambda: resolver.generation > g, "the resolver saw the unregistration")
        g = resolver.generation
        second = d.register("bk-1.rack-a", service_info("10.0.0.7", 4181))   # the bookie moved
        until(lambda: resolver.generation > g, "the resolver saw the new registration")
        before = registry.lookups
        for _ in range(20):
            assert resolver.resolve("bk-1.rack-a") == HostPort("10.0.0.7", 4181)
        assert registry.lookups - before == 1                           # one RPC, then cached again
        second.close()
        until(lambda: d.list() == [], "bk-1 unregistered")
        with pytest.raises(ResolveError, match="BOOKIE_NOT_FOUND"):
            until(lambda: resolver.resolve("bk-1.rack-a") is None, "the cached address dropped")
    finally:
        resolver.close()


def test_legacy_mode_needs_host_port_ids_and_makes_no_rpc():
    resolver = BookieAddressResolver(legacy=True)
    assert resolver.resolve("10.0.0.1:3181") == HostPort("10.0.0.1", 3181)
    assert resolver.resolve("bk-1.example.com:3181") == HostPort("bk-1.example.com", 3181)
    for bad in ("bk-1.rack-a", "bk-1:notaport"):
        with pytest.raises(ResolveError, match="legacy mode|invalid BookieId"):
            resolver.resolve(bad)
    with pytest.raises(ResolveError, match="invalid BookieId"):
        resolver.resolve("has space:1")
    with pytest.raises(ValueError):
        BookieAddressResolver()            # neither discovery nor legacy mode
