"""The ZooKeeper store's bulk read: every ledger of a key range, from listings, read in batches of one
multiRead each with the next batch sent before this one is answered."""
from __future__ import annotations

import itertools
from collections.abc import Iterator

from bkdisk.metaservice import zk_layout as L
from bkdisk.metaservice.store import StoreError, StoreUnavailable, Versioned
from bkdisk.metaservice.zk_auth import DENIED
from bkdisk.metaservice.zk_down import DOWN
from bkdisk.metaservice.zk_multiread import multi_read_async

MULTI_READ = 500            # getData per multiRead: a reply of ~100 KiB, well under jute.maxbuffer


def scope_walk(store, scope: int, after: int | None) -> Iterator[int]:
    """The ledger ids of one scope above ``after``, ascending, from listings of its hierarchy."""
    if scope:
        return L.SCOPED.walk(f"{store.root}/{L.SCOPES_NODE}/{scope:016x}", store._children, after)
    return L.scope0_walk(store.root, store.kind, store._children, after)


def ledger_keys(store, start: tuple[int, int] | None,
                end: tuple[int, int] | None) -> Iterator[tuple[int, int]]:
    """(scope, ledger) of every ledger znode in [start, end), ascending, from listings only."""
    s0, l0 = start or (0, 0)
    names = store._children(f"{store.root}/{L.SCOPES_NODE}")
    scoped = sorted(int(n, 16) for n in names if L.SCOPED_SCOPE.fullmatch(n))
    for scope in ([0] if s0 == 0 else []) + [x for x in scoped if x and x >= s0]:
        if end is not None and scope > end[0]:
            return
        after = l0 - 1 if scope == s0 and l0 > 0 else None
        for lid in scope_walk(store, scope, after):
            if end is not None and (scope, lid) >= end:
                return
            yield scope, lid


def scan(store, start: tuple[int, int] | None, end: tuple[int, int] | None,
         batch: int) -> Iterator[list[Versioned]]:
    """``MetadataStore.scan`` on ZkStore ``store``."""
    # One multiRead per batch, and the next batch's sent before this one is answered: ZooKeeper
    # answers in order on one session, so the reads cost round trips per batch, not per ledger.
    keys = ledger_keys(store, start, end)

    def send():
        chunk = list(itertools.islice(keys, min(batch, MULTI_READ)))
        store._ready()
        return chunk, (multi_read_async(store.zk, [store.path(*k) for k in chunk]) if chunk else None)

    pending = send()
    while pending[0]:
        ahead = send()
        chunk, res = pending
        try:
            got = res.get(timeout=60)
        except DOWN as exc:
            raise StoreUnavailable(f"zk://{store.hosts}{store.root}: {type(exc).__name__}; retry") from None
        except DENIED as exc:
            raise store.refused(exc) from None
        out = []
        for (scope, lid), one in zip(chunk, got):
            if one is None:            # deleted since the listing: not a ledger any more
                continue
            if isinstance(one, DENIED):
                raise store.refused(one)
            if isinstance(one, Exception):
                raise StoreError(f"zk://{store.hosts}{store.path(scope, lid)}: {type(one).__name__}")
            out.append(Versioned(scope, lid, one[1].version, one[0]))
        if out:
            yield out
        pending = ahead
