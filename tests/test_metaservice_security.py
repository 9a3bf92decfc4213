"""Who may call the metadata service: the token on every call of both services (health excepted), the
read-only token that never sees a password, TLS and mutual TLS with certificates the test makes,
and the per-peer limits."""
from __future__ import annotations

import gc
import io
import sqlite3
import threading
import time
import weakref
from concurrent import futures

import grpc
import grpc._channel as grpc_channel
import pytest
from certificates import ca, signed
from conftest import GOLDEN
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bkdisk.formats.metadata import parse_format_message, parse_metadata
from bkdisk.metaservice import audit_trail
from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.limits import Limits
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc
from bkdisk.metaservice.resolver import DiscoveryClient, service_info
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore

TOKEN, READ_TOKEN = "full-7f3a9c", "read-51b2e0"
HMAC_BIN = GOLDEN / "cluster-3" / "metadata" / "1000.bin"     # an HMAC ledger, password b"c3-open"
HMAC_TXT = GOLDEN / "cluster-3" / "metadata" / "1000.txt"
PASSWORD = b"c3-open"


@pytest.fixture()
def guarded(tmp_path):
    """(store, port) of a service with both tokens, holding ledger 1 (format 3) and 2 (format 2),
    both HMAC ledgers with a password."""
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store, token=TOKEN, read_token=READ_TOKEN)
    owner = MetadataClient(f"127.0.0.1:{port}", token=TOKEN)
    owner.create(HMAC_BIN.read_bytes(), ledger_id=1)
    owner.create(HMAC_TXT.read_bytes(), ledger_id=2)
    owner.close()
    yield store, port
    server.stop(0)
    store.close()


def _methods():
    for service, stub in (("LedgerMetadataService", pb_grpc.LedgerMetadataServiceStub),
                          ("DiscoveryService", pb_grpc.DiscoveryServiceStub)):
        for m in pb.DESCRIPTOR.services_by_name[service].methods:
            yield stub, m


def _call(channel, stub, m, request, metadata=()):
    """Every response of one call (a unary call's one), or the gRPC status it failed with."""
    fn = getattr(stub(channel), m.name)
    try:
        if m.client_streaming:
            return list(fn(iter([request]), metadata=metadata, timeout=5))
        if m.server_streaming:
            return list(fn(request, metadata=metadata, timeout=5))
        return [fn(request, metadata=metadata, timeout=5)]
    except grpc.RpcError as exc:
        return exc.code()


def _request(m):
    req = getattr(pb, m.input_type.name)()
    if m.input_type.name == "LedgerMetadataRequest":
        req.ledger_id, req.expected_version = 1, 0
        req.serialized_metadata = HMAC_BIN.read_bytes()
    elif m.input_type.name == "GetLedgerRangesRequest":
        req.limit_per_response = 10
    elif m.input_type.name == "ReadLedgersRequest":
        req.page_size = 10
    elif m.input_type.name == "LedgerBatchRequest":
        req.requests.add(ledger_id=1, expected_version=0, serialized_metadata=HMAC_BIN.read_bytes())
    elif m.input_type.name == "BookieRequest":
        req.bookie_id, req.info.CopyFrom(service_info("h", 1))
    return req


@pytest.mark.parametrize("token", [None, "wrong"])
def test_without_the_token_every_call_of_both_services_is_refused_and_health_answers(guarded, token):
    store, port = guarded
    head = store.head_sequence()
    metadata = () if token is None else (("x-bkdisk-token", token),)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        seen = []
        for stub, m in _methods():
            got = _call(channel, stub, m, _request(m), metadata)
            assert isinstance(got, list) and len(got) == 1, (m.name, got)
            assert pb.StatusCode.Name(got[0].code) == "PERMISSION_DENIED", (m.name, got)
            assert TOKEN not in got[0].message and "token" in got[0].message
            assert PASSWORD not in got[0].SerializeToString()
            seen.append(m.name)
        assert len(seen) == 15                  # every method of both services
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    assert store.head_sequence() == head
    assert store.read(0, 1).data == HMAC_BIN.read_bytes()


def test_the_cli_client_library_raises_permission_denied_for_a_refused_call(guarded):
    _store, port = guarded
    for token in (None, "wrong"):
        c = MetadataClient(f"127.0.0.1:{port}", token=token)
        for call in (lambda c: c.read(1), lambda c: list(c.iterate()), lambda c: list(c.read_ledgers()),
                     lambda c: next(iter(c.watch([(0, 1)]))), lambda c: c.write(1, HMAC_BIN.read_bytes(), 0)):
            with pytest.raises(MetadataError) as info:
                call(c)
            assert info.value.code == "PERMISSION_DENIED"
        c.close()


def _live_calls(port: int) -> list:
    """The call objects alive in this process that were made to the service on ``port`` (a call's
    state names its channel's target; another test's client may still be calling its own service)."""
    gc.collect()
    # (a weak proxy whose object is gone raises on isinstance: its own type is read, never the object's)
    return [o for o in gc.get_objects() if type(o) not in _PROXIES and isinstance(o, grpc_channel._Rendezvous)
            and o._state.target == f"127.0.0.1:{port}"]


_PROXIES = (weakref.ProxyType, weakref.CallableProxyType)


def test_a_refused_stream_keeps_no_grpc_call_alive_in_the_error_it_raised(guarded):
    """A call object held by an error (its traceback, its context) is collected at interpreter exit,
    where its __del__ can wait forever on a lock of gRPC's stopped polling thread: a command that said
    'the service needs a token' and never exited."""
    _store, port = guarded
    before = _live_calls(port)   # the fixture's own calls
    c, d = MetadataClient(f"127.0.0.1:{port}"), DiscoveryClient(f"127.0.0.1:{port}")
    try:
        for call in (lambda: list(c.iterate()), lambda: list(c.read_ledgers()), lambda: next(iter(c.watch([(0, 1)]))),
                     lambda: next(iter(d.watch())), lambda: d.register("bk-9", service_info("h", 1))):
            try:
                call()
            except MetadataError as exc:
                kept = exc        # held as a command holds it until it exits
            else:
                raise AssertionError("a call without the token was answered")
            assert kept.code == "PERMISSION_DENIED"
            assert [o for o in _live_calls(port) if not any(o is b for b in before)] == [], call
            del kept
    finally:
        c.close()
        d.close()


def _no_password(serialized: bytes, metadata: bytes, fmt: int) -> None:
    md = parse_metadata(serialized)
    assert md.password is None and md.format_version == fmt and PASSWORD not in serialized
    assert parse_format_message(metadata).password is None and PASSWORD not in metadata


def test_the_read_only_token_reads_everything_but_the_password_and_says_so(guarded):
    _store, port = guarded
    reader = MetadataClient(f"127.0.0.1:{port}", token=READ_TOKEN, coalesce=False)
    full = MetadataClient(f"127.0.0.1:{port}", token=TOKEN, coalesce=False)
    try:
        for lid, stored_format in ((1, 3), (2, 2)):
            for fmt in (0, 2, 3):
                got = reader.read(lid, format_version=fmt)
                assert got.password_withheld
                _no_password(got.serialized, got.metadata, fmt or stored_format)
                whole = full.read(lid, format_version=fmt)
                assert not whole.password_withheld and parse_metadata(whole.serialized).password == PASSWORD
                # everything else as the full token reads it
                kept = parse_metadata(whole.serialized)
                assert parse_metadata(got.serialized) == type(kept)(**{**vars(kept), "password": None})
        pages = [x for page in reader.read_ledgers(format_version=3) for x in page]
        assert [x.ledger_id for x in pages] == [1, 2] and all(x.password_withheld for x in pages)
        assert all(parse_metadata(x.serialized).password is None for x in pages)
        as_stored = [x for page in reader.read_ledgers() for x in page]
        assert [parse_metadata(x.serialized).format_version for x in as_stored] == [3, 2]
        assert all(PASSWORD not in x.serialized for x in as_stored)
        assert list(reader.iterate()) == [(0, 1), (0, 2)]
        stub = pb_grpc.LedgerMetadataServiceStub(reader.ch.channel)
        batch = stub.ReadMany(pb.LedgerBatchRequest(requests=[pb.LedgerMetadataRequest(ledger_id=i)
                                                               for i in (1, 2, 3)]),
                              metadata=reader.ch.metadata, timeout=5)
        assert [pb.StatusCode.Name(r.code) for r in batch.responses] == ["SUCCESS", "SUCCESS", "LEDGER_NOT_FOUND"]
        assert [r.password_withheld for r in batch.responses] == [True, True, False]
        assert PASSWORD not in batch.SerializeToString()
        # a watch: the current state, then a change made with the full token, both without it
        changes = reader.watch([(0, 1)])
        first = next(changes)
        assert first.change == "CURRENT" and PASSWORD not in first.serialized
        full.write(1, HMAC_BIN.read_bytes(), 0)
        second = next(changes)
        assert (second.change, second.version) == ("UPDATED", 1) and PASSWORD not in second.serialized
        assert parse_metadata(second.serialized).password is None
        for write in (lambda: reader.write(1, HMAC_BIN.read_bytes(), 1), lambda: reader.remove(1),
                      lambda: reader.create(HMAC_BIN.read_bytes(), ledger_id=9)):
            with pytest.raises(MetadataError) as info:
                write()
            assert info.value.code == "PERMISSION_DENIED" and "read-only" in info.value.message
        assert full.read(1).version == 1
    finally:
        reader.close()
        full.close()


@pytest.mark.parametrize("stored", [
    b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 3\npassword: c3-open\n",   # unquoted
    b'BookieMetadataFormatVersion\t2\nquorumSize: 2\npassword: "c3-open" }}\n',              # then a syntax error
])
def test_stored_metadata_that_does_not_parse_is_never_quoted_in_an_error(guarded, stored):
    """Bytes another writer left that do not parse may hold the password: every error about them says where and
    what was expected, never what was found, so no caller, the read-only token's least, reads it there."""
    store, port = guarded
    db = sqlite3.connect(store.path)
    db.execute("UPDATE ledgers SET data=?", (stored,))         # (ledgers 1 and 2)
    db.commit()
    db.close()
    for token in (READ_TOKEN, TOKEN):
        c = MetadataClient(f"127.0.0.1:{port}", token=token, coalesce=False)
        try:
            said = []
            for fmt in (0, 2, 3):
                with pytest.raises(MetadataError) as info:
                    c.read(1, format_version=fmt)
                assert info.value.code == "LEDGER_METADATA_ERROR" and "offset" in info.value.message
                said.append(info.value.message)
            stub = pb_grpc.LedgerMetadataServiceStub(c.ch.channel)
            batch = stub.ReadMany(pb.LedgerBatchRequest(requests=[pb.LedgerMetadataRequest(ledger_id=1)]),
                                  metadata=c.ch.metadata, timeout=5)
            said.append(batch.SerializeToString())
            for fmt in (2, 3):
                with pytest.raises(MetadataError) as info:
                    [x for page in c.read_ledgers(format_version=fmt) for x in page]
                said.append(info.value.message)
            changes = c.watch([(0, 1)])
            with pytest.raises(MetadataError) as info:
                next(changes)
            said.append(info.value.message)
            assert not [x for x in said if PASSWORD in (x if isinstance(x, bytes) else x.encode())], said
        finally:
            c.close()


def test_the_read_only_token_lists_and_watches_bookies_but_cannot_register(guarded):
    _store, port = guarded
    owner = DiscoveryClient(f"127.0.0.1:{port}", token=TOKEN)
    reader = DiscoveryClient(f"127.0.0.1:{port}", token=READ_TOKEN)
    reg = owner.register("bk-1", service_info("10.0.0.1", 3181))
    try:
        assert [b.bookie_id for b in reader.list()] == ["bk-1"]
        assert reader.info("bk-1").endpoints[0][1:3] == ("10.0.0.1", 3181)
        assert next(iter(reader.watch()))[0] == "CURRENT"
        for write in (lambda: reader.register("bk-2", service_info("h", 1)), lambda: reader.unregister("bk-1")):
            with pytest.raises(MetadataError) as info:
                write()
            assert info.value.code == "PERMISSION_DENIED"
    finally:
        reg.close()
        owner.close()
        reader.close()


def test_tls_with_client_certificates_refuses_a_client_without_one(tmp_path, monkeypatch):
    """And the audit trail names the certificate a mutation came with."""
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr(audit_trail.LINES, "on", True)
    audit_trail.flush()
    authority, stranger = ca(tmp_path, "ca"), ca(tmp_path, "other-ca")
    server_pair = signed(tmp_path, authority, "server", san="IP:127.0.0.1")
    client_pair = signed(tmp_path, authority, "client")
    forged = signed(tmp_path, stranger, "forged")
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store, token=TOKEN, tls=server_pair.read(), tls_client_ca=authority.cert.read_bytes())
    roots = authority.cert.read_bytes()
    try:
        good = MetadataClient(f"127.0.0.1:{port}", token=TOKEN, root_certificates=roots,
                              client_certificate=client_pair.read(), timeout=5, retries=0)
        good.create(HMAC_BIN.read_bytes(), ledger_id=1)
        assert good.read(1).version == 0
        good.close()
        audit_trail.flush()
        (line,) = [x for x in err.getvalue().splitlines() if " bkdisk.metaservice.audit Create " in x]
        assert " cert='client' token=full ledger=" + "1".zfill(32) + " outcome=SUCCESS" in line, line
        for cert in (None, forged.read()):
            c = MetadataClient(f"127.0.0.1:{port}", token=TOKEN, root_certificates=roots,
                               client_certificate=cert, timeout=3, retries=0)
            with pytest.raises(MetadataError) as info:
                c.read(1)
            assert info.value.code == "RPC_UNAVAILABLE"      # the handshake fails: no call is made
            c.close()
        plain = MetadataClient(f"127.0.0.1:{port}", token=TOKEN, timeout=3, retries=0)
        with pytest.raises(MetadataError) as info:
            plain.read(1)
        assert "no answer within 3 s: " in str(info.value) and "not this service" not in str(info.value)
        plain.close()
        # a server certificate of an authority not trusted: its cause said, not only that nothing answered
        doubting = MetadataClient(f"127.0.0.1:{port}", token=TOKEN, root_certificates=stranger.cert.read_bytes(),
                                  client_certificate=client_pair.read(), timeout=2, retries=0)
        with pytest.raises(MetadataError) as info:
            doubting.read(1)
        assert "no answer within 2 s: " in str(info.value) and "handshake" in str(info.value).lower(), info.value
        doubting.close()
    finally:
        server.stop(0)
        store.close()


def _open_watches(c: MetadataClient, n: int, held: list) -> None:
    """Open ``n`` Watch streams of ledger 1 into ``held``, each past its CURRENT answer (the server holds them)."""
    for _ in range(n):
        stream = c.stub.Watch(iter([pb.LedgerMetadataRequest(ledger_id=1)]), timeout=30)
        held.append(stream)
        assert pb.ChangeType.Name(next(stream).change) == "CURRENT"


def _watch_refused(c: MetadataClient) -> grpc.RpcError:
    """The error of one more Watch of ledger 1."""
    over = c.stub.Watch(iter([pb.LedgerMetadataRequest(ledger_id=1)]), timeout=30)
    with pytest.raises(grpc.RpcError) as info:
        next(over)
    return info.value


def test_streams_of_all_peers_are_bounded_and_reads_and_writes_always_find_a_thread(tmp_path):
    """Watches held open from many hosts, each within its own limit, took every server thread: reads and
    writes waited until their deadline. All peers' streams are bounded below the server's threads."""
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store, limits=Limits(streams_total=3, streams_per_peer=64))
    c = MetadataClient(f"127.0.0.1:{port}", timeout=5)
    c.create(HMAC_BIN.read_bytes(), ledger_id=1)
    held: list = []
    try:
        _open_watches(c, 3, held)
        refused = _watch_refused(c)
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "3 streams are open on this service" in refused.details()
        assert c.write(1, HMAC_BIN.read_bytes(), 0).version == 1
        with futures.ThreadPoolExecutor(40) as pool:   # more calls at once than the server has spare threads
            assert [f.result(timeout=30) for f in [pool.submit(lambda: c.read(1).version) for _ in range(40)]] \
                == [1] * 40
    finally:
        for s in held:
            s.cancel()
        c.close()
        server.stop(0)
        store.close()


def test_a_peer_gets_at_most_its_streams_and_watches(tmp_path):
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store, limits=Limits(streams_per_peer=2, watches_per_peer=3, max_batch=4))
    c = MetadataClient(f"127.0.0.1:{port}", timeout=5)
    for lid in (1, 2, 3):
        c.create(HMAC_BIN.read_bytes(), ledger_id=lid)
    held: list = []
    try:
        _open_watches(c, 2, held)
        refused = _watch_refused(c)
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "2 streams" in refused.details()
        for s in held:
            s.cancel()
        held.clear()
        # the streams were given back: one Watch of 3 ledgers is allowed, a 4th ledger is not
        gate = threading.Event()

        def requests(n):
            for lid in range(1, n + 1):
                yield pb.LedgerMetadataRequest(ledger_id=lid)
            gate.wait(30)
        for _attempt in range(100):              # a cancelled stream's handler ends within its poll
            ok = c.stub.Watch(requests(3), timeout=30)
            try:
                assert [next(ok).ledger_id for _ in range(3)] == [1, 2, 3]   # each CURRENT: all followed
                break
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                time.sleep(0.1)
        held.append(ok)
        over = c.stub.Watch(requests(1), timeout=30)
        with pytest.raises(grpc.RpcError) as info:
            next(over)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "3 ledgers" in info.value.details()
        r = c.stub.ReadMany(pb.LedgerBatchRequest(requests=[pb.LedgerMetadataRequest(ledger_id=1)] * 5), timeout=5)
        assert pb.StatusCode.Name(r.code) == "BAD_REQUEST" and "at most 4" in r.message
    finally:
        gate.set()
        for s in held:
            s.cancel()
        c.close()
        server.stop(0)
        store.close()
