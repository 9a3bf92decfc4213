"""The ledger metadata service over a real gRPC server on 127.0.0.1 with the embedded store: every RPC,
every status code, CAS between concurrent writers, Watch order and resumption, Iterate paging, scopes."""
from __future__ import annotations

import dataclasses
import filecmp
import sqlite3
import threading
from pathlib import Path

import grpc
import pytest
from metaservice_fixture import served

from bkdisk.formats.metadata import parse_format_message, parse_metadata, serialize_metadata
from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.metaservice.store import BadVersion


@pytest.fixture()
def service(tmp_path):
    store = SqliteStore(tmp_path / "meta.db")
    with served(store, token=None) as (client, port):
        yield store, client, port


def _code(fn) -> str:
    with pytest.raises(MetadataError) as info:
        fn()
    return info.value.code


def test_create_generates_increasing_scope0_ids_and_random_scoped_ids(service, golden_bin):
    _store, c, _ = service
    first = [c.create(golden_bin).ledger_id for _ in range(3)]
    assert first == [0, 1, 2]
    c.create(golden_bin, ledger_id=3)              # an explicit id is skipped by the generator
    assert c.create(golden_bin).ledger_id == 4
    c.remove(4)
    assert c.create(golden_bin).ledger_id == 5      # never handed out twice, even after a delete
    scoped = {c.create(golden_bin, scope=9).ledger_id for _ in range(5)}
    assert len(scoped) == 5 and all(0 <= x < 1 << 64 for x in scoped)
    got = c.read(next(iter(scoped)), scope=9)
    assert got.scope == 9 and got.version == 0 and got.serialized == golden_bin


def test_read_write_remove_and_their_status_codes(service, golden_bin):
    _store, c, _ = service
    lid = c.create(golden_bin, ledger_id=42).ledger_id
    assert _code(lambda: c.create(golden_bin, ledger_id=42)) == "LEDGER_EXISTS"
    md = parse_metadata(golden_bin)
    closed = serialize_metadata(md.__class__(**{**md.__dict__, "length": md.length + 1}))
    assert c.write(lid, closed, expected_version=0).version == 1
    assert _code(lambda: c.write(lid, golden_bin, expected_version=0)) == "BAD_VERSION"
    assert c.read(lid).serialized == closed and c.read(lid).version == 1   # the stale write changed nothing
    assert _code(lambda: c.remove(lid, expected_version=0)) == "BAD_VERSION"
    c.remove(lid, expected_version=1)
    assert _code(lambda: c.read(lid)) == "LEDGER_NOT_FOUND"
    assert _code(lambda: c.write(lid, golden_bin, 1)) == "LEDGER_NOT_FOUND"
    assert _code(lambda: c.remove(lid)) == "LEDGER_NOT_FOUND"
    assert _code(lambda: c.read(1, format_version=7)) in ("LEDGER_NOT_FOUND", "NOT_IMPLEMENTED")
    c.create(golden_bin, ledger_id=1)
    assert _code(lambda: c.read(1, format_version=7)) == "NOT_IMPLEMENTED"


def test_read_converts_formats_and_returns_the_bp16_message(service, golden):
    _store, c, _ = service
    folder = golden / "interleaved-v4-smallpage" / "metadata"
    c.create((folder / "1234.bin").read_bytes(), ledger_id=0x1234)
    as_text = parse_metadata(c.read(0x1234, format_version=2).serialized)
    assert as_text == dataclasses.replace(parse_metadata((folder / "1234.bin").read_bytes()), format_version=2)
    assert c.read(0x1234, format_version=3).serialized == (folder / "1234.bin").read_bytes()
    assert parse_format_message(c.read(0x1234).metadata) == parse_metadata((folder / "1234.bin").read_bytes())
    assert _code(lambda: c.read(0x1234, format_version=1)) == "BAD_REQUEST"   # format 1 has no digest


@pytest.mark.parametrize("bad, why", [
    (b"garbage", "malformed ledger metadata"),
    (b"BookieMetadataFormatVersion\t3\n\x05\x08\x01", "malformed"),
])
def test_malformed_metadata_is_bad_request_and_writes_nothing(service, bad, why):
    store, c, _ = service
    head = store.head_sequence()
    with pytest.raises(MetadataError) as info:
        c.create(bad, ledger_id=5)
    assert info.value.code == "BAD_REQUEST" and why in info.value.message
    assert store.ledger_ids(0, None, 10) == [] and store.head_sequence() == head


def _variant(golden_bin: bytes, **change) -> bytes:
    md = parse_metadata(golden_bin)
    return serialize_metadata(md.__class__(**{**md.__dict__, **change}))


def test_inconsistent_metadata_is_bad_request(service, golden_bin):
    store, c, _ = service
    head = store.head_sequence()
    md = parse_metadata(golden_bin)
    first, members = md.ensembles[0]
    cases = {
        f"ack quorum {md.write_quorum + 1} is larger than the write quorum {md.write_quorum}":
            _variant(golden_bin, ack_quorum=md.write_quorum + 1),
        f"write quorum {md.ensemble_size + 1} is larger than the ensemble size {md.ensemble_size}":
            _variant(golden_bin, write_quorum=md.ensemble_size + 1, ack_quorum=1),
        "ack quorum 0: at least 1": _variant(golden_bin, ack_quorum=0),
        "does not start after the one at entry 0": _variant(golden_bin, ensembles=((0, members), (0, members))),
        "starts at entry 5, not 0": _variant(golden_bin, ensembles=((5, members),)),
        "invalid BookieId": _variant(golden_bin, ensembles=((first, ("bk 1",) + members[1:]),)),
        f"has 2 bookies, the ensemble size is {md.ensemble_size}":
            _variant(golden_bin, ensembles=((first, members[:2]),)),
        "names a bookie twice": _variant(golden_bin, ensembles=((first, (members[0],) * 3),)),
        "no ensemble": _variant(golden_bin, ensembles=()),
    }
    for why, data in cases.items():
        with pytest.raises(MetadataError) as info:
            c.create(data)
        assert info.value.code == "BAD_REQUEST" and why in info.value.message, why
    assert store.head_sequence() == head and store.ledger_ids(0, None, 10) == []


def test_malformed_requests_get_bad_request(service, golden_bin):
    _store, c, port = service
    stub = pb_grpc.LedgerMetadataServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    both = pb.LedgerMetadataRequest(serialized_metadata=golden_bin, metadata=b"\x08\x01")
    assert stub.Create(both).code == pb.BAD_REQUEST
    assert stub.Read(pb.LedgerMetadataRequest()).code == pb.BAD_REQUEST           # no ledger id
    assert stub.Read(pb.LedgerMetadataRequest(ledger_id=1 << 63)).code == pb.BAD_REQUEST  # not a scope-0 id
    assert stub.Write(pb.LedgerMetadataRequest(ledger_id=1, serialized_metadata=golden_bin)).code == pb.BAD_REQUEST
    assert stub.Create(pb.LedgerMetadataRequest(metadata=b"\xff\xff")).code == pb.BAD_REQUEST
    pages = list(stub.Iterate(pb.GetLedgerRangesRequest(limit_per_response=0)))
    assert [p.code for p in pages] == [pb.BAD_REQUEST]
    # a scoped ledger may use all 64 bits
    r = stub.Create(pb.LedgerMetadataRequest(ledger_scope_id=(1 << 64) - 1, ledger_id=(1 << 64) - 1,
                                             serialized_metadata=golden_bin))
    assert (r.code, r.ledger_scope_id, r.ledger_id) == (pb.SUCCESS, (1 << 64) - 1, (1 << 64) - 1)


def test_oversized_request_is_refused_before_any_write(tmp_path, golden_bin):
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store, max_request_bytes=4096)
    try:
        stub = pb_grpc.LedgerMetadataServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        with pytest.raises(grpc.RpcError) as info:
            stub.Create(pb.LedgerMetadataRequest(serialized_metadata=golden_bin + b"x" * 8192))
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert store.head_sequence() == 0
    finally:
        server.stop(0)


def test_token_guards_every_call(tmp_path, golden_bin):
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store, token="s3cret")
    try:
        anon = MetadataClient(f"127.0.0.1:{port}")
        wrong = MetadataClient(f"127.0.0.1:{port}", token="nope")
        good = MetadataClient(f"127.0.0.1:{port}", token="s3cret")
        for c in (anon, wrong):
            assert _code(lambda c=c: c.create(golden_bin, ledger_id=1)) == "PERMISSION_DENIED"
        assert store.head_sequence() == 0
        good.create(golden_bin, ledger_id=1)
        for c in (anon, wrong):                                # reads need the token too
            assert _code(lambda c=c: c.read(1)) == "PERMISSION_DENIED"
        assert _code(lambda: anon.write(1, golden_bin, 0)) == "PERMISSION_DENIED"
        assert _code(lambda: anon.remove(1)) == "PERMISSION_DENIED"
        assert good.read(1).version == 0
    finally:
        server.stop(0)


def test_unreadable_stored_metadata_is_ledger_metadata_error(service, golden_bin):
    store, c, _ = service
    c.create(golden_bin, ledger_id=7)
    # Another writer (here: SQLite directly) leaves bytes that are not ledger metadata.
    db = sqlite3.connect(store.path)
    db.execute("UPDATE ledgers SET data=?", (b"not metadata",))
    db.commit()
    db.close()
    assert _code(lambda: c.read(7)) == "LEDGER_METADATA_ERROR"


class _BrokenStore(SqliteStore):
    def read(self, scope, ledger):
        raise RuntimeError("a bug")


def test_store_failures_become_internal_error_and_unexpected(tmp_path, golden_bin):
    store = _BrokenStore(tmp_path / "m.db")
    server, port = serve(store)
    try:
        c = MetadataClient(f"127.0.0.1:{port}")
        assert _code(lambda: c.read(1)) == "UNEXPECTED"
        store.close()                                    # the SQLite connection is gone
        assert _code(lambda: c.create(golden_bin, ledger_id=1)) == "INTERNAL_SERVER_ERROR"
    finally:
        server.stop(0)


def test_concurrent_cas_writers_exactly_one_wins(service, golden_bin):
    _store, c, port = service
    c.create(golden_bin, ledger_id=100)
    n = 16
    clients = [MetadataClient(f"127.0.0.1:{port}") for _ in range(n)]
    payloads = [_variant(golden_bin, length=1000 + i) for i in range(n)]
    barrier = threading.Barrier(n)
    outcome: list[str] = [""] * n

    def writer(i: int) -> None:
        barrier.wait()
        try:
            clients[i].write(100, payloads[i], expected_version=0)
            outcome[i] = "won"
        except MetadataError as exc:
            outcome[i] = exc.code

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcome.count("won") == 1 and outcome.count("BAD_VERSION") == n - 1
    got = c.read(100)
    assert got.version == 1 and got.serialized == payloads[outcome.index("won")]


def test_watch_delivers_create_update_delete_in_order_and_resumes(service, golden_bin):
    store, c, port = service
    events = []
    store.follow(0, None)               # every ledger's changes are logged from here on
    watcher = c.watch(watch_all=True, after_sequence=store.head_sequence())   # opens lazily: replay from here
    c2 = MetadataClient(f"127.0.0.1:{port}")
    # each change is awaited before the next is made: a store that learns changes by re-reading
    # (ZooKeeper) reports updates quicker than its re-read as one, with the newest version
    for change in (lambda: c2.create(golden_bin, ledger_id=1), lambda: c2.write(1, _variant(golden_bin, length=1), 0),
                   lambda: c2.create(golden_bin, ledger_id=2, scope=5), lambda: c2.remove(1)):
        change()
        events.append(next(watcher))
    assert [(e.change, e.scope, e.ledger_id, e.version) for e in events] == [
        ("CREATED", 0, 1, 0), ("UPDATED", 0, 1, 1), ("CREATED", 5, 2, 0), ("DELETED", 0, 1, 1)]
    assert [e.sequence for e in events] == sorted(e.sequence for e in events)
    # a client that saw only the first two resumes after the second: nothing lost, nothing twice
    resumed = c2.watch(watch_all=True, after_sequence=events[1].sequence)
    assert [(e.change, e.ledger_id) for e in (next(resumed), next(resumed))] == [("CREATED", 2), ("DELETED", 1)]
    # a single-ledger watch starts with its CURRENT state
    one = c2.watch([(5, 2)])
    first = next(one)
    assert (first.change, first.version, first.serialized) == ("CURRENT", 0, golden_bin)
    c.write(2, _variant(golden_bin, length=9), 0, scope=5)
    assert (lambda e: (e.change, e.scope, e.version))(next(one)) == ("UPDATED", 5, 1)


def test_watch_resume_point_pruned_is_bad_version(tmp_path, golden_bin):
    store = SqliteStore(tmp_path / "m.db", retain_changes=10)
    for i in range(1000):
        store.create(0, i, golden_bin)
    with pytest.raises(BadVersion):
        store.changes_since(5)
    server, port = serve(store)
    try:
        c = MetadataClient(f"127.0.0.1:{port}")
        assert _code(lambda: next(c.watch(watch_all=True, after_sequence=5))) == "BAD_VERSION"
    finally:
        server.stop(0)


def test_iterate_pages_over_more_than_10k_ledgers_in_both_scopes(tmp_path, golden_bin):
    store = SqliteStore(tmp_path / "m.db")
    scope0 = set(range(0, 24_000, 2))                 # gaps make many ranges
    scoped = {(1 << 64) - 1 - i * 3 for i in range(10_500)}
    for lid in scope0:
        store.create(0, lid, golden_bin)
    for lid in scoped:
        store.create(0xABC, lid, golden_bin)
    server, port = serve(store)
    try:
        c = MetadataClient(f"127.0.0.1:{port}")
        got = list(c.iterate(all_scopes=True, limit_per_response=777))
        assert got == [(0, x) for x in sorted(scope0)] + [(0xABC, x) for x in sorted(scoped)]
        assert list(c.iterate(scope=0xABC, limit_per_response=5000)) == [(0xABC, x) for x in sorted(scoped)]
        stub = pb_grpc.LedgerMetadataServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        pages = list(stub.Iterate(pb.GetLedgerRangesRequest(limit_per_response=1000)))
        assert [p.count for p in pages] == [1000] * 12 and all(p.ledger_scope_id == 0 for p in pages)
    finally:
        server.stop(0)


def test_golden_folders_import_and_export_byte_for_byte(service, golden, tmp_path):
    _store, c, _ = service
    for corpus in sorted(p.parent for p in golden.glob("*/metadata/*.bin")):
        for suffix, fmt in ((".bin", 3), (".txt", 2)):
            files = sorted(f for f in corpus.iterdir() if f.name.endswith(suffix)
                           and not f.name.endswith(".v1.txt"))
            for f in files:
                lid = int(f.name[: -len(suffix)], 16)
                scope = 1 + fmt                        # one scope per format: no id clash
                c.create(f.read_bytes(), ledger_id=lid, scope=scope)
                out = tmp_path / f"{corpus.parent.name}-{f.name}"
                out.write_bytes(c.read(lid, scope=scope).serialized)
                assert filecmp.cmp(f, out, shallow=False), f
                assert c.read(lid, scope=scope, format_version=fmt).serialized == f.read_bytes()
                c.remove(lid, scope=scope)


def test_generated_service_code_matches_a_fresh_protoc_run(tmp_path):
    # The checked-in modules and type stub are exactly what grpc_tools.protoc makes of metaservice.proto.
    from bkdisk.metaservice.proto.regenerate import regenerate
    here = Path(__file__).resolve().parents[1] / "metaservice" / "proto"
    fresh = regenerate(tmp_path)
    assert [p.name for p in fresh] == ["metaservice_pb2.py", "metaservice_pb2.pyi", "metaservice_pb2_grpc.py"]
    for p in fresh:
        assert p.read_bytes() == (here / p.name).read_bytes(), p.name
