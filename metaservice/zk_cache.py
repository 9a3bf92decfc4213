"""What the ZooKeeper store's follower knows of each ledger (``Seen``), and which ledgers' bytes it
holds in memory (``Held``): at most a set number, the least recently used dropped first."""
from __future__ import annotations

import collections
from collections.abc import Callable

Key = tuple[int, int]


class Seen:
    """What was last read of one ledger: None data means absent, NOT_HELD that its bytes were
    dropped from memory (its creation zxid and version are still known)."""

    __slots__ = ("czxid", "version", "data")

    def __init__(self, czxid: int, version: int, data: bytes | None):
        self.czxid, self.version, self.data = czxid, version, data


ABSENT = Seen(0, -1, None)
# Compared by identity: no bytes read from ZooKeeper is this object.
NOT_HELD = bytes(bytearray(b"bkdisk: ledger metadata not held in memory"))


class Held:
    """The ledgers whose bytes are in ``seen``, least recently used first. Beyond ``size`` the oldest
    is dropped: a followed ledger keeps its (czxid, version), as its changes must still be told
    apart, with its bytes NOT_HELD; a ledger only read is forgotten (read from ZooKeeper when next
    asked for)."""

    def __init__(self, size: int):
        self.size = size
        self.order: collections.OrderedDict[Key, None] = collections.OrderedDict()

    def used(self, key: Key) -> None:
        if key in self.order:
            self.order.move_to_end(key)

    def drop(self, key: Key) -> None:
        self.order.pop(key, None)

    def add(self, key: Key, seen: dict[Key, Seen], followed: Callable[[Key], bool]) -> None:
        """``seen[key]`` was just set (the caller holds the follower's lock)."""
        if seen[key].data is None:
            self.order.pop(key, None)       # absent: nothing held
            return
        self.order[key] = None
        self.order.move_to_end(key)
        while len(self.order) > self.size:
            k = self.order.popitem(last=False)[0]
            s = seen.get(k)
            if s is None:
                continue
            if followed(k):
                if s.data is not None:
                    seen[k] = Seen(s.czxid, s.version, NOT_HELD)
            else:
                del seen[k]
