"""Coalesced calls: a client's concurrent reads and writes go as ReadMany/WriteMany, and every caller
sees exactly what its own single Read/Write would have given (versions, BAD_VERSION per ledger,
LEDGER_NOT_FOUND, consistent reads), on the embedded store and on ZooKeeper."""
from __future__ import annotations

import itertools
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from metaservice_fixture import STORES, LostAsyncReply, LostMultiReply, served, served_store, with_length

from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.coalesce import Coalescer
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc
from bkdisk.metaservice.sqlite_store import SqliteStore

_bases = itertools.count(1)


# ------------------------------------------------------------------------ the coalescer alone
@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.lists(st.integers(-3, 50), min_size=1, max_size=8), min_size=1, max_size=12),
       limit=st.integers(1, 5), in_flight=st.integers(1, 3))
def test_every_caller_gets_the_result_of_its_own_request_whatever_the_batching(calls, limit, in_flight):
    batches: list[list[int]] = []

    def send(reqs):
        if not batches and in_flight == 1:   # the first batch is held until every other caller waits
            end = time.monotonic() + 10
            while len(co._pending) < len(calls) - 1 and time.monotonic() < end:
                time.sleep(0.001)
        batches.append(list(reqs))
        return [ValueError(f"bad {r}") if r < 0 else r * 10 for r in reqs]

    co = Coalescer(send, limit=limit, in_flight=in_flight)
    got: dict[tuple[int, int], object] = {}
    started_calls = threading.Barrier(len(calls) + 1)

    def caller(t: int) -> None:
        started_calls.wait()
        for i, r in enumerate(calls[t]):
            try:
                got[(t, i)] = co.call(r)
            except ValueError as exc:
                got[(t, i)] = str(exc)

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(len(calls))]
    for t in threads:
        t.start()
    started_calls.wait()
    for t in threads:
        t.join()
    assert got == {(t, i): (f"bad {r}" if r < 0 else r * 10)
                   for t, rs in enumerate(calls) for i, r in enumerate(rs)}
    assert sorted(itertools.chain(*batches)) == sorted(itertools.chain(*calls))   # each sent once
    assert all(1 <= len(b) <= limit for b in batches)
    if len(calls) > 2 and limit > 1 and in_flight == 1:
        assert len(batches[1]) > 1                 # the callers that waited together went together


def test_a_lone_call_is_sent_at_once_from_its_own_thread_and_a_failed_batch_fails_each_caller():
    where = []

    def send(reqs):
        where.append((threading.current_thread(), len(reqs)))
        if reqs == ["down"]:
            raise ConnectionError("service down")
        return reqs
    co = Coalescer(send)
    assert co.call("x") == "x"
    assert where == [(threading.current_thread(), 1)]
    with pytest.raises(ConnectionError):
        co.call("down")
    assert co.call("y") == "y"                  # nothing left stuck behind the failure


def test_a_batch_stays_within_its_byte_budget_beyond_its_first_request():
    sizes: list[list[int]] = []
    gate = threading.Event()

    def send(reqs):
        sizes.append([len(r) for r in reqs])
        gate.wait(1.0)
        return reqs
    co = Coalescer(send, limit=100, budget=10, size=len)
    threads = [threading.Thread(target=co.call, args=("a" * n,)) for n in (20, 4, 4, 4, 4, 30)]
    for t in threads:
        t.start()
        time.sleep(0.01)
    gate.set()
    for t in threads:
        t.join()
    assert sorted(itertools.chain(*sizes)) == [4, 4, 4, 4, 20, 30]
    assert all(len(b) == 1 or sum(b[1:]) + b[0] <= 10 for b in sizes)


# ------------------------------------------------------------------------ the service's batch calls
@pytest.fixture(scope="module", params=STORES)
def service(request, tmp_path_factory):
    """The embedded store; ZooKeeper; ZooKeeper with every batched write sent as its own setData."""
    with served_store(request.param, tmp_path_factory.mktemp(request.param)) as served_one:
        yield served_one


def _outcome(r: pb.LedgerMetadataResponse) -> tuple:
    return (pb.StatusCode.Name(r.code), r.ledger_scope_id, r.ledger_id, r.version, r.serialized_metadata,
            r.metadata)


_WRITES = st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 3)), min_size=2, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=_WRITES)
def test_a_write_batch_equals_the_same_writes_made_one_after_another(service, golden_bin, writes):
    # ledgers 0..2 exist at version 0 on both sides, ledger 3 does not; payload i is write i's own
    _store, c, stub, _zk = service
    batched, single = next(_bases) * 10, next(_bases) * 10
    for base in (batched, single):
        for k in range(3):
            c.create(golden_bin, ledger_id=base + k)

    def req(base, i, k, v):
        return pb.LedgerMetadataRequest(ledger_id=base + k, expected_version=v,
                                        serialized_metadata=with_length(golden_bin, 1000 + i))
    many = stub.WriteMany(pb.LedgerBatchRequest(requests=[req(batched, i, k, v)
                                                          for i, (k, v) in enumerate(writes)]), timeout=30)
    one = [stub.Write(req(single, i, k, v), timeout=30) for i, (k, v) in enumerate(writes)]
    assert many.code == pb.SUCCESS and len(many.responses) == len(writes)
    shift = lambda r, base: (*_outcome(r)[:2], r.ledger_id - base if r.ledger_id else 0,  # noqa: E731
                             *_outcome(r)[3:])
    assert [shift(r, batched) for r in many.responses] == [shift(r, single) for r in one]
    for k in range(4):                          # the stores end in the same state
        states = []
        for base in (batched, single):
            try:
                x = c.read(base + k)
                states.append((x.version, x.serialized))
            except MetadataError as exc:
                states.append(exc.code)
        assert states[0] == states[1]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reads=st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 1, 3]), st.booleans(),
                                st.sampled_from([0, 5])), min_size=2, max_size=10))
def test_a_read_batch_equals_the_same_reads_made_one_by_one(service, golden_bin, reads):
    _store, c, stub, _zk = service
    base = next(_bases) * 10
    for k in range(3):
        c.create(golden_bin, ledger_id=base + k, scope=0)
    c.create(golden_bin, ledger_id=base, scope=5)
    reqs = [pb.LedgerMetadataRequest(ledger_id=base + k, ledger_scope_id=scope, format_version=fmt,
                                     consistent_read=consistent) for k, fmt, consistent, scope in reads]
    many = stub.ReadMany(pb.LedgerBatchRequest(requests=reqs), timeout=30)
    assert many.code == pb.SUCCESS
    assert [_outcome(r) for r in many.responses] == [_outcome(stub.Read(q, timeout=30)) for q in reqs]


def test_a_batch_refused_whole_is_a_status_not_a_partial_write(service, golden_bin):
    _store, c, stub, _zk = service
    base = next(_bases) * 10
    c.create(golden_bin, ledger_id=base)
    too_many = [pb.LedgerMetadataRequest(ledger_id=base, expected_version=0, serialized_metadata=golden_bin)
                ] * 1001
    r = stub.WriteMany(pb.LedgerBatchRequest(requests=too_many), timeout=30)
    assert pb.StatusCode.Name(r.code) == "BAD_REQUEST" and not r.responses
    assert c.read(base).version == 0
    invalid = [pb.LedgerMetadataRequest(ledger_id=base, serialized_metadata=golden_bin),    # no version
               pb.LedgerMetadataRequest(ledger_id=base, expected_version=0, serialized_metadata=b"junk")]
    bad = stub.WriteMany(pb.LedgerBatchRequest(requests=[*invalid, pb.LedgerMetadataRequest(
        ledger_id=base, expected_version=0, serialized_metadata=golden_bin)]), timeout=30)
    assert [(x.code, x.message) for x in bad.responses[:2]] == [
        (x.code, x.message) for x in (stub.Write(q, timeout=30) for q in invalid)]
    assert [pb.StatusCode.Name(x.code) for x in bad.responses] == ["BAD_REQUEST", "BAD_REQUEST", "SUCCESS"]
    assert c.read(base).version == 1


def test_threads_sharing_a_client_see_exactly_their_own_outcomes(service, golden_bin):
    """16 threads CAS-increment 4 shared ledgers (contended) and read them and a missing one; each
    caller's result must be its own: a write succeeds at most once per version, a BAD_VERSION write
    lost to a write at its version, a read shows bytes some write produced at that version."""
    store, _c, _stub, _zk = service
    base = next(_bases) * 10
    c = MetadataClient(_c.ch.target, timeout=30)
    for k in range(4):
        c.create(with_length(golden_bin, 0), ledger_id=base + k)
    writes: list[tuple[int, int, bytes, str]] = []       # ledger, expected, bytes, outcome
    reads: list[tuple[int, object]] = []
    errors: list[str] = []

    def worker(t: int) -> None:
        for n in range(30):
            k = base + (t + n) % 4
            try:
                got = c.read(k)
                assert got.ledger_id == k
                reads.append((k, (got.version, got.serialized)))
                data = with_length(golden_bin, t * 1000 + n + 1)
                try:
                    w = c.write(k, data, got.version)
                    assert (w.ledger_id, w.version, w.serialized) == (k, got.version + 1, data)
                    writes.append((k, got.version, data, "SUCCESS"))
                except MetadataError as exc:
                    writes.append((k, got.version, data, exc.code))
                try:
                    c.read(base + 9)
                    errors.append("a missing ledger was read")
                except MetadataError as exc:
                    assert exc.code == "LEDGER_NOT_FOUND"
            except Exception as exc:   # reported below
                errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    assert c.reads.batches < 16 * 60 and c.writes.batches < 16 * 30     # calls did coalesce
    for k in range(base, base + 4):
        ok = sorted((v, d) for kk, v, d, code in writes if kk == k and code == "SUCCESS")
        assert [v for v, _d in ok] == list(range(len(ok)))             # each version written once
        final = store.read(0, k, consistent=True)
        assert final.version == len(ok) and (not ok or final.data == ok[-1][1])
        produced = {v + 1: d for v, d in ok} | {0: with_length(golden_bin, 0)}
        assert all(produced.get(vd[0]) == vd[1] for kk, vd in reads if kk == k)
        lost = {v for kk, v, _d, code in writes if kk == k and code == "BAD_VERSION"}
        assert lost <= {v for v, _d in ok}                              # lost to a write at its version
    assert {code for *_x, code in writes} <= {"SUCCESS", "BAD_VERSION"}
    c.close()


# ------------------------------------------------------------------------ ZooKeeper specifics
@pytest.mark.parametrize("service", ["zookeeper"], indirect=True)
def test_coalesced_consistent_reads_see_a_direct_zookeeper_write(service, golden_bin):
    store, c, _stub, zk = service
    base = next(_bases) * 10
    c.create(golden_bin, ledger_id=base)
    c.read(base)                                                    # cached by the service
    kz = KazooClient(hosts=zk.hosts)
    kz.start(15)
    try:
        kz.set(store.path(0, base), with_length(golden_bin, 77), version=0)
    finally:
        kz.stop()
        kz.close()
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(c.read(base, consistent=True))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [(x.version, x.serialized) for x in got] == [(1, with_length(golden_bin, 77))] * 8


@pytest.mark.parametrize("service", ["zookeeper"], indirect=True)
@pytest.mark.parametrize("applied", [True, False])
def test_a_batched_write_whose_reply_is_lost_is_applied_exactly_once(service, golden_bin, applied):
    store, c, stub, zk = service
    base = next(_bases) * 10
    for k in range(2):
        c.create(golden_bin, ledger_id=base + k)
    hook = LostAsyncReply(store, "set_async", applied)
    try:        # the first and the third write race for version 0 of one ledger (two callers)
        r = stub.WriteMany(pb.LedgerBatchRequest(requests=[
            pb.LedgerMetadataRequest(ledger_id=base + k, expected_version=0,
                                     serialized_metadata=with_length(golden_bin, n)) for n, k in enumerate((0, 1, 0))]),
            timeout=60)
    finally:
        hook.restore()
    assert hook.fired
    codes = [pb.StatusCode.Name(x.code) for x in r.responses]
    # applied: the lost reply's write is found applied and reported so; not applied: the third write
    # took version 0 meanwhile, and the first is told BAD_VERSION (never both, never neither)
    assert codes == (["SUCCESS", "SUCCESS", "BAD_VERSION"] if applied else ["BAD_VERSION", "SUCCESS", "SUCCESS"])
    winner = 0 if applied else 2
    assert r.responses[winner].version == 1
    got = store.read(0, base, consistent=True)
    assert (got.version, got.data) == (1, with_length(golden_bin, winner))
    assert store.read(0, base + 1, consistent=True).version == 1


@pytest.mark.parametrize("service", ["zookeeper"], indirect=True)
@pytest.mark.parametrize("applied", [True, False])
def test_writes_sent_as_one_multi_whose_reply_is_lost_are_each_applied_exactly_once(service, golden_bin, applied):
    store, c, stub, _zk = service
    base = next(_bases) * 10
    for k in range(3):
        c.create(golden_bin, ledger_id=base + k)
    store.follow(0, base)
    head = store.head_sequence()
    hook = LostMultiReply(store, applied, every=True)
    try:
        r = stub.WriteMany(pb.LedgerBatchRequest(requests=[
            pb.LedgerMetadataRequest(ledger_id=base + k, expected_version=0,
                                     serialized_metadata=with_length(golden_bin, 50 + k)) for k in range(3)]),
            timeout=60)
    finally:
        hook.restore()
    assert hook.commits == 1
    assert [(pb.StatusCode.Name(x.code), x.version) for x in r.responses] == [("SUCCESS", 1)] * 3
    for k in range(3):
        got = store.read(0, base + k, consistent=True)
        assert (got.version, got.data) == (1, with_length(golden_bin, 50 + k))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not store.changes_since(head):
        time.sleep(0.05)
    assert [(x.change, x.version) for x in store.changes_since(head) if x.ledger == base] == [("UPDATED", 1)]


@pytest.mark.parametrize("service", ["zookeeper"], indirect=True)
def test_a_write_batch_is_reported_to_watchers_once_per_ledger_with_its_version(service, golden_bin):
    store, c, stub, _zk = service
    base = next(_bases) * 10
    for k in range(3):                  # ledger base+k at version k: every write's state differs
        c.create(golden_bin, ledger_id=base + k)
        for v in range(k):
            c.write(base + k, with_length(golden_bin, v), v)
        store.follow(0, base + k)
    head = store.head_sequence()
    r = stub.WriteMany(pb.LedgerBatchRequest(requests=[
        pb.LedgerMetadataRequest(ledger_id=base + k, expected_version=k,
                                 serialized_metadata=with_length(golden_bin, 70 + k)) for k in range(3)]), timeout=30)
    assert [(x.ledger_id, x.version) for x in r.responses] == [(base + k, k + 1) for k in range(3)]
    time.sleep(0.5)                     # a wrongly reported state would be re-read and reported too
    assert sorted((x.ledger, x.change, x.version, x.data) for x in store.changes_since(head)) == [
        (base + k, "UPDATED", k + 1, with_length(golden_bin, 70 + k)) for k in range(3)]


def test_a_write_batch_without_the_token_is_refused_whole_and_each_coalesced_caller_is_told(
        tmp_path, golden_bin):
    store = SqliteStore(tmp_path / "meta.db")
    with served(store, token="s3cret") as (_anon, port):
        owner = MetadataClient(f"127.0.0.1:{port}", token="s3cret")
        owner.create(golden_bin, ledger_id=1)
        stub = pb_grpc.LedgerMetadataServiceStub(owner.ch.channel)
        batch = pb.LedgerBatchRequest(requests=[pb.LedgerMetadataRequest(
            ledger_id=1, expected_version=0, serialized_metadata=with_length(golden_bin, 3))] * 2)
        r = stub.WriteMany(batch, timeout=30)
        assert pb.StatusCode.Name(r.code) == "PERMISSION_DENIED" and not r.responses
        anon = MetadataClient(f"127.0.0.1:{port}")
        codes: list[str] = []
        gate = threading.Barrier(8)

        def write() -> None:
            gate.wait()
            try:
                anon.write(1, with_length(golden_bin, 4), 0)
            except MetadataError as exc:
                codes.append(exc.code)
        threads = [threading.Thread(target=write) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert codes == ["PERMISSION_DENIED"] * 8
        assert owner.read(1).version == 0
        r = stub.WriteMany(batch, timeout=30, metadata=owner.ch.metadata)
        assert [pb.StatusCode.Name(x.code) for x in r.responses] == ["SUCCESS", "BAD_VERSION"]
        anon.close()
        owner.close()
