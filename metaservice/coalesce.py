"""Concurrent calls of one kind on one channel coalesced into batched RPCs.

Each caller hands in its request and waits for its own result. One batch is in flight at a time (or a
set number): the caller that finds none in flight sends its request and everything waiting at once, so a
lone caller sends at once and pays no delay; requests that arrive meanwhile wait, and when the batch
returns the first of them is woken to send them all as the next batch. No thread of its own, no timer.
The per-call cost of a Python gRPC call (client and server) is then paid once per batch, not once per
request.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


class _Slot:
    __slots__ = ("request", "size", "result", "batch", "woken")

    def __init__(self, request: Any, size: int):
        self.request, self.size = request, size
        self.result: Any = None
        self.batch: list[_Slot] | None = None     # set when this caller is to send a batch
        self.woken = threading.Event()


class Coalescer:
    """``send(requests) -> results`` sends a batch and returns one result per request, in order (a
    result that is an exception is raised in its caller's thread; an exception ``send`` raises is
    raised in every caller of that batch). A batch holds at most ``limit`` requests and, beyond its
    first, ``budget`` bytes as ``size(request)`` counts them; at most ``in_flight`` batches are
    under way at once."""

    def __init__(self, send: Callable[[list], Sequence[Any]], limit: int = 64, budget: int = 1 << 19,
                 size: Callable[[Any], int] = lambda _r: 0, in_flight: int = 1):
        self._send = send
        self.limit, self.budget, self._size, self.in_flight = limit, budget, size, in_flight
        self._lock = threading.Lock()
        self._pending: list[_Slot] = []
        self._flying = 0
        self.batches = 0            # batches sent (for tests and benchmarks)

    def call(self, request: Any) -> Any:
        slot = _Slot(request, self._size(request))
        with self._lock:
            if self._flying < self.in_flight:
                self._flying += 1
                self._pending.insert(0, slot)
                slot.batch = self._take()
            else:
                self._pending.append(slot)
        if slot.batch is None:
            slot.woken.wait()
        if slot.batch is not None:  # this caller sends a batch, its own request first in it
            self._run(slot.batch)
        if isinstance(slot.result, BaseException):
            raise slot.result
        return slot.result

    def _take(self) -> list[_Slot]:
        """The next batch off the queue (the lock held)."""
        n, used = 1, self._pending[0].size
        while n < min(len(self._pending), self.limit) and used + self._pending[n].size <= self.budget:
            used += self._pending[n].size
            n += 1
        batch, self._pending = self._pending[:n], self._pending[n:]
        self.batches += 1
        return batch

    def _run(self, batch: list[_Slot]) -> None:
        try:
            results = list(self._send([s.request for s in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} requests got {len(results)} results")
        except BaseException as exc:   # every caller of this batch sees why it failed
            results = [exc] * len(batch)
        with self._lock:            # the next batch goes to the first caller waiting, or none is sent
            nxt = self._take() if self._pending else None
            if nxt is not None:
                nxt[0].batch = nxt
            else:
                self._flying -= 1
        for s, r in zip(batch, results):
            s.result = r
            s.woken.set()
        if nxt is not None:
            nxt[0].woken.set()
