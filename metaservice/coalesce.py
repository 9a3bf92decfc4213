"""Concurrent calls of one kind on one channel coalesced into batched RPCs.

Each caller hands in its request and waits for its own result. One batch is in flight at a time: the
caller that finds none in flight sends everything waiting (its own request among it) at once, so a
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
    __slots__ = ("request", "size", "result", "done", "woken")

    def __init__(self, request: Any, size: int):
        self.request, self.size = request, size
        self.result: Any = None
        self.done = False
        self.woken = threading.Event()


class Coalescer:
    """``send(requests) -> results`` sends a batch and returns one result per request, in order (a
    result that is an exception is raised in its caller's thread; an exception ``send`` raises is
    raised in every caller of that batch). A batch holds at most ``limit`` requests and, beyond its
    first, ``budget`` bytes as ``size(request)`` counts them."""

    def __init__(self, send: Callable[[list], Sequence[Any]], limit: int = 64, budget: int = 1 << 19,
                 size: Callable[[Any], int] = lambda _r: 0):
        self._send = send
        self.limit, self.budget, self._size = limit, budget, size
        self._lock = threading.Lock()
        self._pending: list[_Slot] = []
        self._busy = False
        self.batches = 0            # batches sent (for tests and benchmarks)

    def call(self, request: Any) -> Any:
        slot = _Slot(request, self._size(request))
        with self._lock:
            self._pending.append(slot)
            lead = not self._busy
            self._busy = True
        if not lead:
            slot.woken.wait()
        if not slot.done:           # this caller sends: the first in line when none is in flight
            self._lead()
        if isinstance(slot.result, BaseException):
            raise slot.result
        return slot.result

    def _take(self) -> list[_Slot]:
        with self._lock:
            n, used = 1, self._pending[0].size
            while n < min(len(self._pending), self.limit) and used + self._pending[n].size <= self.budget:
                used += self._pending[n].size
                n += 1
            batch, self._pending = self._pending[:n], self._pending[n:]
            self.batches += 1
        return batch

    def _lead(self) -> None:
        batch = self._take()
        try:
            results = list(self._send([s.request for s in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} requests got {len(results)} results")
        except BaseException as exc:   # every caller of this batch sees why it failed
            results = [exc] * len(batch)
        with self._lock:
            nxt = self._pending[0] if self._pending else None
            self._busy = nxt is not None
        for s, r in zip(batch, results):
            s.result, s.done = r, True
            s.woken.set()
        if nxt is not None:         # hand the next batch to the first caller waiting
            nxt.woken.set()
