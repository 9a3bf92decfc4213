"""Versioned setData of ledgers on the ZooKeeper store, many at once.

Each write's outcome is its own single setData's at the expected version: a multi is used only as a
way to send many that all apply, never to fail one write for another's conflict. Writes sent one by
one are pipelined on the one session; ZooKeeper applies a session's requests in order, so their
outcomes are those of the same writes made one after another. A write whose reply was lost is settled
as a single write's is (the ledger read back)."""
from __future__ import annotations

from kazoo import exceptions as kx

from bkdisk.metaservice.store import BadVersion, LedgerNotFound, StoreError, Versioned, check_ids
from bkdisk.metaservice.zk_auth import DENIED
from bkdisk.metaservice.zk_batch_sends import MULTI_BYTES, commit, pipelined
from bkdisk.metaservice.zk_down import DOWN
from bkdisk.metaservice.zk_layout import JAVA_INT_MAX
from bkdisk.metaservice.zk_watch import Seen


def write_check(data: bytes, expected_version: int):
    """The settling rule of a setData whose reply was lost: the state read back -> that state
    (applied), None (not applied: send again), or the error it met."""
    def check(seen):
        if seen.data is None:
            raise kx.NoNodeError()
        if (seen.version, seen.data) == (expected_version + 1, data):
            return seen                     # the lost reply's write applied
        if seen.version == expected_version:
            return None                     # not applied: send again
        raise kx.BadVersionError()
    return check


def write_error(exc: Exception, scope: int, ledger: int, expected_version: int) -> StoreError:
    """The store's error for what ZooKeeper answered a setData."""
    if isinstance(exc, kx.NoNodeError):
        return LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist")
    if isinstance(exc, kx.BadVersionError):
        return BadVersion(f"ledger {ledger} of scope {scope} is not at version {expected_version}")
    raise exc


def write_many(store, writes: list[tuple[int, int, bytes, int]]) -> list[Versioned | StoreError]:
    """``MetadataStore.write_many`` on ZkStore ``store``.

    First tried (unless ``store.multi_writes`` is off) as ONE multi of the setData's (one request
    for ZooKeeper and for kazoo's connection loop, whose per-request cost is most of a write's): when
    it applies, each write is applied
    exactly as alone, in order. When any of them fails, a multi applies none of them, so every write
    is then sent on its own, pipelined: a conflict on one ledger never fails another's write."""
    out: list = [None] * len(writes)
    todo = []
    for i, (scope, ledger, data, expected) in enumerate(writes):
        try:
            check_ids(scope, ledger)
            if not 0 <= expected < JAVA_INT_MAX:
                out[i] = store.write(scope, ledger, data, expected)     # refused as a single write is
                continue
        except StoreError as exc:
            out[i] = exc
            continue
        todo.append((i, (scope, ledger), data, expected))
    if store.multi_writes and len(todo) > 1 and sum(len(d) for _i, _k, d, _v in todo) <= MULTI_BYTES:
        todo = _as_one_multi(store, todo, out)
    sent = pipelined(store, todo, out, lambda item: store.zk.set_async(store.path(*item[1]), item[2],
                                                                       version=item[3]))
    for item, res in sent:
        _finish(store, out, item, res.get)
    return out


def _as_one_multi(store, todo: list, out: list) -> list:
    """Apply ``todo`` as one multi; the writes still to send one by one (all of them if it failed)."""
    try:
        store._ready()
    except StoreError:
        return todo
    t = store.zk.transaction()
    for _i, key, data, expected in todo:
        t.set_data(store.path(*key), data, version=expected)
    reply = commit(t, len(todo))
    if reply.lost:              # each write settled as a single write's would be
        for item in todo:
            _finish(store, out, item, _lost)
        return []
    if not reply.applied:       # refused whole, or one failed: none applied
        return todo
    for item, stat in zip(todo, reply.results or ()):
        _finish(store, out, item, lambda stat=stat: stat)
    return []


def _lost():
    raise kx.ConnectionLoss()


def _finish(store, out: list, item: tuple, reply) -> None:
    """Record one write's outcome from ``reply()`` (its ZnodeStat), settling a lost reply."""
    i, key, data, expected = item
    try:
        try:
            stat = reply()
            got: Seen | None = Seen(stat.czxid, stat.version, data)
        except DOWN:
            got = store._resolve(key, write_check(data, expected))
        if got is None:             # settled as not applied: sent again as a single write
            out[i] = store.write(key[0], key[1], data, expected)
            return
        store.follower.observe(key, got)
        out[i] = Versioned(key[0], key[1], expected + 1, data)
    except (kx.NoNodeError, kx.BadVersionError) as exc:
        out[i] = write_error(exc, key[0], key[1], expected)
    except DENIED as exc:
        out[i] = store.refused(exc)
    except StoreError as exc:
        out[i] = exc
    finally:
        store.follower.touch(key)
