"""The in-memory change log of the ZooKeeper store's follower: the changes it reported, in sequence,
the newest ``retain`` of them held, and from which sequence a Watch may resume."""
from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from bkdisk.metaservice.store import BadVersion, Change

Key = tuple[int, int]


class ChangeLog:
    """Held by Follower (its ``lock``, ``head``, ``log``, ``since``, ``all_since``)."""

    lock: threading.Condition
    head: int
    log: collections.deque[Change]
    retain: int
    dropped: int
    since: dict[Key, int]
    all_since: int | None

    def _emit(self, k: Key, change: str, version: int, data: bytes | None) -> None:
        self.head += 1
        self.log.append(Change(self.head, k[0], k[1], change, version, data))
        if len(self.log) > self.retain:
            self.dropped = self.log.popleft().sequence

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
