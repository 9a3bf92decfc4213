"""Background lanes for a check run with ``--jobs`` above 1: named tasks run in order on a thread per
lane, their results waited for by the thread that runs the passes.

The passes ask for a result by name (``shared``): the background's when a lane runs that task (waited
for there, its exception raised there), else computed on the asking thread, once. Only the passes'
thread calls the progress callback: a lane records its progress, the waiting thread shows it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

Progress = Callable[[str, int, int], None]   # (what, done, total)
Task = tuple[str, Callable[[], Any]]          # (name, work)


class Stopped(Exception):
    """The check stopped (it failed elsewhere): the background leaves the rest of its work."""


@dataclass
class Lanes:
    results: dict[str, Any] = field(default_factory=dict)
    _futures: dict[str, Future] = field(default_factory=dict)
    _stop: threading.Event | None = None                  # set: the check failed, stop
    _threads: list[threading.Thread] = field(default_factory=list)
    _owner: threading.Thread | None = None                 # the thread that runs the passes
    _done: dict[str, tuple[int, int]] = field(default_factory=dict)   # progress from the background

    def shared(self, name: str, compute: Callable[[], Any], progress: Progress) -> Any:
        """The result ``name``: the background's when ``start`` gave it a lane (waited for here; its
        exception raised here), else ``compute()`` on this thread, once."""
        fut = self._futures.get(name)
        if fut is not None:
            self._wait(fut, progress)   # (at once when done)
        elif name not in self.results:
            self.results[name] = compute()
        return self.results[name]

    def start(self, lanes: list[list[Task]]) -> None:
        """Run each lane's tasks in order on a thread of its own; ``shared(name)`` waits for them.

        A task that needs another's result waits for it like a pass does. An exception ends its lane;
        ``shared`` raises it for that task and every later one of the lane."""
        self._stop, self._owner = threading.Event(), threading.current_thread()
        for lane in lanes:
            work: list[tuple[str, Callable[[], Any], Future]] = [(name, fn, Future()) for name, fn in lane]
            self._futures.update((name, fut) for name, _fn, fut in work)
            self._threads.append(threading.Thread(target=self._run_lane, args=(work,), name="fsck-scans"))
        for t in self._threads:
            t.start()

    def add(self, lane: list[Task]) -> None:
        """One more lane, started now: for work whose inputs are ready only part-way through the check
        (after ``start``, or alone)."""
        if not lane:
            return
        if self._stop is None:
            self._stop, self._owner = threading.Event(), threading.current_thread()
        work: list[tuple[str, Callable[[], Any], Future]] = [(name, fn, Future()) for name, fn in lane]
        self._futures.update((name, fut) for name, _fn, fut in work)
        t = threading.Thread(target=self._run_lane, args=(work,), name="fsck-scans")
        self._threads.append(t)
        t.start()

    def _run_lane(self, work: list[tuple[str, Callable[[], Any], Future]]) -> None:
        for i, (name, fn, fut) in enumerate(work):
            fut.set_running_or_notify_cancel()
            try:
                self.results[name] = fn()
            except BaseException as e:   # raised again on the thread that waits
                for _n, _f, later in work[i:]:
                    later.set_exception(e)
                return
            fut.set_result(None)

    def keep_going(self) -> None:
        """Raise ``Stopped`` (on a background thread) when the check has stopped: the work left is not wanted."""
        if self._stop is not None and self._stop.is_set() and self.on_background():
            raise Stopped()

    def stop(self) -> None:
        """Stop the background after the file it is on, and wait for it (a check that failed)."""
        if self._stop is not None:
            self._stop.set()
        for t in self._threads:
            t.join()

    def on_background(self) -> bool:
        return self._owner is not None and threading.current_thread() is not self._owner

    def background_progress(self, what: str, done: int, total: int) -> None:
        self._done[what] = (done, total)   # shown by the waiting thread: the progress callback is not shared

    def _wait(self, fut: Future, progress: Progress) -> None:
        mine = not self.on_background()   # only the passes' thread calls the progress callback
        while not wait([fut], timeout=0.2).done:
            for what, (done, total) in list(self._done.items()) if mine else ():
                progress(what, done, total)
        for what in list(self._done) if mine else ():   # the last state, shown once
            progress(what, *self._done.pop(what))
        fut.result()


def in_order(fn: Callable[..., Any], items: Iterable[tuple], width: int) -> Iterator[Any]:
    """``fn(*item)`` of each item, in order, computed on up to ``width`` threads at once (for kernels
    that release the GIL): at most ``width`` items are read ahead of the one given back."""
    if width <= 1:
        for item in items:
            yield fn(*item)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(width, thread_name_prefix="fsck-join") as pool:
        pending: deque[Future] = deque()
        for item in items:
            pending.append(pool.submit(fn, *item))
            if len(pending) >= width:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

