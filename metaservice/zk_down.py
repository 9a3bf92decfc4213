"""``DOWN``: the kazoo errors that mean the session to ZooKeeper is down, not that ZooKeeper refused.

A request that raises one of them may have been applied or not (its reply is lost); the store, its
writes, its batched creates and its scans all tell these apart from ZooKeeper's answers."""
from __future__ import annotations

from kazoo import exceptions as kx
from kazoo.handlers.threading import KazooTimeoutError

DOWN = (kx.ConnectionLoss, kx.SessionExpiredError, kx.ConnectionClosedError, kx.OperationTimeoutError,
        KazooTimeoutError)
