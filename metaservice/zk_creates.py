"""Creates of named ledgers on the ZooKeeper store, many at once (``MetadataStore.create_many``).

Every create is sent on the one session before any reply is awaited (ZooKeeper applies a session's
requests in order), so a batch costs one round trip, not one per ledger; each keeps its own
outcome (LEDGER_EXISTS for a znode that exists: create-only). A create whose parent znodes are
missing is sent again once the batch's missing parents are made, level by level, each level
pipelined, as BookKeeper's ``ZkUtils.createFullPathOptimistic`` makes them one create at a time.
A create whose reply was lost is settled as the single create settles it (the ledger read back).
"""
from __future__ import annotations

from kazoo import exceptions as kx

from bkdisk.metaservice.store import LedgerExists, StoreError, Versioned, check_ids
from bkdisk.metaservice.zk_watch import Seen

Item = tuple[int, tuple[int, int], bytes]     # (index in the batch, (scope, ledger), data)


def create_many(store, creates: list[tuple[int, int, bytes]]) -> list[Versioned | StoreError]:
    """``MetadataStore.create_many`` on ZkStore ``store``."""
    out: list = [None] * len(creates)
    todo: list[Item] = []
    for i, (scope, ledger, data) in enumerate(creates):
        try:
            check_ids(scope, ledger)
        except StoreError as exc:
            out[i] = exc
            continue
        todo.append((i, (scope, ledger), data))
    orphans = _send(store, todo, out)
    if orphans:
        _make_parents(store, {store.path(*key).rsplit("/", 1)[0] for _i, key, _d in orphans})
        for i, key, data in _send(store, orphans, out):
            out[i] = _single(store, key, data)       # its parents still missing: as a single create
    return out


def _single(store, key: tuple[int, int], data: bytes) -> Versioned | StoreError:
    try:
        return store.create(key[0], key[1], data)
    except StoreError as exc:
        return exc


def _send(store, items: list[Item], out: list) -> list[Item]:
    """Send ``items``' creates pipelined and record each outcome in ``out``; the items whose parent
    znode is missing (nothing recorded for them)."""
    from bkdisk.metaservice.zk_store import _DOWN
    sent = []
    for item in items:
        try:
            store._ready()
        except StoreError as exc:
            out[item[0]] = exc
            continue
        sent.append((item, store.zk.create_async(store.path(*item[1]), item[2], include_data=True)))
    orphans = []
    for (i, key, data), res in sent:
        try:
            try:
                _path, stat = res.get()
                store.follower.observe(key, Seen(stat.czxid, 0, data))
                out[i] = Versioned(key[0], key[1], 0, data)
            except kx.NoNodeError:
                orphans.append((i, key, data))
            except kx.NodeExistsError:
                out[i] = LedgerExists(f"ledger {key[1]} of scope {key[0]} already exists")
            except _DOWN:
                out[i] = _single(store, key, data) if _settle(store, key, data) is None else \
                    Versioned(key[0], key[1], 0, data)
        except StoreError as exc:
            out[i] = exc
        finally:
            store.follower.touch(key)
    return orphans


def _settle(store, key: tuple[int, int], data: bytes) -> Seen | None:
    """A create whose reply was lost, read back: its state (applied) or None (not applied)."""
    def check(seen):
        if seen.data is None:
            return None
        if (seen.version, seen.data) == (0, data):
            return seen
        raise kx.NodeExistsError()
    try:
        got = store._resolve(key, check)
    except kx.NodeExistsError:
        raise LedgerExists(f"ledger {key[1]} of scope {key[0]} already exists") from None
    if got is not None:
        store.follower.observe(key, got)
    return got


def _make_parents(store, parents: set[str]) -> None:
    """Create the missing ancestors of ``parents`` below the store's root, shallowest first, each
    depth's creates pipelined; one that exists (made meanwhile) is fine, and one that fails for any
    other reason leaves its ledger to the single create."""
    root_depth = store.root.count("/")
    levels: dict[int, set[str]] = {}
    for p in parents:
        parts = p.split("/")
        for d in range(root_depth + 1, len(parts)):
            levels.setdefault(d, set()).add("/".join(parts[:d + 1]))
    for d in sorted(levels):
        pending = [store.zk.create_async(p, b"") for p in sorted(levels[d])]
        for r in pending:
            try:
                r.get()
            except Exception:   # NodeExists (fine); anything else is met again by the single create
                pass
