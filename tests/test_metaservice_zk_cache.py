"""The ZooKeeper store's read cache: bounded (least recently read dropped first), coherent with
ZooKeeper's watches whatever it dropped, and never filled with a read that a change overtook."""
from __future__ import annotations

import itertools
import time

from metaservice_fixture import count_reads, with_length

from bkdisk.metaservice.zk_cache import NOT_HELD
from bkdisk.metaservice.zk_store import ZkStore

_roots = itertools.count(1)


def _store(zookeeper, cache_size: int) -> ZkStore:
    return ZkStore(zookeeper.hosts, f"/c{next(_roots)}/ledgers", cache_size=cache_size)


def test_the_read_cache_holds_at_most_its_size_dropping_the_least_recently_read(zookeeper, golden_bin):
    store = _store(zookeeper, cache_size=3)
    try:
        for lid in range(50):
            store.create(0, lid, golden_bin)
        for lid in range(50):
            store.read(0, lid)
        assert len(store.follower.seen) == 3 and list(store.follower.held.order) == [(0, 47), (0, 48), (0, 49)]
        reads = count_reads(store.zk)
        for lid in (48, 49, 47):                            # 47 read again: the most recent now
            store.read(0, lid)
        assert reads == []                                  # all three from the cache
        store.read(0, 10)                                   # not held: read from ZooKeeper, 48 dropped
        assert len(reads) == 1 and set(store.follower.held.order) == {(0, 47), (0, 49), (0, 10)}
        assert not store.follower.filling and not store.follower.spoiled
    finally:
        store.close()


def test_a_dropped_ledger_changed_directly_is_read_anew_and_a_held_one_follows_its_watch(
        zookeeper, kz, golden_bin):
    store = _store(zookeeper, cache_size=2)
    try:
        for lid in range(3):
            store.create(0, lid, golden_bin)
            store.read(0, lid)                              # 0 is dropped when 2 is read
        assert (0, 0) not in store.follower.seen
        kz.set(store.path(0, 0), with_length(golden_bin, 5), version=0)
        kz.set(store.path(0, 2), with_length(golden_bin, 6), version=0)
        assert (store.read(0, 0).version, store.read(0, 0).data) == (1, with_length(golden_bin, 5))
        deadline = time.monotonic() + 30
        while store.read(0, 2).version != 1 and time.monotonic() < deadline:
            time.sleep(0.02)                                # the watch event drops the stale entry
        assert store.read(0, 2).data == with_length(golden_bin, 6)
    finally:
        store.close()


def test_a_read_that_a_change_overtakes_is_not_kept_in_the_cache(zookeeper, kz, golden_bin):
    """The change's event arrives between ZooKeeper's reply and the cache fill: the reply may predate
    the change, and its watch has fired already, so keeping it would serve it stale for good."""
    store = _store(zookeeper, cache_size=10)
    try:
        store.create(0, 1, golden_bin)
        real = store.follower._read

        def read_then_changed(key):
            got = real(key)
            store.follower.touch(key)                      # as the watch event of a write would
            return got
        store.follower._read = read_then_changed
        try:
            assert store.read(0, 1).version == 0
        finally:
            del store.follower._read
        assert store.follower.cached((0, 1)) is None       # not kept: the next read goes to ZooKeeper
        assert store.read(0, 1).version == 0 and store.follower.cached((0, 1)) is not None
    finally:
        store.close()


def test_no_read_cache_at_all_when_its_size_is_zero(zookeeper, golden_bin):
    store = _store(zookeeper, cache_size=0)
    try:
        store.create(0, 1, golden_bin)
        reads = count_reads(store.zk)
        assert [store.read(0, 1).version for _ in range(3)] == [0, 0, 0]
        assert len(reads) == 3 and not store.follower.seen
    finally:
        store.close()


def _changes(store, head: int, n: int) -> list:
    deadline = time.monotonic() + 30
    while len(store.changes_since(head)) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return [(c.change, c.ledger, c.version, c.data) for c in store.changes_since(head)]


def test_following_every_ledger_holds_the_bytes_of_at_most_the_cache_size_and_misses_no_change(
        zookeeper, kz, golden_bin):
    store = _store(zookeeper, cache_size=3)
    try:
        for lid in range(20):
            store.create(0, lid, with_length(golden_bin, lid))
        store.follow(0, None)
        seen = store.follower.seen
        assert len(seen) == 20 and sum(s.data is not NOT_HELD for s in seen.values()) <= 3
        head = store.head_sequence()
        old = next(lid for lid in range(20) if seen[(0, lid)].data is NOT_HELD)
        kz.set(store.path(0, old), with_length(golden_bin, 100), version=0)      # bytes not held: still told
        kz.delete(store.path(0, (old + 1) % 20))
        kz.create(store.path(0, 50), with_length(golden_bin, 50))
        assert _changes(store, head, 3) == [("UPDATED", old, 1, with_length(golden_bin, 100)),
                                            ("DELETED", (old + 1) % 20, 0, None),
                                            ("CREATED", 50, 0, with_length(golden_bin, 50))]
        assert sum(s.data is not NOT_HELD and s.data is not None for s in seen.values()) <= 3
        for lid in range(2, 20):                # a watch's first state, whether its bytes are held or not
            if lid != (old + 1) % 20:
                got, _head = store.read_with_head(0, lid)
                assert got is not None and got.data == (with_length(golden_bin, 100) if lid == old
                                                        else with_length(golden_bin, lid))
                assert store.read(0, lid).data == got.data
        assert sum(s.data is not NOT_HELD and s.data is not None for s in seen.values()) <= 3
    finally:
        store.close()


def test_the_store_url_opens_a_zookeeper_store_with_the_cache_size_given(zookeeper):
    from bkdisk.metaservice.store_url import open_store
    from bkdisk.metaservice.zk_watch import DEFAULT_CACHE
    for size, expected in ((7, 7), (None, DEFAULT_CACHE)):
        store = open_store(f"zk://{zookeeper.hosts}/c{next(_roots)}/ledgers", size)
        try:
            assert store.follower.cache_size == store.follower.held.size == expected
        finally:
            store.close()
