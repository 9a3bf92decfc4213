"""Ledger changes learnt from ZooKeeper's own watches, and the watch-coherent read cache they keep.

As BookKeeper's AbstractZkLedgerManager does, a ledger that is followed (or read) has a data watch
(an exists watch while it is absent), re-armed by re-reading it after each event. Following every
ledger places one persistent recursive watch on the ledgers root (ZooKeeper 3.6+, addWatch through
kazoo's protocol layer: metaservice/zk_persistent.py), which names every ledger created, changed or
deleted, stays in place (nothing is re-armed) and is added again after every reconnection; with a
ZooKeeper that refuses it, a children watch on each znode of the id hierarchy instead, so creates
and deletes are seen wherever they are. Either way, after the session comes
back every followed ledger is re-read (and, when following all, every listing), as BookKeeper
re-reads its listened ledgers after an expiry.

One thread re-reads what the events name, a batch at a time with the reads pipelined, and compares
what it reads with what it last saw of that ledger: a newer version is UPDATED, a ledger that
appeared is CREATED, one that went is DELETED, a new incarnation (another creation zxid) is DELETED
then CREATED. So a change is reported once whoever made it, in each ledger's own order; updates
that follow each other faster than the re-read show as one UPDATED with the newest version
(ZooKeeper keeps no history: the skipped versions' bytes no longer exist anywhere).
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import NoNodeError, ZookeeperError
from kazoo.protocol.states import EventType, WatchedEvent

from bkdisk.metaservice import zk_layout as L
from bkdisk.metaservice import zk_persistent as P
from bkdisk.metaservice.store import Change, StoreUnavailable, Versioned
from bkdisk.metaservice.zk_cache import ABSENT, NOT_HELD, Held, Seen
from bkdisk.metaservice.zk_changelog import ChangeLog

__all__ = ["ABSENT", "DEFAULT_CACHE", "Follower", "Seen"]

log = logging.getLogger(__name__)
Key = tuple[int, int]
DEFAULT_CACHE = 100_000      # ledgers held by the read cache (about their metadata's size each)


class Follower(ChangeLog):
    """Follows ledgers of one ZkStore; keeps the in-memory change log ``Watch`` streams read."""

    def __init__(self, store, retain_changes: int = 100_000, cache_size: int = DEFAULT_CACHE,
                 recursive: bool = True):
        self.store = store
        self.zk = store.zk
        self.recursive = False
        self._ledger_watch: Callable | None = self._on_ledger
        self._children_watch: Callable | None = self._on_children
        self.lock = threading.Condition()
        self.seen: dict[Key, Seen] = {}          # followed ledgers (and the read cache)
        self.dirty: dict[Key, int] = {}          # events not yet re-read: key -> count
        # The ledgers whose bytes are in memory, followed or only read: at most cache_size.
        self.cache_size = cache_size
        self.held = Held(cache_size)
        # Reads of ZooKeeper under way per ledger, and the ledgers an event or a write touched
        # meanwhile: such a read's result is not kept (it may predate the change).
        self.filling: dict[Key, int] = {}
        self.spoiled: set[Key] = set()
        self.listings: dict[str, set[str]] = {}  # following all: hierarchy znode -> its children
        self.all = False
        # The head when following began (each start moves the head by one, with no change at it):
        # a watch may resume after a sequence only from where its ledger was already followed.
        self.since: dict[Key, int] = {}
        self.following: set[Key] = set()         # followed, or being followed (its first read under way)
        self.all_since: int | None = None
        self.queue: collections.deque = collections.deque()
        # Sequences start at the service's start time in microseconds: a restarted service's are
        # larger than any it gave before, and a point from before the restart is refused, not
        # silently resumed after.
        self.first = self.head = time.time_ns() // 1000
        self.log: collections.deque[Change] = collections.deque()
        self.retain = retain_changes
        self.dropped = self.first          # every change up to here is no longer held
        self.closed = False
        # recursive: once every ledger is followed, one persistent recursive watch on the root
        # (ZooKeeper 3.6+) instead of a watch per ledger and per listing (metaservice/zk_persistent.py),
        # if ZooKeeper takes it. Before that, only the ledgers followed or read are watched, so a
        # write of a ledger nobody follows costs the service no event.
        self.recursive_allowed = recursive
        P.on_every_event(self.zk, self._on_node)
        self.thread = threading.Thread(target=self._run, name="zk-follower", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ events (kazoo's thread)
    def _watch_root(self) -> None:
        try:
            P.add_recursive_watch(self.zk, self.store.root)
        except ZookeeperError as exc:      # e.g. a ZooKeeper older than 3.6
            log.warning("no persistent recursive watch (%s): watching each ledger instead", exc)
            return
        self.recursive = True
        self._ledger_watch = self._children_watch = None

    def _on_node(self, _type: int, path: str) -> None:
        if self.recursive:
            self._on_ledger(WatchedEvent(None, None, path))

    def _on_ledger(self, event) -> None:
        if event.path is None:          # a session event kazoo hands every watcher when closing
            return
        key = L.key_of_path(self.store.root, self.store.kind, event.path)
        if key is not None:
            self.touch(key)

    def _on_children(self, event) -> None:
        if event.type == EventType.CHILD and event.path is not None:
            self._put(("list", event.path))

    def touch(self, key: Key) -> None:
        """``key`` changed (an event, or a write through this service): reads skip the cache until
        it is re-read. A ledger only cached (no Watch follows it) is dropped from the cache instead:
        the next read of it reads ZooKeeper and arms its watch again, so a ledger written and not
        read costs ZooKeeper nothing beyond the write."""
        with self.lock:
            if key in self.filling:
                self.spoiled.add(key)
            if key not in self.seen and not self.all:
                return          # neither followed nor cached: nothing to re-read
            if key not in self.following and not self.all:
                self.seen.pop(key, None)
                self.held.drop(key)
                return
            self.dirty[key] = self.dirty.get(key, 0) + 1
        self._put(("ledger", key))

    def observe(self, key: Key, now: Seen) -> None:
        """A state this service wrote (its reply in hand), reported at once and exactly if the
        ledger is followed; a re-read that finds it already reported adds nothing. Reported before
        the write's reply leaves the service, so a client's next write of that ledger cannot be
        re-read first."""
        with self.lock:
            before = self.seen.get(key, ABSENT if self.all else None)
            if before is None or self.closed:
                return
            if now.data is not None and before.data is not None and now.czxid == before.czxid \
                    and now.version <= before.version:
                return                  # already past it (a re-read got there first)
            self.seen[key] = now
            self.held.add(key, self.seen, self._followed)
            self._compare(key, before, now)
            self.lock.notify_all()
        self.store._notify()

    def _put(self, item) -> None:
        with self.lock:
            self.queue.append(item)
            self.lock.notify_all()

    def session_back(self, renewed: bool) -> None:
        """After a reconnection: re-read every followed ledger (and every listing when following all)."""
        with self.lock:
            keys = list(self.seen)
            self.spoiled.update(self.filling)
            for k in keys:
                self.dirty[k] = self.dirty.get(k, 0) + 1
            listed = list(self.listings)
        if self.recursive:                  # ZooKeeper forgot it with the connection
            self._put(("watch", None))
        for k in keys:
            self._put(("ledger", k))
        for p in listed:
            self._put(("list", p))
        log.info("ZooKeeper session %s: re-reading %d followed ledgers",
                 "renewed" if renewed else "back", len(keys))

    # ------------------------------------------------------------------------------ following
    def follow(self, key: Key) -> None:
        """Start following ``key`` (a no-op if followed: a pending event of it is reported by the
        re-reader)."""
        with self.lock:
            if key in self.since:
                return
            self.following.add(key)     # from here an event re-reads it instead of dropping it
            cached = key in self.seen
        if not cached:
            self._refresh([key], emit=False)
        with self.lock:
            self.head += 1
            self.since.setdefault(key, self.head)

    def follow_all(self) -> None:
        """Follow every ledger: a children watch on each hierarchy znode, a data watch on each ledger."""
        with self.lock:
            if self.all:
                return
            self.all = True
        if self.recursive_allowed:         # in place before the walk: no create is missed
            self._watch_root()
        keys: list[Key] = []
        stack = [self.store.root]
        while stack:
            path = stack.pop()
            for child, key in self._list(path)[0]:
                if key is None:
                    stack.append(child)
                else:
                    keys.append(key)
        for i in range(0, len(keys), 1000):
            self._refresh(keys[i:i + 1000], emit=False)
        with self.lock:
            self.head += 1
            self.all_since = self.head

    def _list(self, path: str, commit: bool = True) -> tuple[list[tuple[str, Key | None]], set[str]]:
        """List ``path`` with a children watch: (child path, its ledger or None for a hierarchy
        znode) of each hierarchy child, and every child's name (kept as the listing if ``commit``)."""
        try:
            names = set(self.zk.get_children(path, watch=self._children_watch))
        except NoNodeError:
            names = set()
        out = []
        for name in sorted(names):
            child = f"{path}/{name}"
            if L.is_hierarchy(self.store.root, self.store.kind, child):
                out.append((child, L.key_of_path(self.store.root, self.store.kind, child)))
        if commit:
            with self.lock:
                self.listings[path] = names
        return out, names

    def cached(self, key: Key) -> Seen | None:
        """The cached state when it is current: followed, no event pending, session up."""
        with self.lock:
            if key in self.dirty or not self.store._up.is_set():
                return None
            got = self.seen.get(key)
            if got is None or got.data is NOT_HELD:
                return None
            self.held.used(key)
            return got

    def read_through(self, key: Key) -> Seen:
        """Read ``key`` from ZooKeeper, arming its watch; keep it in the read cache if nothing
        touched it meanwhile and it is not held yet (the least recently read dropped beyond the
        cache's size)."""
        with self.lock:
            self.filling[key] = self.filling.get(key, 0) + 1
        try:
            got = self._read(key)
        finally:
            with self.lock:
                left = self.filling.pop(key) - 1
                fresh = key not in self.spoiled
                if left:
                    self.filling[key] = left
                else:
                    self.spoiled.discard(key)
        with self.lock:
            was = self.seen.get(key)
            if was is not None and was.data is NOT_HELD:     # the bytes of the state held
                fresh = fresh and (got.czxid, got.version) == (was.czxid, was.version) and got.data is not None
            elif was is not None:
                fresh = False
            if fresh and not self.closed and self.cache_size > 0:
                self.seen[key] = got
                self.held.add(key, self.seen, self._followed)
        return got

    def _followed(self, key: Key) -> bool:
        return self.all or key in self.following

    def _read(self, key: Key) -> Seen:
        path = self.store.path(*key)
        while True:
            try:
                data, stat = self.zk.get(path, watch=self._ledger_watch)
                return Seen(stat.czxid, stat.version, data)
            except NoNodeError:
                if self.zk.exists(path, watch=self._ledger_watch) is None:
                    return ABSENT

    # ------------------------------------------------------------------------- the re-reader
    def _run(self) -> None:
        while True:
            with self.lock:
                self.lock.wait_for(lambda: self.queue or self.closed)
                if self.closed:
                    return
                batch = list(self.queue)
                self.queue.clear()
            try:
                self._apply(batch)
            except Exception as exc:   # ZooKeeper away: retried when it is back
                log.warning("re-reading after ZooKeeper events failed (%s); retrying", exc)
                with self.lock:
                    self.queue.extendleft(reversed(batch))
                self.store._up.wait(1.0)
                time.sleep(0.2)

    def _apply(self, batch: list) -> None:
        keys: dict[Key, None] = {}
        listed: dict[str, set[str]] = {}
        if ("watch", None) in batch:       # in place before the re-reads that follow it
            P.add_recursive_watch(self.zk, self.store.root)
        for kind, what in batch:
            if kind == "watch":
                continue
            if kind == "list":
                with self.lock:
                    before = self.listings.get(what, set())
                children, names = self._list(what, commit=False)
                listed[what] = names
                for child, key in children:
                    name = child.rsplit("/", 1)[1]
                    if key is None and name not in before:
                        self._put(("list", child))       # a new hierarchy znode: list it too
                    elif key is not None and name not in before:
                        keys[key] = None
                for name in before - names:
                    key = L.key_of_path(self.store.root, self.store.kind, f"{what}/{name}")
                    if key is not None:
                        keys[key] = None
            else:
                keys[what] = None
        if keys:
            self._refresh(list(keys), emit=True)
        with self.lock:     # only now: a batch retried after a failure compares with the old lists
            self.listings.update(listed)

    def _refresh(self, keys: list[Key], emit: bool) -> None:
        """Re-read ``keys`` (pipelined) with their watches re-armed, and report what changed.
        Without ``emit`` (the first read of a ledger followed) a state already held is kept."""
        with self.lock:
            counts = {k: self.dirty.get(k, 0) for k in keys}
        pending = [(k, self.zk.get_async(self.store.path(*k), watch=self._ledger_watch)) for k in keys]
        got: list[tuple[Key, Seen]] = []
        for k, res in pending:
            try:
                data, stat = res.get(timeout=60)
                got.append((k, Seen(stat.czxid, stat.version, data)))
            except NoNodeError:
                got.append((k, self._read(k)))
        with self.lock:
            for k, now in got:
                before = self.seen.get(k, ABSENT if self.all else None)
                if not emit and k in self.seen:
                    continue
                if emit and before is None and k not in self.following:
                    self.dirty.pop(k, None)
                    continue            # dropped from the read cache meanwhile: nothing to keep
                if (before is not None and before.data is not None and now.data is not None
                        and now.czxid == before.czxid and now.version < before.version):
                    continue            # read before a state already reported: keep the newer
                self.seen[k] = now
                self.held.add(k, self.seen, self._followed)
                left = self.dirty.get(k, 0) - counts[k]
                if left > 0:
                    self.dirty[k] = left
                else:
                    self.dirty.pop(k, None)
                if emit and before is not None:
                    self._compare(k, before, now)
            self.lock.notify_all()
        self.store._notify()

    def _compare(self, k: Key, before: Seen, now: Seen) -> None:
        if before.data is not None and (now.data is None or now.czxid != before.czxid):
            self._emit(k, "DELETED", before.version, None)
            before = ABSENT
        if now.data is None:
            return
        if before.data is None:
            self._emit(k, "CREATED", now.version, now.data)
        elif now.version > before.version:
            self._emit(k, "UPDATED", now.version, now.data)

    # ------------------------------------------------------------------------- change log
    def read_with_head(self, key: Key) -> tuple[Versioned | None, int]:
        """Follow ``key``; what is known of it and the head, together: every later change of it
        comes after that head."""
        self.follow(key)
        for _ in range(600):
            with self.lock:
                s = self.seen[key]
                if s.data is not NOT_HELD:
                    return (None if s.data is None else Versioned(key[0], key[1], s.version, s.data)), self.head
            got = self._read(key)       # the bytes of the state held (not kept: beyond the cache's size)
            with self.lock:
                s = self.seen[key]
                if s.data is NOT_HELD and got.data is not None and (got.czxid, got.version) == (s.czxid, s.version):
                    return Versioned(key[0], key[1], got.version, got.data), self.head
                # it changed meanwhile: its event's re-read brings the state to report
                self.lock.wait_for(self._replaced(key, s), 0.1)
        raise StoreUnavailable(f"ledger {key[1]} of scope {key[0]}: its state could not be read; retry")

    def _replaced(self, key: Key, held: Seen) -> Callable[[], bool]:
        return lambda: self.seen[key] is not held

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify_all()
