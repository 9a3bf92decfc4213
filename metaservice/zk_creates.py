"""Creates of named ledgers on the ZooKeeper store, many at once (``MetadataStore.create_many``).

A batch goes first as a few multis (each under ``MULTI_BYTES``), each holding its ledgers' creates
and, before them, the creates of the parent znodes this store does not know to exist: one request
for ZooKeeper and for kazoo's connection loop, whose per-request cost is most of a create's. A
multi applies all its ops or none; when one op fails, the multi tells which: a ledger that exists
is answered LEDGER_EXISTS and taken out; a parent that exists (made by another writer, or by a
batch in flight beside this one) has every parent of the multi asked for in one multiRead and
those found learnt; a parent found missing is forgotten; and the multi is sent again (a few times
at most). What a multi could not settle is sent op by op: every create pipelined on the one session
(ZooKeeper applies a session's requests in order), those whose parents are missing sent again once
the batch's missing parents are made, level by level, as BookKeeper's
``ZkUtils.createFullPathOptimistic`` makes them one create at a time. Each create keeps its own
outcome (LEDGER_EXISTS for a znode that exists: create-only). A create whose reply was lost is
settled as the single create settles it (the ledger read back).
"""
from __future__ import annotations

from collections import OrderedDict

from kazoo import exceptions as kx

from bkdisk.metaservice.store import LedgerExists, StoreError, Versioned, check_ids
from bkdisk.metaservice.zk_batch_sends import MULTI_BYTES, commit, pipelined
from bkdisk.metaservice.zk_create_ops import add_creates
from bkdisk.metaservice.zk_down import DOWN
from bkdisk.metaservice.zk_multiread import multi_read_async
from bkdisk.metaservice.zk_watch import Seen

Item = tuple[int, tuple[int, int], bytes]     # (index in the batch, (scope, ledger), data)
MULTI_TRIES = 8             # sends of one multi, each after an op that failed was settled
KNOWN_PARENTS = 100_000     # parent znodes remembered to exist (least recently used forgotten)


class KnownParents:
    """Parent znodes this store made or met, least recently used forgotten first: what a multi need
    not create. A parent deleted meanwhile (BookKeeper removes empty ones) shows as a ledger create's
    NoNode and is forgotten."""

    def __init__(self, size: int = KNOWN_PARENTS):
        self.size = size
        self.paths: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, path: str) -> bool:
        if path in self.paths:
            self.paths.move_to_end(path)
            return True
        return False

    def add(self, path: str) -> None:
        self.paths[path] = None
        self.paths.move_to_end(path)
        if len(self.paths) > self.size:
            self.paths.popitem(last=False)

    def forget_above(self, path: str) -> None:
        for p in _ancestors(path):
            self.paths.pop(p, None)


def _ancestors(path: str, root: str = "") -> list[str]:
    """The znodes above ``path``, below ``root``, shallowest first."""
    parts = path.split("/")
    first = root.count("/") + 1 if root else 1
    return ["/".join(parts[:d + 1]) for d in range(first, len(parts) - 1)]


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
    if store.multi_writes and todo:
        todo = _as_multis(store, todo, out)
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
    sent = pipelined(store, items, out, lambda item: store.zk.create_async(store.path(*item[1]), item[2],
                                                                             include_data=True))
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
            except DOWN:
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
    levels: dict[int, set[str]] = {}
    for p in parents:
        for a in [*_ancestors(p, store.root), p]:
            levels.setdefault(a.count("/"), set()).add(a)
    for d in sorted(levels):
        pending = [store.zk.create_async(p, b"") for p in sorted(levels[d])]
        for r in pending:
            try:
                r.get()
            except Exception:   # NodeExists (fine); anything else is met again by the single create
                pass


def _as_multis(store, todo: list[Item], out: list) -> list[Item]:
    """Create ``todo`` as multis of at most ``MULTI_BYTES``; the items left to send one by one."""
    left: list[Item] = []
    chunk: list[tuple[Item, str]] = []
    size = 0
    for item in todo:
        path = store.path(*item[1])
        n = len(item[2]) + 4 * len(path)       # its data, its path and (at most) its parents'
        if chunk and size + n > MULTI_BYTES:
            left += _one_multi(store, chunk, out)
            chunk, size = [], 0
        chunk.append((item, path))
        size += n
    if chunk:
        left += _one_multi(store, chunk, out)
    return left


def _one_multi(store, todo: list[tuple[Item, str]], out: list) -> list[Item]:
    """Send ``todo`` (each item with its znode) as one multi, again after each op that failed is
    settled; the items it could not settle."""
    known = store.known_parents
    for _try in range(MULTI_TRIES):
        if not todo:
            return []
        try:
            store._ready()
        except StoreError:
            break
        ops: list[tuple[str, Item | None]] = []        # (path, its item; None for a parent)
        parents: set[str] = set()
        for item, path in todo:
            for p in _ancestors(path, store.root):
                if p not in parents and p not in known:
                    parents.add(p)
                    ops.append((p, None))
            ops.append((path, item))
        t = store.zk.transaction()
        add_creates(t, [(path, b"" if item is None else item[2]) for path, item in ops])
        reply = commit(t, len(ops))
        if reply.lost:              # each create settled as a single create's is
            return _settled(store, [item for item, _p in todo], out)
        if reply.applied:
            for p in parents:
                known.add(p)
            _created(store, [item for item, _p in todo], out)
            return []
        if reply.failed is None:    # refused whole (too large): nothing applied
            break
        at, exc = reply.failed
        path, hit = ops[at]
        if hit is None and isinstance(exc, kx.NodeExistsError):
            _learn_parents(store, parents)   # another writer (a concurrent batch) made parents: which
        elif hit is not None and isinstance(exc, kx.NodeExistsError):
            out[hit[0]] = LedgerExists(f"ledger {hit[1][1]} of scope {hit[1][0]} already exists")
            todo = [x for x in todo if x[0] is not hit]
        elif hit is not None and isinstance(exc, kx.NoNodeError):
            known.forget_above(path)                 # a parent known to exist was removed meanwhile
        else:
            break
    return [item for item, _p in todo]


def _created(store, items: list[Item], out: list) -> None:
    """Record the creates a multi applied. A multi's reply holds no stat, so a ledger a watch follows
    is asked for its czxid (the incarnation a watcher's events are told by); the others cost nothing."""
    f = store.follower
    with f.lock:                # the ledgers ``observe`` reports: every one, or those a watch follows
        wanted = [item for item in items if f.all or item[1] in f.seen]
    followed = [(item, store.zk.exists_async(store.path(*item[1]))) for item in wanted]
    for (_i, key, data), r in followed:
        try:
            stat = r.get()
            if stat is not None:
                store.follower.observe(key, Seen(stat.czxid, 0, data))
        except kx.ZookeeperError:
            pass                    # the ledger's next read reports it (touched below)
    for i, key, data in items:
        store.follower.touch(key)
        out[i] = Versioned(key[0], key[1], 0, data)


def _learn_parents(store, parents: set[str]) -> None:
    """Ask ZooKeeper which of ``parents`` exist, all in one multiRead (one request, where kazoo's
    one-request-per-znode calls would cost more than the multi), and remember those."""
    paths = sorted(parents)
    try:
        found = multi_read_async(store.zk, paths).get()
    except Exception:   # (a ZooKeeper before 3.6, the session down) not learnt: the op-by-op path makes them
        return
    for p, got in zip(paths, found):
        if isinstance(got, tuple):
            store.known_parents.add(p)


def _settled(store, items: list[Item], out: list) -> list[Item]:
    """After a multi whose reply was lost: each item read back; those not applied, to send again."""
    again = []
    for i, key, data in items:
        try:
            got = _settle(store, key, data)
            if got is None:
                again.append((i, key, data))
            else:
                out[i] = Versioned(key[0], key[1], 0, data)
        except StoreError as exc:
            out[i] = exc
        finally:
            store.follower.touch(key)
    return again
