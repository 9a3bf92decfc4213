"""Ledger changes learnt from ZooKeeper's own watches, and the watch-coherent read cache they keep.

As BookKeeper's AbstractZkLedgerManager does: a ledger that is followed has a data watch (an exists
watch while it is absent), re-armed by re-reading it after each event; following every ledger adds
a children watch on each znode of the id hierarchy, so creates and deletes are seen wherever they
are; after the session comes back every followed ledger is re-read (and, when following all, every
listing), as BookKeeper re-reads its listened ledgers after an expiry.

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

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType

from bkdisk.metaservice import zk_layout as L
from bkdisk.metaservice.store import BadVersion, Change, Versioned

log = logging.getLogger(__name__)
Key = tuple[int, int]
DEFAULT_CACHE = 100_000      # ledgers held by the read cache (about their metadata's size each)


class Seen:
    """What was last read of one ledger: None data means absent."""

    __slots__ = ("czxid", "version", "data")

    def __init__(self, czxid: int, version: int, data: bytes | None):
        self.czxid, self.version, self.data = czxid, version, data


ABSENT = Seen(0, -1, None)


class Follower:
    """Follows ledgers of one ZkStore; keeps the in-memory change log ``Watch`` streams read."""

    def __init__(self, store, retain_changes: int = 100_000, cache_size: int = DEFAULT_CACHE):
        self.store = store
        self.zk = store.zk
        self.lock = threading.Condition()
        self.seen: dict[Key, Seen] = {}          # followed ledgers (and the read cache)
        self.dirty: dict[Key, int] = {}          # events not yet re-read: key -> count
        # The read cache: ledgers held only because they were read (no Watch follows them), least
        # recently read first; beyond cache_size the oldest is dropped (its next read reads ZooKeeper).
        self.cache_size = cache_size
        self.lru: collections.OrderedDict[Key, None] = collections.OrderedDict()
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
        self.thread = threading.Thread(target=self._run, name="zk-follower", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ events (kazoo's thread)
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
                self.lru.pop(key, None)
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
            self.lru.pop(key, None)     # followed: held while followed, not as a cached read
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
            names = set(self.zk.get_children(path, watch=self._on_children))
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
            if got is not None and key in self.lru:
                self.lru.move_to_end(key)
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
            if fresh and key not in self.seen and not self.closed and self.cache_size > 0:
                self.seen[key] = got
                if key not in self.following and not self.all:
                    self.lru[key] = None
                    while len(self.lru) > self.cache_size:
                        self.seen.pop(self.lru.popitem(last=False)[0], None)
        return got

    def _read(self, key: Key) -> Seen:
        path = self.store.path(*key)
        while True:
            try:
                data, stat = self.zk.get(path, watch=self._on_ledger)
                return Seen(stat.czxid, stat.version, data)
            except NoNodeError:
                if self.zk.exists(path, watch=self._on_ledger) is None:
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
        for kind, what in batch:
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
        pending = [(k, self.zk.get_async(self.store.path(*k), watch=self._on_ledger)) for k in keys]
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

    def _emit(self, k: Key, change: str, version: int, data: bytes | None) -> None:
        self.head += 1
        self.log.append(Change(self.head, k[0], k[1], change, version, data))
        if len(self.log) > self.retain:
            self.dropped = self.log.popleft().sequence

    # ------------------------------------------------------------------------- change log
    def read_with_head(self, key: Key) -> tuple[Versioned | None, int]:
        """Follow ``key``; what is known of it and the head, together: every later change of it
        comes after that head."""
        self.follow(key)
        with self.lock:
            s = self.seen[key]
            return (None if s.data is None else Versioned(key[0], key[1], s.version, s.data)), self.head

    def resumable(self, key: Key | None, sequence: int) -> None:
        """BadVersion unless every change of ``key`` (None: of all ledgers) after ``sequence`` is held."""
        with self.lock:
            self._held(sequence)
            since = self.all_since if key is None else min(
                x for x in (self.all_since, self.since.get(key), self.head + 1) if x is not None)
            if since is None or since > sequence:
                raise BadVersion(f"cannot resume after change {sequence}: this service follows "
                                 f"{'every ledger' if key is None else 'that ledger'} since change "
                                 f"{since} only; resume each ledger by its known version")

    def _held(self, sequence: int) -> None:
        if sequence < self.dropped:
            raise BadVersion(f"cannot resume after change {sequence}: this service holds changes "
                             f"after {self.dropped} only (it restarted, or they were dropped); "
                             "resume each ledger by its known version")

    def changes_since(self, sequence: int, limit: int) -> list[Change]:
        with self.lock:
            self._held(sequence)
            out = []
            for c in reversed(self.log):
                if c.sequence <= sequence:
                    break
                out.append(c)
            out.reverse()
            return out[:limit]

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.lock:
            return self.lock.wait_for(predicate, timeout)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify_all()
