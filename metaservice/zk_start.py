"""A store's first steps on a cluster: its session begun, and its LAYOUT adopted or laid out as
BookKeeper's initNewCluster does, each again while the connection drops as the session begins.

kazoo says CONNECTED before the SASL login; a connection lost during the login is connected again
(zk_auth.sasl_refusal_ends_login), so the first calls may meet a ConnectionLoss that the next attempt
does not. A refusal of the store's identity is final.
"""
from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, NoReturn

from kazoo import exceptions as kx

from bkdisk.metaservice import zk_layout as L
from bkdisk.metaservice.store import StoreError
from bkdisk.metaservice.zk_auth import DENIED

if TYPE_CHECKING:
    from bkdisk.metaservice.zk_store import ZkStore

RETRY_PAUSE = 0.1   # seconds between attempts while the connection comes back


def start_session(store: ZkStore, timeout: float) -> float:
    """Start the store's client and wait up to ``timeout`` seconds for a session, through connections
    dropped as it begins (kazoo's own start() gives up at the first drop it sees); a refusal of the
    store's identity is final. The deadline (time.monotonic) the session was waited for by."""
    deadline = time.monotonic() + timeout
    store.zk.start_async().wait(timeout)
    while not store.zk.connected:
        failure = _ended(store, deadline, f"no session within {timeout:g} s")
        if failure is not None:
            _stop(store, failure)
        time.sleep(RETRY_PAUSE / 2)
    return deadline


def first_layout(store: ZkStore, deadline: float) -> str:
    """init_layout for ``store`` until it works, ZooKeeper refuses the store, or ``deadline``
    (time.monotonic) passes; the store's client is stopped when it fails."""
    while True:
        try:
            return init_layout(store.zk, store.root, f"zk://{store.hosts}{store.root}")
        except DENIED as exc:
            _stop(store, store.refused(exc))
        except (kx.ConnectionLoss, kx.SessionExpiredError) as exc:
            failure = _ended(store, deadline, f"the connection was lost as the session began ({type(exc).__name__})")
            if failure is not None:
                _stop(store, failure)
            time.sleep(RETRY_PAUSE)


def _ended(store: ZkStore, deadline: float, unreachable: str) -> Exception | None:
    """What ends the wait for a session: ZooKeeper's refusal of the store, or ``deadline`` past
    (``unreachable`` says how); None while one may still come."""
    if store.auth_failed:
        return store.refused(kx.AuthFailedError())
    if time.monotonic() < deadline:
        return None
    return StoreError(f"zk://{store.hosts}{store.root}: cannot reach ZooKeeper: {unreachable}")


def _stop(store: ZkStore, failure: Exception) -> NoReturn:
    store.zk.stop()
    store.zk.close()
    raise failure from None


def init_layout(zk, root: str, where: str) -> str:
    """Adopt the cluster's LAYOUT under ``root``, or lay out a new one (idempotent: each step is one
    that a second attempt finds done); the layout's kind."""
    zk.ensure_path(root)
    for node in ("available/readonly", "cookies"):
        zk.ensure_path(f"{root}/{node}")
    for node, data in (("LAYOUT", L.layout_bytes()), ("INSTANCEID", str(uuid.uuid4()).encode())):
        try:
            zk.create(f"{root}/{node}", data)
        except kx.NodeExistsError:
            pass
    data, _ = zk.get(f"{root}/LAYOUT")
    try:
        return L.parse_layout(data, f"{where}/LAYOUT")
    except ValueError as exc:
        raise StoreError(str(exc)) from None
