"""Sending a batch of ZooKeeper requests at once, as the store's batched creates and writes do: as one
multi, whose reply is read op by op (``commit``), or pipelined on the store's one session
(``pipelined``: ZooKeeper applies a session's requests in order).

A multi applies all its ops or none. When one fails, ZooKeeper answers that op with its own error and
every other op with RolledBack (applied, then undone) or RuntimeInconsistency (not tried): the op that
failed is the one whose error is neither."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo import exceptions as kx

from bkdisk.metaservice.store import StoreError
from bkdisk.metaservice.zk_down import DOWN

MULTI_BYTES = 1 << 19       # a multi's data and paths: half ZooKeeper's default request limit (jute.maxbuffer)
_NOT_THE_CAUSE = (kx.RolledBackError, kx.RuntimeInconsistency)


@dataclass(frozen=True)
class MultiReply:
    """What a committed multi came to: ``results`` (one per op) when every op applied; ``failed`` (the
    op's index and its error) when one op failed (nothing applied); ``lost`` when the reply was lost
    (applied or not: each op is settled by reading back); ``refused`` when ZooKeeper refused it whole
    (too large, ...: nothing applied)."""
    results: list[Any] | None = None
    failed: tuple[int, Exception] | None = None
    lost: bool = False
    refused: bool = False

    @property
    def applied(self) -> bool:
        return self.results is not None


def commit(transaction: Any, ops: int) -> MultiReply:
    """Commit kazoo ``transaction`` of ``ops`` ops and read its reply."""
    try:
        results = transaction.commit()
    except DOWN:
        return MultiReply(lost=True)
    except kx.ZookeeperError:
        return MultiReply(refused=True)
    if len(results) == ops and not any(isinstance(r, Exception) for r in results):
        return MultiReply(results=results)
    return MultiReply(failed=next(((i, r) for i, r in enumerate(results)
                                   if isinstance(r, Exception) and not isinstance(r, _NOT_THE_CAUSE)), None))


def pipelined(store: Any, items: Sequence[tuple], out: list, send: Callable[[tuple], Any]) -> list[tuple[tuple, Any]]:
    """Send each of ``items`` (their first field: the index in ``out``) with ``send(item)`` (a kazoo
    ``*_async`` call) before any reply is awaited: (item, its async result) each. An item the store
    cannot send (the session down, a closed store) has that error put in ``out`` instead."""
    sent = []
    for item in items:
        try:
            store._ready()
        except StoreError as exc:
            out[item[0]] = exc
            continue
        sent.append((item, send(item)))
    return sent
