"""The ledger metadata service over a REAL ZooKeeper (started here on 127.0.0.1): the RPC tests of
test_metaservice_rpc run again with the ZooKeeper store, the znodes written are BookKeeper's paths and
bytes, metadata that BookKeeper's layout puts in ZooKeeper directly is served, and bookie
registrations become BookKeeper's ephemeral znodes under available/."""
from __future__ import annotations

import itertools
import socket
import threading
import time
import uuid

import pytest
from kazoo.security import OPEN_ACL_UNSAFE
from metaservice_fixture import served

# The store-independent RPC tests, collected here a second time: they get this module's `service`.
from test_metaservice_rpc import (  # noqa: F401
    test_concurrent_cas_writers_exactly_one_wins,
    test_create_generates_increasing_scope0_ids_and_random_scoped_ids,
    test_golden_folders_import_and_export_byte_for_byte,
    test_inconsistent_metadata_is_bad_request,
    test_malformed_metadata_is_bad_request_and_writes_nothing,
    test_malformed_requests_get_bad_request,
    test_read_converts_formats_and_returns_the_bp16_message,
    test_read_write_remove_and_their_status_codes,
    test_watch_delivers_create_update_delete_in_order_and_resumes,
)

from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.resolver import DiscoveryClient, service_info
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.store import StoreError
from bkdisk.metaservice.store_url import open_store
from bkdisk.metaservice.zk_store import ZkStore

_roots = itertools.count(1)
HYBRID = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
LONG = b"2\norg.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory:1"


def _root() -> str:
    return f"/t{next(_roots)}/ledgers"


@pytest.fixture()
def service(zookeeper):
    store = open_store(f"zk://{zookeeper.hosts}{_root()}")
    with served(store, token=None) as (client, port):
        yield store, client, port


def bookkeeper_path(root: str, ledger: int, layout: bytes = HYBRID) -> str:
    """Written from BookKeeper's StringUtils rules, independently of metaservice.zk_layout."""
    if layout == HYBRID and ledger < 2**31 - 1:
        d = f"{ledger:010d}"
        return f"{root}/{d[:2]}/{d[2:6]}/L{d[6:]}"
    d = f"{ledger:019d}"
    return f"{root}/{d[:3]}/{d[3:7]}/{d[7:11]}/{d[11:15]}/L{d[15:]}"


def test_bookkeeper_path_rule_matches_the_documented_examples():
    assert bookkeeper_path("/ledgers", 1) == "/ledgers/00/0000/L0001"
    assert bookkeeper_path("/ledgers", 4294967296) == "/ledgers/000/0000/0042/9496/L7296"


def test_cluster_znodes_are_bookkeepers(service, kz):
    store, _c, _ = service
    root = store.root
    assert kz.get(f"{root}/LAYOUT")[0] == HYBRID
    uuid.UUID(kz.get(f"{root}/INSTANCEID")[0].decode())
    for node in ("available", "available/readonly", "cookies"):
        assert kz.exists(f"{root}/{node}") is not None, node


def test_without_credentials_every_znode_is_open_to_all_as_bookkeeper_without_zk_security(service, kz, golden_bin):
    store, c, port = service
    c.create(golden_bin, ledger_id=5)
    c.create(golden_bin, scope=9, ledger_id=2)
    c.create(golden_bin)
    reg = DiscoveryClient(f"127.0.0.1:{port}", timeout=5).register("bk-1", service_info("10.0.0.1", 3181))
    try:
        nodes, stack = [], ["/" + store.root.strip("/").split("/")[0]]
        while stack:
            nodes.append(stack.pop())
            stack.extend(f"{nodes[-1]}/{n}" for n in kz.get_children(nodes[-1]))
        assert len(nodes) > 15 and f"{store.root}/available/bk-1" in nodes
        assert {p: kz.get_acls(p)[0] for p in nodes if kz.get_acls(p)[0] != OPEN_ACL_UNSAFE} == {}
    finally:
        reg.close()


def test_znodes_written_are_bookkeepers_paths_and_bytes_for_the_golden_metadata(service, kz, golden):
    store, c, _ = service
    files = sorted(golden.glob("*/metadata/*.bin")) + sorted(golden.glob("*/metadata/*.txt"))
    assert len(files) > 20
    for f in files:
        lid = int(f.name.split(".")[0], 16)
        data = f.read_bytes()
        c.create(data, ledger_id=lid)
        got, stat = kz.get(bookkeeper_path(store.root, lid))
        assert got == data and stat.version == 0, f
        c.write(lid, data, expected_version=0)
        assert kz.get(bookkeeper_path(store.root, lid))[1].version == 1   # znode version = metadata version
        c.remove(lid, expected_version=1)
        assert kz.exists(bookkeeper_path(store.root, lid)) is None


def test_generated_ids_come_from_bookkeepers_idgen_znode(service, kz, golden_bin):
    store, c, _ = service
    ids = [c.create(golden_bin).ledger_id for _ in range(3)]
    # BookKeeper's generator: an EPHEMERAL_SEQUENTIAL idgen/ID-<n> whose n is the id, then deleted.
    node = kz.create(f"{store.root}/idgen/ID-", b"", ephemeral=True, sequence=True)
    assert int(node.rsplit("-", 1)[1]) == ids[-1] + 1 and ids == [ids[0], ids[0] + 1, ids[0] + 2]
    assert kz.get_children(f"{store.root}/idgen") == [node.rsplit("/", 1)[1]]
    assert c.create(golden_bin).ledger_id == ids[-1] + 2      # the id taken by the other client is not reused


def _bk_cluster(kz, root: str, layout: bytes) -> None:
    kz.ensure_path(f"{root}/available/readonly")
    kz.create(f"{root}/LAYOUT", layout)
    kz.create(f"{root}/INSTANCEID", str(uuid.uuid4()).encode())


@pytest.mark.parametrize("layout", [HYBRID, LONG])
def test_metadata_written_directly_in_bookkeepers_layout_is_served(zookeeper, kz, golden, layout):
    root = _root()
    _bk_cluster(kz, root, layout)
    folder = golden / "dbstorage-v6-bookieid" / "metadata"
    written = {}
    for f in sorted(folder.glob("*.bin")):
        lid = int(f.stem, 16)
        path = bookkeeper_path(root, lid, layout)
        kz.create(path, b"x", makepath=True)
        kz.set(path, f.read_bytes())                      # version 1, as after one real update
        written[lid] = f.read_bytes()
    kz.create(bookkeeper_path(root, 77, layout), b"not ledger metadata", makepath=True)
    store = open_store(f"zk://{zookeeper.hosts}{root}")
    server, port = serve(store)
    c = MetadataClient(f"127.0.0.1:{port}", timeout=5)
    try:
        assert store.kind == ("long" if layout == LONG else "hybrid")
        assert list(c.iterate(limit_per_response=2)) == [(0, x) for x in sorted([*written, 77])]
        for lid, data in written.items():
            got = c.read(lid)
            assert (got.version, got.serialized) == (1, data)
        with pytest.raises(MetadataError) as info:
            c.read(77)
        assert info.value.code == "LEDGER_METADATA_ERROR"
        lid, data = next(iter(written.items()))
        with pytest.raises(MetadataError) as info:
            c.write(lid, data, expected_version=0)
        assert info.value.code == "BAD_VERSION"
        assert c.write(lid, data, expected_version=1).version == 2
        assert kz.get(bookkeeper_path(root, lid, layout))[1].version == 2
    finally:
        c.close()
        server.stop(0)
        store.close()


def test_iterate_pages_over_more_than_10k_ledgers_in_both_scopes_written_directly(zookeeper, kz, golden_bin):
    root = _root()
    _bk_cluster(kz, root, HYBRID)
    scope0 = set(range(0, 20_400, 2)) | {2**31 - 1, 2**40 + 5}     # both trees of the hybrid layout
    scoped = {(1 << 64) - 1 - i * 7 for i in range(10_100)}
    paths = [bookkeeper_path(root, lid) for lid in scope0]
    for lid in scoped:   # bkdisk's scoped layout, spelt out here: 16 hex digits of scope, then 4-4-4-L4
        h = f"{lid:016x}"
        paths.append(f"{root}/scopes/{0xabc:016x}/{h[:4]}/{h[4:8]}/{h[8:12]}/L{h[12:]}")
    for parent in sorted({p.rsplit("/", 1)[0] for p in paths}):
        kz.ensure_path(parent)
    for p in [kz.create_async(p, golden_bin) for p in paths]:
        p.get(timeout=120)
    store = open_store(f"zk://{zookeeper.hosts}{root}")
    server, port = serve(store)
    c = MetadataClient(f"127.0.0.1:{port}", timeout=30)
    try:
        got = list(c.iterate(all_scopes=True, limit_per_response=777))
        want = [(0, x) for x in sorted(scope0)] + [(0xABC, x) for x in sorted(scoped)]
        assert len(got) == len(want)
        assert next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None) is None
        top = max(scoped)
        assert c.read(top, scope=0xABC).serialized == golden_bin
    finally:
        c.close()
        server.stop(0)
        store.close()


def test_scoped_ledgers_are_stored_in_the_scoped_layout(service, kz, golden_bin):
    store, c, _ = service
    lid = c.create(golden_bin, scope=(1 << 64) - 1).ledger_id
    h = f"{lid:016x}"
    path = f"{store.root}/scopes/ffffffffffffffff/{h[:4]}/{h[4:8]}/{h[8:12]}/L{h[12:]}"
    assert kz.get(path)[0] == golden_bin
    assert list(c.iterate(scope=(1 << 64) - 1)) == [((1 << 64) - 1, lid)]
    assert list(c.iterate(scope=0)) == []                 # BookKeeper's scope-0 trees hold nothing new


def test_bookie_registrations_are_bookkeepers_ephemeral_znodes(service, kz):
    store, _c, port = service
    d = DiscoveryClient(f"127.0.0.1:{port}", timeout=5)
    info = service_info("10.0.0.7", 3181)
    try:
        for bookie, ro, sub in (("bk-7.rack-a", False, "available"), ("bk-8.rack-a", True, "available/readonly")):
            reg = d.register(bookie, info, read_only=ro)
            data, stat = kz.get(f"{store.root}/{sub}/{bookie}")
            assert data == info.SerializeToString() and stat.ephemeralOwner == store.zk.client_id[0]
            reg.close()
            _eventually(lambda path=f"{store.root}/{sub}/{bookie}": kz.exists(path) is None)
    finally:
        d.close()


def _eventually(check, seconds: float = 20.0) -> None:
    done = threading.Event()
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        done.wait(0.05)
    assert check()


@pytest.mark.parametrize("url, expected", [
    ("zk://127.0.0.1/ledgers", "not HOST:PORT"),
    ("zk://127.0.0.1:99999/ledgers", "not HOST:PORT"),
    ("etcd://127.0.0.1:2379/ledgers", "expected sqlite:PATH or zk://HOST:PORT/ledgers"),
    ("sqlite:", "needs a file path"),
])
def test_store_urls_are_checked_with_one_line_errors(url, expected):
    with pytest.raises(StoreError) as info:
        open_store(url)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_an_unreachable_zookeeper_is_one_line_error():
    with socket.socket() as s:            # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError) as info:
        ZkStore(f"127.0.0.1:{port}", connect_timeout=2)
    assert "cannot reach ZooKeeper" in str(info.value) and "\n" not in str(info.value)


def test_bookies_that_registered_in_zookeeper_themselves_are_listed_and_resolved(service, kz):
    # A real BookKeeper bookie writes its own ephemeral znode; the service fronting that ZooKeeper lists it.
    from bkdisk.metaservice.resolver import BookieAddressResolver
    store, _c, port = service
    info = service_info("10.0.0.9", 3181)
    kz.create(f"{store.root}/available/bk-real.rack-c", info.SerializeToString(), ephemeral=True)
    kz.create(f"{store.root}/available/readonly/bk-old.rack-c", service_info("10.0.0.10", 3181).SerializeToString(),
              ephemeral=True)
    d = DiscoveryClient(f"127.0.0.1:{port}", timeout=5)
    resolver = BookieAddressResolver(d)
    try:
        own = d.register("bk-7.rack-a", service_info("10.0.0.7", 3181))
        assert [b.bookie_id for b in d.list()] == ["bk-7.rack-a", "bk-real.rack-c"]
        assert [b.bookie_id for b in d.list(read_only=True)] == ["bk-old.rack-c"]
        assert d.info("bk-real.rack-c").endpoints[0][1:3] == ("10.0.0.9", 3181)
        assert tuple(resolver.resolve("bk-real.rack-c")) == ("10.0.0.9", 3181)
        # the service never takes over a znode it does not own
        _data, stat = kz.get(f"{store.root}/available/bk-real.rack-c")
        assert stat.ephemeralOwner == kz.client_id[0]
        own.close()
        kz.delete(f"{store.root}/available/bk-real.rack-c")
        _eventually(lambda: [b.bookie_id for b in d.list()] == [])
    finally:
        resolver.close()
        d.close()


def test_a_bookie_id_a_bookie_of_the_cluster_holds_in_zookeeper_is_never_taken_over(zookeeper, kz):
    """A real bookie's ephemeral registration is its session's: the service never deletes it to register the
    same id (clients would send that bookie's entries elsewhere); Register waits for it to go, as a restarting
    BookKeeper bookie waits for its old session to expire, and refuses with BOOKIE_EXISTS if it does not."""
    store = open_store(f"zk://{zookeeper.hosts}{_root()}")
    registry = store.new_registry()
    registry.takeover_wait = 0.5
    with served(store, token=None, registry=registry) as (_c, port):
        real = f"{store.root}/available/readonly/bk-real.rack-c"      # read-only: the id, either way
        kz.create(real, service_info("10.0.0.9", 3181).SerializeToString(), ephemeral=True)
        d = DiscoveryClient(f"127.0.0.1:{port}", timeout=5)
        try:
            with pytest.raises(MetadataError) as info:
                d.register("bk-real.rack-c", service_info("10.0.0.7", 3181))
            assert info.value.code == "BOOKIE_EXISTS" and f"session 0x{kz.client_id[0]:x}" in str(info.value)
            data, stat = kz.get(real)
            assert stat.ephemeralOwner == kz.client_id[0] and data == service_info("10.0.0.9", 3181).SerializeToString()
            assert kz.exists(f"{store.root}/available/bk-real.rack-c") is None
            assert [b.bookie_id for b in d.list(read_only=True)] == ["bk-real.rack-c"]
            registry.takeover_wait = 30.0
            got: list = []
            waiting = threading.Thread(target=lambda: got.append(d.register("bk-real.rack-c",
                                                                              service_info("10.0.0.7", 3181))))
            waiting.start()
            time.sleep(0.5)
            kz.delete(real)                       # the bookie's session ended
            waiting.join(30)
            assert len(got) == 1
            _data, stat = kz.get(f"{store.root}/available/bk-real.rack-c")
            assert stat.ephemeralOwner != kz.client_id[0]
            got[0].close()
        finally:
            d.close()
