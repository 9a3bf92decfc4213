"""A multi's creates serialized in one pass, as one item of a kazoo transaction's operations.

kazoo's ``TransactionRequest.create`` checks and wraps every op (a namedtuple, its path normalized,
its ACL serialized again), and ``Transaction.serialize`` packs each on its own: for a batch of
creates that was a quarter of the service's CPU (and a ledger is four creates). The bytes are the
ones kazoo writes (jute's CreateRequest: path, data, ACL list, flags; each op after its MultiHeader),
the ACL the client's default (the store's credentials) as kazoo takes it, the paths under the
client's chroot; ZooKeeper answers one result per create, as for kazoo's own ops.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from kazoo.protocol.serialization import int_struct, multiheader_struct
from kazoo.security import OPEN_ACL_UNSAFE

CREATE = 1                   # ZooKeeper's OpCode.create
PERSISTENT = int_struct.pack(0)


def _string(text: str) -> bytes:
    b = text.encode("utf-8")
    return int_struct.pack(len(b)) + b


def acl_bytes(acl: Sequence[Any]) -> bytes:
    """A jute ACL list: its length, then each ACL's perms, scheme and id."""
    return int_struct.pack(len(acl)) + b"".join(int_struct.pack(a.perms) + _string(a.id.scheme) + _string(a.id.id)
                                                for a in acl)


class Creates(namedtuple("Creates", "body")):
    """Persistent creates as one item of a kazoo ``TransactionRequest.operations``. kazoo
    writes an op as its MultiHeader and then ``serialize()``: the first create's header is the one
    kazoo writes, each later create's header is in ``body``."""

    type = CREATE

    def serialize(self) -> bytes:
        return self.body


def add_creates(transaction: Any, creates: Sequence[tuple[str, bytes]]) -> None:
    """Add persistent creates of (path, data) to kazoo ``transaction``, in order."""
    if not creates:
        return
    client = transaction.client
    tail = acl_bytes(client.default_acl or OPEN_ACL_UNSAFE) + PERSISTENT
    chroot = (client.chroot or "").rstrip("/")
    header = multiheader_struct.pack(CREATE, False, -1)
    pack = int_struct.pack
    parts: list[bytes] = []
    for path, data in creates:
        p = (chroot + path).encode("utf-8")
        parts += (header, pack(len(p)), p, pack(len(data)), data, tail)
    transaction.operations.append(Creates(b"".join(parts[1:])))
