"""Versioned setData of ledgers on the ZooKeeper store, one at a time or many pipelined.

Each write is its own single setData at the expected version (never a multi that fails all on one
conflict). Many are sent on the one session before the first reply is awaited; ZooKeeper applies a
session's requests in order, so their outcomes are those of the same writes made one after another.
A write whose reply was lost is settled as a single write's is (the ledger read back)."""
from __future__ import annotations

from kazoo import exceptions as kx

from bkdisk.metaservice.zk_layout import JAVA_INT_MAX
from bkdisk.metaservice.store import BadVersion, LedgerNotFound, StoreError, Versioned, check_ids
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
    """``MetadataStore.write_many`` on ZkStore ``store``: every setData sent, then every reply read."""
    from bkdisk.metaservice.zk_store import _DOWN
    out: list = [None] * len(writes)
    sent = []
    for i, (scope, ledger, data, expected) in enumerate(writes):
        try:
            check_ids(scope, ledger)
            if not 0 <= expected < JAVA_INT_MAX:
                out[i] = store.write(scope, ledger, data, expected)     # refused as a single write is
                continue
            store._ready()
        except StoreError as exc:
            out[i] = exc
            continue
        sent.append((i, (scope, ledger), data, expected,
                     store.zk.set_async(store.path(scope, ledger), data, version=expected)))
    for i, key, data, expected, res in sent:
        try:
            try:
                stat = res.get()
                got: Seen | None = Seen(stat.czxid, stat.version, data)
            except _DOWN:
                got = store._resolve(key, write_check(data, expected))
            if got is None:         # settled as not applied: sent again as a single write
                out[i] = store.write(key[0], key[1], data, expected)
                continue
            store.follower.observe(key, got)
            out[i] = Versioned(key[0], key[1], expected + 1, data)
        except (kx.NoNodeError, kx.BadVersionError) as exc:
            out[i] = write_error(exc, key[0], key[1], expected)
        except StoreError as exc:
            out[i] = exc
        finally:
            store.follower.touch(key)
    return out
