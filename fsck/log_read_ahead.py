"""The entry logs' pages asked of the kernel ahead of their walks, on a thread of its own.

A check of a cold disk otherwise waits for the device in turn with its own work: passes 1-3 read the
index while no log is being read, and each log's walk waits for its pages as it asks for them. Asked
from the check's start, in the order the walks take the logs and at most ``AHEAD_BYTES`` ahead of
them, the pages are read while the check computes. A log walked light (the scrub) is asked for the
pages of its headers when its record offsets are known (from its last deep read, else from the index:
fsck.index_hints), any other log for its bytes from the start.

Only advice: the walks read the same bytes and find the same things. A log whose middle page is in
the page cache already is not asked for (a warm page cache needs no request per page run), and its
walk asks for what it needs as it would alone.
"""
from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np

from bkdisk.diskio import read_ahead
from bkdisk.diskio.mapped import OPEN_FLAGS
from bkdisk.entrylogs.walk import HEADER_LOOKAHEAD

AHEAD_BYTES = 256 << 20   # bytes asked for and not yet walked, at most (page cache, not this process's memory)
NEW, ASKING, ASKED, CLAIMED = range(4)


class LogReadAhead:
    """Asks for ``logs`` (paths, in walk order) on a thread; each walk ``claim``s its log as it begins."""

    def __init__(self, logs: Sequence[str], light: frozenset[str] = frozenset(),
                 hints: Callable[[str], np.ndarray | None] | None = None, ahead_bytes: int = AHEAD_BYTES,
                 index_hints: Callable[[str, Callable[[], bool]], np.ndarray | None] | None = None):
        self.logs, self.light, self.hints_of, self.ahead = list(logs), light, hints, ahead_bytes
        self.index_hints = index_hints
        self.state = dict.fromkeys(self.logs, NEW)
        self.hints: dict[str, np.ndarray | None] = {}
        self.asked: dict[str, int] = {}   # bytes asked per log not yet claimed (0: none, left to its walk)
        self.pending = 0
        self.stopped = False
        self.cond = threading.Condition()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.logs and self.thread is None:
            self.thread = threading.Thread(target=self._run, name="log-read-ahead", daemon=True)
            self.thread.start()

    def stop(self, wait: bool = True) -> None:
        """No more asking (the log being asked for is finished); ``wait``: for the thread to end."""
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        if wait and self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()

    def claim(self, path: str) -> tuple[np.ndarray | None, bool]:
        """The walk of ``path`` begins: its header offsets as they were asked for (None: not known
        here) and whether its pages were asked for already (the walk then asks for none itself)."""
        with self.cond:
            while self.state.get(path) == ASKING:
                self.cond.wait()
            was = self.state.get(path, CLAIMED)
            self.state[path] = CLAIMED
            if was != ASKED:
                return None, False
            nbytes = self.asked.pop(path)
            self.pending -= nbytes
            self.cond.notify_all()
            return self.hints.pop(path), nbytes > 0

    def _run(self) -> None:
        for path in self.logs:
            with self.cond:
                while not self.stopped and self.pending >= self.ahead:
                    self.cond.wait()
                if self.stopped:
                    return
                if self.state[path] != NEW:   # its walk began first
                    continue
                room = max(self.ahead - self.pending, mmap.PAGESIZE)
            # What to ask for is worked out while the log stays NEW (the index's offsets wait for the
            # index walk): a walk that begins meanwhile takes its log without waiting for this thread.
            try:
                plan = self._plan(path)
            except Exception:   # noqa: BLE001 - only advice: the log's walk asks for its pages itself
                plan = None
            with self.cond:
                if self.stopped:
                    return
                if plan is None or self.state[path] != NEW:
                    continue
                self.state[path] = ASKING
            hints, nbytes = plan[1], 0
            try:
                nbytes = self._ask(path, *plan, room)
            except Exception:   # noqa: BLE001 - only advice, as above
                hints, nbytes = None, 0
            finally:
                with self.cond:
                    self.state[path] = ASKED
                    self.hints[path], self.asked[path] = hints if nbytes else None, nbytes
                    self.pending += nbytes
                    self.cond.notify_all()

    def _plan(self, path: str) -> tuple[int, np.ndarray | None, np.ndarray | None] | None:
        """A log's size, its header offsets from its last deep read (walked light and known) and else from
        the index; None when it is not to be asked for (empty, gone, or its middle page cached)."""
        try:
            size = os.stat(path).st_size
        except OSError:
            return None
        middle = size // 2
        if size == 0 or read_ahead.cached(path, middle - middle % mmap.PAGESIZE):
            return None   # (its walk reads its offsets itself: none are held here for a log not asked for)
        light = path in self.light
        hints = self.hints_of(path) if self.hints_of is not None and light else None
        # Offsets from the index instead: their pages asked for, the walk left to read ahead as it would
        # alone (the entries the index does not hold are walked too, and their pages are not asked for).
        indexed = self.index_hints(path, lambda: self.stopped) if hints is None and light and self.index_hints \
            else None
        return size, hints, indexed

    def _ask(self, path: str, size: int, hints: np.ndarray | None, indexed: np.ndarray | None, room: int) -> int:
        """Ask for one log's pages (a log read whole: ``room`` bytes of it at most); the bytes asked."""
        fd = os.open(path, OPEN_FLAGS)
        try:
            for offsets in (hints, indexed):
                if offsets is not None:
                    return read_ahead.will_need(fd, offsets, HEADER_LOOKAHEAD)
            n = min(size, room)
            read_ahead.ask_range(fd, 0, n)
            return n
        finally:
            os.close(fd)
