"""ZooKeeper 3.6+ persistent recursive watches (addWatch, opcode 106) spoken through kazoo's protocol
layer, which has no call for them: one watch on the ledgers root that stays in place and fires for
every create, change and delete below it. kazoo hands an event only to watchers it registered for
that very path, so the store's callback is given every event the connection reads as well. ZooKeeper
forgets the watch with the connection: it is added again after every reconnection."""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from kazoo.protocol.serialization import Watch, int_struct, write_string

PERSISTENT_RECURSIVE = 1
# The event types on the wire: NodeCreated, NodeDeleted, NodeDataChanged.
NODE_EVENTS = (1, 2, 3)


class AddWatch(namedtuple("AddWatch", "path mode")):
    """The request kazoo's connection sends as it is (``type`` is the opcode); its reply has no body."""

    type = 106

    def serialize(self) -> bytearray:
        return bytearray(write_string(self.path) + int_struct.pack(self.mode))

    @classmethod
    def deserialize(cls, buf, offset):
        return True


def add_recursive_watch(zk, path: str, timeout: float = 30.0) -> None:
    """Place a persistent recursive watch on ``path``; kazoo's error (e.g. UnimplementedError from a
    ZooKeeper older than 3.6) if ZooKeeper refuses it."""
    result = zk.handler.async_result()
    zk._call(AddWatch(path, PERSISTENT_RECURSIVE), result)
    result.get(timeout=timeout)


def on_every_event(zk, callback: Callable[[int, str], None]) -> None:
    """Call ``callback(event type, path)`` on kazoo's connection thread for each node event read,
    before kazoo hands it to its own watchers (the callback must not block)."""
    conn = zk._connection
    real = conn._read_watch_event

    def read_watch_event(buffer, offset):
        watch, _ = Watch.deserialize(buffer, offset)
        if watch.type in NODE_EVENTS:
            callback(watch.type, zk.unchroot(watch.path))
        return real(buffer, offset)
    conn._read_watch_event = read_watch_event
