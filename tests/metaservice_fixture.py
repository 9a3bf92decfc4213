"""A metadata service on a real gRPC server on 127.0.0.1, for the service's tests: started over a
store, a client connected to it, and everything closed again whatever the test did."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kazoo.exceptions import ConnectionLoss
from zookeeper_fixture import started

from bkdisk.formats.metadata import parse_metadata, serialize_metadata
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.metaservice.zk_store import ZkStore


@contextmanager
def served(store, client_class=MetadataClient, **serve_options) -> Iterator[tuple[object, int]]:
    """(client, port) of a server over ``store`` (``serve_options`` as ``metaservice.server.serve``
    takes them); the client, the server and the store are closed on exit."""
    server, port = serve(store, **serve_options)
    client = client_class(f"127.0.0.1:{port}", timeout=5)
    try:
        yield client, port
    finally:
        client.close()
        server.stop(0)
        store.close()


STORES = ("sqlite", "zookeeper", "zookeeper-no-multi")


@contextmanager
def served_store(kind: str, tmp: Path) -> Iterator[tuple[object, MetadataClient, object, object]]:
    """(store, client, LedgerMetadataService stub, ZooKeeper or None) of a service over the embedded
    store (``kind`` "sqlite"), a ZooKeeper started in ``tmp`` ("zookeeper"), or one whose store sends
    every batched write as its own setData ("zookeeper-no-multi"); ZooKeeper is stopped on exit."""
    assert kind in STORES, kind
    zk = started(tmp / "zk") if kind.startswith("zookeeper") else None
    try:
        store = (SqliteStore(tmp / "meta.db") if zk is None
                 else ZkStore(zk.hosts, "/ledgers", multi_writes=kind == "zookeeper"))
        with served(store) as (client, _port):
            yield store, client, pb_grpc.LedgerMetadataServiceStub(client.ch.channel), zk
    finally:
        if zk is not None:
            zk.stop()


def with_length(serialized: bytes, n: int) -> bytes:
    """``serialized`` ledger metadata with its length set to ``n``: the same ledger, other bytes."""
    return serialize_metadata(dataclasses.replace(parse_metadata(serialized), length=n))


class LostAsyncReply:
    """The reply of the first call of the store's kazoo ``name`` (``set_async``, ``create_async``: a
    pipelined request) is lost, after the request applied (``applied``) or without sending it."""

    def __init__(self, store, name: str, applied: bool):
        self.store, self.name, self.applied, self.fired = store, name, applied, False
        self.real = getattr(store.zk, name)
        setattr(store.zk, name, self.fake)

    def fake(self, *args, **kw):
        if self.fired:
            return self.real(*args, **kw)
        self.fired = True
        if self.applied:
            self.real(*args, **kw).get()
        res = self.store.zk.handler.async_result()
        res.set_exception(ConnectionLoss())
        return res

    def restore(self):
        setattr(self.store.zk, self.name, self.real)


class LostMultiReply:
    """The reply of the store's first multi (``every``: of each multi) is lost, after the multi applied
    (``applied``) or without sending it; ``commits`` counts the multis whose reply was lost."""

    def __init__(self, store, applied: bool, every: bool = False):
        self.store, self.applied, self.every, self.commits = store, applied, every, 0
        self.real = store.zk.transaction
        store.zk.transaction = self.fake

    @property
    def fired(self) -> bool:
        return self.commits > 0

    def fake(self):
        t = self.real()
        if self.fired and not self.every:
            return t
        real_commit = t.commit

        def commit():
            self.commits += 1
            if self.applied:
                real_commit()
            raise ConnectionLoss()
        t.commit = commit
        return t

    def restore(self):
        self.store.zk.transaction = self.real


READ_CALLS = ("get_async", "exists_async")      # what kazoo's get and exists call


def count_reads(zk) -> list[str]:
    """Record every read kazoo client ``zk`` sends from now on ("get_async PATH", ...) in the list
    returned; ``uncount_reads(zk)`` stops it."""
    reads: list[str] = []
    for name in READ_CALLS:
        real = getattr(zk, name)

        def counted(path, *a, real=real, name=name, **kw):
            reads.append(f"{name} {path}")
            return real(path, *a, **kw)
        setattr(zk, name, counted)
    return reads


def uncount_reads(zk) -> None:
    for name in READ_CALLS:
        vars(zk).pop(name, None)
