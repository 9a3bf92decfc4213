"""A metadata service on a real gRPC server on 127.0.0.1, for the service's tests: started over a
store, a client connected to it, and everything closed again whatever the test did."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.server import serve


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
