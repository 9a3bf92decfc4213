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
