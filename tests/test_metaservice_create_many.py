"""CreateMany: a batch of named creates, create-only, each answered as its own Create would be, on the
embedded store (one transaction a batch) and on ZooKeeper (pipelined, missing parents made, a lost
reply settled exactly once); and `metadata import` sending a folder through it, streamed."""
from __future__ import annotations

import errno
import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Transaction
from kazoo.security import make_acl, make_digest_acl
from metaservice_fixture import LostAsyncReply, LostMultiReply, served_store, with_length
from zookeeper_fixture import started

from bkdisk.diskio.mapped import DiskError
from bkdisk.formats.ids import LedgerId
from bkdisk.metaservice import folder_import, import_spool
from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.create_batches import create_many
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.metaservice.store import StoreError
from bkdisk.metaservice.zk_create_ops import add_creates
from bkdisk.metaservice.zk_store import ZkStore

_bases = itertools.count(1)
# ids spread as real ones are: small (ZooKeeper's 2-level paths) and past 2^31 (4-level paths, whose
# parents a new ledger mostly lacks), in scope 0 and in a BP-35 scope
OFFSETS = [(0, 0), (0, 1), (0, 1 << 33), (0, 1 << 50), (0, 1 << 62), (7, 3)]


@pytest.fixture(scope="module", params=["sqlite", "zookeeper"])
def service(request, tmp_path_factory):
    with served_store(request.param, tmp_path_factory.mktemp(request.param)) as (store, client, stub, _zk):
        yield store, client, stub


def _key(base: int, k: int) -> tuple[int, int]:
    scope, off = OFFSETS[k]
    return scope, base + off


def _created(r: pb.LedgerMetadataResponse) -> tuple:
    return pb.StatusCode.Name(r.code), r.ledger_scope_id, r.ledger_id, r.version


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(creates=st.lists(st.integers(0, len(OFFSETS) - 1), min_size=1, max_size=10))
def test_a_create_batch_equals_the_same_creates_made_one_after_another(service, golden_bin, creates):
    # ledger 0 exists on both sides (at version 0, its own bytes); create i carries payload i
    _store, c, stub = service
    batched, single = next(_bases) * 1000, next(_bases) * 1000
    for base in (batched, single):
        c.create(with_length(golden_bin, 1), ledger_id=base)

    def req(base, i, k):
        scope, lid = _key(base, k)
        return pb.LedgerMetadataRequest(ledger_scope_id=scope, ledger_id=lid,
                                        serialized_metadata=with_length(golden_bin, 100 + i))
    mine = [req(batched, i, k) for i, k in enumerate(creates)]
    theirs = [req(single, i, k) for i, k in enumerate(creates)]
    many = stub.CreateMany(pb.LedgerBatchRequest(requests=mine), timeout=60)
    one = [stub.Create(q, timeout=60) for q in theirs]
    assert many.code == pb.SUCCESS and len(many.responses) == len(creates)

    def shifted(r, q, base):
        code, scope, lid, version = _created(r)
        if code == "SUCCESS":
            return code, version, scope, lid - base
        return code, r.message.replace(f"ledger {q.ledger_id} ", f"ledger +{q.ledger_id - base} ")
    assert [shifted(r, q, batched) for r, q in zip(many.responses, mine)] == \
        [shifted(r, q, single) for r, q in zip(one, theirs)]
    for k in range(len(OFFSETS)):       # the stores end in the same state: nothing existing overwritten
        states = []
        for base in (batched, single):
            scope, lid = _key(base, k)
            try:
                x = c.read(lid, scope)
                states.append((x.version, x.serialized))
            except MetadataError as exc:
                states.append(exc.code)
        assert states[0] == states[1]
    assert c.read(batched).serialized == with_length(golden_bin, 1)


def test_items_refused_alone_and_a_batch_refused_whole(service, golden_bin):
    _store, c, stub = service
    base = next(_bases) * 1000
    too_many = [pb.LedgerMetadataRequest(ledger_id=base + i, serialized_metadata=golden_bin) for i in range(1001)]
    r = stub.CreateMany(pb.LedgerBatchRequest(requests=too_many), timeout=30)
    assert pb.StatusCode.Name(r.code) == "BAD_REQUEST" and not r.responses
    with pytest.raises(MetadataError, match="LEDGER_NOT_FOUND"):
        c.read(base)
    r = stub.CreateMany(pb.LedgerBatchRequest(requests=[
        pb.LedgerMetadataRequest(serialized_metadata=golden_bin),                       # no ledger id
        pb.LedgerMetadataRequest(ledger_id=base + 1, serialized_metadata=b"junk"),
        pb.LedgerMetadataRequest(ledger_id=base + 2, serialized_metadata=golden_bin),
        pb.LedgerMetadataRequest(ledger_id=base + 2, serialized_metadata=golden_bin)]), timeout=30)
    assert [pb.StatusCode.Name(x.code) for x in r.responses] == ["BAD_REQUEST", "BAD_REQUEST", "SUCCESS",
                                                                 "LEDGER_EXISTS"]
    assert "ledger_id is required" in r.responses[0].message
    assert c.read(base + 2).version == 0


def test_the_client_gives_each_create_its_own_outcome(service, golden_bin):
    _store, c, _stub = service
    base = next(_bases) * 1000
    c.create(golden_bin, ledger_id=base)
    got = create_many(c, [(0, base, with_length(golden_bin, 9)), (0, base + 1, golden_bin), (7, base, golden_bin)])
    assert isinstance(got[0], MetadataError) and got[0].code == "LEDGER_EXISTS"
    assert [(x.scope, x.ledger_id, x.version) for x in got[1:]] == [(0, base + 1, 0), (7, base, 0)]
    assert c.read(base).serialized == golden_bin


def test_the_embedded_store_commits_a_batch_once(tmp_path, golden_bin):
    store = SqliteStore(tmp_path / "meta.db")
    commits = []
    store._db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    got = store.create_many([(0, i, golden_bin) for i in range(500)] + [(0, 3, golden_bin)])
    assert len(commits) == 1
    assert [type(x).__name__ for x in got] == ["Versioned"] * 500 + ["LedgerExists"]
    store.close()


def test_the_embedded_store_finds_a_batchs_existing_ledgers_in_a_few_queries(tmp_path, golden_bin):
    store = SqliteStore(tmp_path / "meta.db", retain_changes=500)
    store.create_many([(0, i, golden_bin) for i in range(0, 2000, 2)])
    said: list[str] = []
    store._db.set_trace_callback(said.append)
    got = store.create_many([(0, i, golden_bin) for i in range(1000)])
    # not one lookup a ledger: the 1000 keys asked in queries of at most 400
    assert len([q for q in said if q.startswith("SELECT l.scope")]) == 3
    assert [type(x).__name__ for x in got] == ["LedgerExists", "Versioned"] * 500
    # the change log as the creates one at a time leave it: every change numbered, pruned at each
    # thousandth change to the newest 500
    assert store.head_sequence() == 1500
    with pytest.raises(StoreError, match="pruned"):
        store.changes_since(499)
    assert [(c.sequence, c.ledger) for c in store.changes_since(500, 2000)] == \
        [(s, 2 * (s - 1)) for s in range(501, 1001)] + [(1000 + k, 2 * k - 1) for k in range(1, 501)]
    store.close()


@pytest.mark.parametrize("secured", [False, True])
def test_a_multis_creates_are_the_bytes_kazoo_writes_for_them(secured):
    # a client never started: its default ACL (the store's credentials) and chroot are what count
    acl = [make_digest_acl("bookie", "bk-pw", all=True), make_acl("world", "anyone", read=True)] if secured else None
    zk = KazooClient(hosts="127.0.0.1:1" + ("/chrooted" if secured else ""), default_acl=acl)
    ops = [("/ledgers/000", b""), ("/ledgers/000/0000", b""),
           ("/ledgers/000/0000/0000/0000/L0005", b"BookieMetadataFormatVersion\t3\n\x02\x08\x03"),
           ("/ledgers/scopes/0000000000000007/0000/0000/0000/L002a", bytes(range(256)) * 3)]
    theirs = zk.transaction()
    for path, data in ops:
        theirs.create(path, data)
    mine = zk.transaction()
    add_creates(mine, ops)
    assert Transaction(mine.operations).serialize() == Transaction(theirs.operations).serialize()


@pytest.mark.parametrize("multi", [True, False], ids=["as-multis", "pipelined"])
@pytest.mark.parametrize("applied", [True, False])
def test_a_batched_create_whose_reply_is_lost_is_applied_exactly_once(tmp_path, golden_bin, applied, multi):
    zk = started(tmp_path / "zk")
    store = ZkStore(zk.hosts, "/ledgers", multi_writes=multi)
    try:
        store.create(0, 5, golden_bin)             # the 2-level parents exist: the first send goes through
        hook = LostMultiReply(store, applied) if multi else LostAsyncReply(store, "create_async", applied)
        try:
            got = store.create_many([(0, 6, golden_bin), (0, 7, golden_bin), (0, 1 << 40, golden_bin)])
        finally:
            hook.restore()
        assert hook.fired
        assert [(type(x).__name__, x.version) for x in got] == [("Versioned", 0)] * 3
        for lid in (6, 7, 1 << 40):
            assert store.read(0, lid, consistent=True).data == golden_bin
    finally:
        store.close()
        zk.stop()


def test_a_multi_learns_parents_that_exist_and_answers_ledgers_that_exist(tmp_path, golden_bin):
    zk = started(tmp_path / "zk")
    store = ZkStore(zk.hosts, "/ledgers")
    other = ZkStore(zk.hosts, "/ledgers")        # another writer: its parents are unknown to ``store``
    try:
        other.create(0, (1 << 40) + 1, golden_bin)
        other.create(0, 9, golden_bin)
        commits = []
        real = store.zk.transaction

        def counted():
            commits.append(1)
            return real()
        store.zk.transaction = counted
        store.zk.create_async = lambda *a, **kw: pytest.fail("a create was sent op by op")
        got = store.create_many([(0, 1 << 40, golden_bin), (0, 9, with_length(golden_bin, 5)), (0, 10, golden_bin)])
        assert [type(x).__name__ for x in got] == ["Versioned", "LedgerExists", "Versioned"]
        # the parents met, all learnt at once; the ledger that exists, answered and taken out; then
        # applied: every create went in a multi
        assert len(commits) == 3
        assert store.read(0, 9, consistent=True).data == golden_bin
    finally:
        store.close()
        other.close()
        zk.stop()


# ------------------------------------------------------------------------ metadata import
def _folder(tmp_path, golden_bin, n: int):
    folder = tmp_path / "md"
    folder.mkdir()
    salt = next(_bases) << 20
    for i in range(n):
        lid = ((salt + i) * 0x9E3779B97F4A7C15) & ((1 << 63) - 1)        # spread over the 64-bit range
        (folder / f"{lid:x}.bin").write_bytes(golden_bin)
    return folder


def test_import_streams_the_folder_and_creates_a_thousand_ledgers_a_call(service, golden_bin, tmp_path,
                                                                            monkeypatch):
    _store, c, _stub = service
    folder = _folder(tmp_path, golden_bin, 2500)
    ids = sorted(int(p.stem, 16) for p in folder.iterdir())
    monkeypatch.setattr(os, "listdir", lambda *a: pytest.fail("the folder was listed whole"))
    calls = []
    monkeypatch.setattr(folder_import, "create_many",
                        lambda client, items: calls.append(len(items)) or create_many(client, items))
    said = []
    got = folder_import.import_folder(c, str(folder), None, lambda text, last: said.append(text))
    assert sorted(calls) == [500, 1000, 1000] and got.count("imported") == 2500
    assert said[-1] == "imported 2500 of 2500 ledgers"
    assert sorted(x.ledger for x in got.ledgers("imported")) == ids
    again = folder_import.import_folder(c, str(folder), "skip")
    assert again.count("skipped") == 2500 and again.count("imported") == 0


def test_import_sends_the_bytes_it_checked_without_reading_the_folder_again(service, golden_bin, tmp_path,
                                                                           monkeypatch):
    _store, c, _stub = service
    folder = _folder(tmp_path, golden_bin, 1500)
    files = sorted(folder.iterdir())
    other = with_length(golden_bin, 77)
    real_finish = import_spool.Spool.finish

    def checked(spool):     # after the check: the folder changes and can no longer be read
        real_finish(spool)
        files[0].write_bytes(other)
        monkeypatch.setattr(folder_import, "read_bytes", lambda p: pytest.fail(f"{p} read again"))
        monkeypatch.setattr(os, "scandir", lambda *a: pytest.fail("the folder was listed again"))
    monkeypatch.setattr(import_spool.Spool, "finish", checked)
    got = folder_import.import_folder(c, str(folder), None)
    assert got.count("imported") == 1500
    assert c.read(int(files[0].stem, 16)).serialized == golden_bin


def test_import_sends_the_whole_folder_in_ledger_id_order(service, golden_bin, tmp_path, monkeypatch):
    _store, c, _stub = service
    folder = _folder(tmp_path, golden_bin, 2100)
    for scope in (9, 3):            # scoped ledgers after scope 0, by scope
        (folder / LedgerId(scope, 5).qualified_name).with_suffix(".bin").write_bytes(golden_bin)
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(folder_import, "create_many",
                        lambda client, items: sent.extend(x[:2] for x in items) or create_many(client, items))
    assert folder_import.import_folder(c, str(folder), None).count("imported") == 2102
    assert len(sent) == 2102 and sent == sorted(sent) and sent[-2:] == [(3, 5), (9, 5)]


@pytest.mark.parametrize("fails_at", ["open", "write"])
def test_import_reads_the_folder_again_when_its_spool_cannot_be_written(service, golden_bin, tmp_path,
                                                                        monkeypatch, fails_at):
    _store, c, _stub = service
    folder = _folder(tmp_path, golden_bin, 1200)
    real = import_spool.tempfile.TemporaryFile

    refused = []

    class Full:             # a temporary folder with room for 700 records
        def __init__(self, *a, **kw):
            if fails_at == "open":
                refused.append("open")
                raise OSError(errno.ENOSPC, "No space left on device")
            self.f, self.writes = real(*a, **kw), 0

        def write(self, b):
            self.writes += 1
            if self.writes > 700:
                refused.append("write")
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(b)

        def __getattr__(self, name):
            return getattr(self.f, name)
    monkeypatch.setattr(import_spool.tempfile, "TemporaryFile", Full)
    got = folder_import.import_folder(c, str(folder), None)
    assert refused[:1] == [fails_at]
    assert got.count("imported") == 1200
    assert sorted(x.ledger for x in got.ledgers("imported")) == sorted(int(p.stem, 16) for p in folder.iterdir())


def test_a_spool_that_cannot_be_read_back_is_one_error_naming_it(service, golden_bin, tmp_path, monkeypatch):
    _store, c, _stub = service
    folder = _folder(tmp_path, golden_bin, 10)

    def eio(*a):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(import_spool.os, "pread", eio)
    with pytest.raises(DiskError, match=r"bkdisk-import-\*: cannot read back the import's spool \(Input/output"):
        folder_import.import_folder(c, str(folder), None)


def test_import_creates_nothing_when_a_file_anywhere_does_not_parse(service, golden_bin, tmp_path):
    _store, c, _stub = service
    folder = _folder(tmp_path, golden_bin, 1200)
    bad = folder / "ffffffffff.bin"
    bad.write_bytes(b"BookieMetadataFormatVersion\t3\n\xff\xff")
    with pytest.raises(Exception, match=str(bad)):
        folder_import.import_folder(c, str(folder), None)
    for p in list(folder.iterdir())[:20]:
        with pytest.raises(MetadataError, match="LEDGER_NOT_FOUND"):
            c.read(int(p.stem, 16))


def test_a_watch_of_everything_sees_each_ledger_of_a_create_batch_created_once(service, golden_bin):
    store, c, _stub = service
    base = next(_bases) * 1000
    store.follow(0, None)
    watcher = c.watch(watch_all=True, after_sequence=store.head_sequence())
    keys = [(0, base), (0, base + (1 << 45)), (7, base)]
    got = create_many(c, [(s, lid, golden_bin) for s, lid in keys])
    assert all(x.version == 0 for x in got)
    seen = [next(watcher) for _ in keys]
    for s, lid in keys:                 # read back (ZooKeeper: from ZooKeeper itself, its real czxid)
        c.read(lid, s, consistent=True)
    c.create(golden_bin, ledger_id=base + 1)          # a marker: nothing came between
    seen.append(next(watcher))
    assert sorted((e.change, e.scope, e.ledger_id, e.version) for e in seen[:3]) == \
        sorted(("CREATED", s, lid, 0) for s, lid in keys)
    assert (seen[3].change, seen[3].ledger_id) == ("CREATED", base + 1)
