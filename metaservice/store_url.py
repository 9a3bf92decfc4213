"""``open_store``: a metadata store from its URL, the embedded SQLite one or ZooKeeper.

The factory sits above the store interface (``store.py``) and its implementations, which import that
interface: the interface does not name the stores built on it."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.metaservice.store import BadRequest, MetadataStore, NotAStoreUrl, StoreError

if TYPE_CHECKING:   # kazoo loads with the ZooKeeper store only
    from bkdisk.metaservice.zk_auth import ZkCredentials


def open_store(url: str, cache_size: int | None = None, zk_auth: ZkCredentials | None = None) -> MetadataStore:
    """A store from its URL: ``sqlite:PATH`` (embedded) or ``zk://HOST:PORT[,HOST:PORT]/ledgers``;
    ``cache_size``: ledgers the ZooKeeper store's read cache holds (its default when None);
    ``zk_auth``: the ZooKeeper store's credentials, or None."""
    if url.startswith("sqlite:"):
        path = url[len("sqlite:"):]
        path = path[2:] if path.startswith("//") else path
        if not path:
            raise BadRequest(f"{url}: sqlite: needs a file path (sqlite:PATH)")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise StoreError(f"{parent}: no such directory (for the store {url})")
        return SqliteStore(path)
    if url.startswith("zk://"):
        hosts, _, root = url[len("zk://"):].partition("/")
        for hp in hosts.split(","):
            host, sep, port = hp.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise StoreError(f"{url}: {hp!r} is not HOST:PORT (expected zk://HOST:PORT/ledgers)")
        from bkdisk.metaservice.zk_store import ZkStore  # kazoo loads with the ZooKeeper store only
        store_root = "/" + (root.strip("/") or "ledgers")
        if cache_size is None:
            return ZkStore(hosts, store_root, auth=zk_auth)
        return ZkStore(hosts, store_root, cache_size=cache_size, auth=zk_auth)
    raise NotAStoreUrl(url)
