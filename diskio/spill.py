"""Bounded memory for work over a whole bookie: a memory limit, a private temporary folder, and record
arrays partitioned by a key and spilled to that folder when they outgrow their share of the limit.

A command's per-entry tables (every entry of every log, every index location) grow with the bookie;
``RangeSpill`` keeps them in memory while they fit in the share given to it, and past that writes each
key range's rows to a file of its own, so a later step reads one range at a time. Rows come back per
range in the order they were appended, whether they were spilled or not: a step that reads ranges
gives the same result either way.

The folder (``SpillFolder``) is made only when something spills, under ``--tmp-dir`` (default the
system's), never inside a bookie's dirs; it is removed when the work ends, after Ctrl-C and SIGTERM
too, and a run removes the folders of runs that were killed (their process is gone).
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bkdisk.diskio import run_owned
from bkdisk.diskio.read_back import ReadBuffers, read_into
from bkdisk.diskio.spill_files import SpillError, write_rows

if TYPE_CHECKING:   # numpy loads with the first table (the options' module is imported for --help)
    import numpy as np

MIB = 1 << 20
DEFAULT_MEMORY_MIB = 1024
MIN_MEMORY_MIB = 1            # a tiny limit is allowed: it spills everything (what the tests do)
PREFIX = "bkdisk-spill-"
_APPEND_CHUNK = 1 << 16       # rows routed at once (bounds the routing's temporaries)
MIN_WINDOW, MAX_WINDOW = 4 * MIB, 64 * MIB


@dataclass(frozen=True)
class MemoryLimit:
    """``--memory-limit MiB`` and ``--tmp-dir``: the peak a command aims to stay under, and where
    what does not fit goes."""

    mib: float = DEFAULT_MEMORY_MIB      # (a fraction of a MiB: tests that make every table spill)
    tmp_dir: str | None = None           # None: tempfile.gettempdir()

    @property
    def bytes(self) -> int:
        return int(self.mib * MIB)

    def share(self, fraction: float) -> int:
        """Bytes of the limit given to one table."""
        return max(1, int(self.bytes * fraction))

    @property
    def window(self) -> int:
        """Bytes of a file a scanner maps at once: mapped pages count in the resident set, and a check
        maps several windows at once (a scan thread's walk and digest check, the journals')."""
        return min(MAX_WINDOW, max(MIN_WINDOW, self.bytes // 64 >> 20 << 20))


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies in it, links followed: where a command writes, checked
    against the folders it reads."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def remove_stale(root: str) -> list[str]:
    """Remove the spill folders under ``root`` whose process is gone (a run that was killed)."""
    return run_owned.remove_stale(root, PREFIX)


class SpillFolder:
    """The run's temporary folder, made on first use under ``limit.tmp_dir`` and removed by ``close``
    (a ``with`` block), at exit, and on SIGTERM/SIGHUP. ``forbidden``: folders it must not be in
    (the bookie's dirs), checked at once; the folders of killed runs there are removed at once too."""

    _live: set[str] = set()
    _lock = threading.RLock()
    _handlers_set = False

    def __init__(self, limit: MemoryLimit, forbidden: Sequence[str] = ()):
        self.root = os.path.abspath(limit.tmp_dir or tempfile.gettempdir())
        self.forbidden = [os.path.abspath(d) for d in forbidden]
        self.path: str | None = None
        self.read_back = ReadBuffers(limit.bytes // 10)   # the blocks spilled rows are read back into
        self.check()
        remove_stale(self.root)   # what killed runs left, whether this run spills or not

    def check(self) -> None:
        for d in self.forbidden:
            if inside(self.root, d):
                raise SpillError(f"{self.root}: --tmp-dir is inside the bookie's dir {d}; "
                                 f"expected a folder outside every bookie dir")

    def get(self) -> str:
        """The folder, made now if it is not yet (by one thread: the scans of a check share it)."""
        with SpillFolder._lock:
            return self._get()

    def _get(self) -> str:
        if self.path is None:
            if not os.path.isdir(self.root):
                raise SpillError(f"{self.root}: --tmp-dir is not a folder")
            try:
                self.path = tempfile.mkdtemp(prefix=run_owned.own_prefix(PREFIX), dir=self.root)
            except OSError as e:
                raise SpillError(f"{self.root}: cannot make a temporary folder ({e.strerror})") from None
            SpillFolder._live.add(self.path)
            _install_cleanup()
        return self.path

    def close(self) -> None:
        self.read_back.clear()
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            with SpillFolder._lock:
                SpillFolder._live.discard(self.path)
            self.path = None

    def __enter__(self) -> SpillFolder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _remove_live() -> None:
    with SpillFolder._lock:
        live, SpillFolder._live = list(SpillFolder._live), set()
    for p in live:
        shutil.rmtree(p, ignore_errors=True)


def _install_cleanup() -> None:
    """At exit and on SIGTERM/SIGHUP (which end a process without unwinding it) remove the live
    folders; SIGINT unwinds (KeyboardInterrupt), and ``close`` runs on the way out."""
    if SpillFolder._handlers_set:
        return
    SpillFolder._handlers_set = True
    import atexit
    atexit.register(_remove_live)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        old = signal.getsignal(sig)

        def handler(signum, frame, old=old):
            _remove_live()
            if callable(old):
                old(signum, frame)
            else:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


class RangeSpill:
    """Rows of one structured dtype, routed by ``route(rows) -> range index`` (a numpy function of a
    chunk of rows, values in 0..ranges-1), or appended already grouped (``append_grouped``); held in
    memory up to ``budget`` bytes, then each range's rows appended to a file of its own in ``folder``.
    ``ranges()`` gives each range's rows, in range order, each in append order."""

    def __init__(self, dtype: np.dtype, route: Callable[[np.ndarray], np.ndarray] | None, ranges: int, budget: int,
                 folder: SpillFolder, name: str = "rows"):
        import numpy as np
        self.dtype, self.route, self.n, self.budget = np.dtype(dtype), route, max(1, int(ranges)), int(budget)
        self.folder, self.name = folder, name
        self._held: list[list[np.ndarray]] = [[] for _ in range(self.n)]
        self._held_bytes = 0
        self._files: list[str | None] = [None] * self.n
        self.rows = 0
        self.spilled = False

    def append(self, rows: np.ndarray) -> None:
        import numpy as np
        if len(rows) == 0:
            return
        rows = np.asarray(rows, self.dtype)
        assert self.route is not None, "a RangeSpill without a route takes rows grouped (append_grouped)"
        for lo in range(0, len(rows), _APPEND_CHUNK):
            part = rows[lo:lo + _APPEND_CHUNK]
            r = np.asarray(self.route(part), np.int64)
            if self.n == 1:
                self._held[0].append(part.copy())
            else:
                from bkdisk.diskio.kernels import stable_partition  # (numba loads with the first rows)
                order, cuts = np.empty(len(part), np.int64), np.empty(self.n + 1, np.int64)
                stable_partition(r, self.n, order, cuts)
                grouped = np.take(part, order)   # one gather; each range holds a slice of it
                for i in np.flatnonzero(cuts[1:] > cuts[:-1]).tolist():
                    self._held[i].append(grouped[cuts[i]:cuts[i + 1]])
            self._held_bytes += part.nbytes
            self.rows += len(part)
            if self._held_bytes > self.budget:
                self.flush()

    def append_grouped(self, rows: np.ndarray, at: np.ndarray) -> bool:
        """Rows already grouped by range (no ``route``): range ``i``'s are ``rows[at[i]:at[i + 1]]``, the
        first ``at[-1]`` rows of ``rows``. What is held are views of ``rows``: all of it counts against the
        budget, or only those rows, copied, when they are under half of it. Once the table has spilled,
        the rows are written at once. True when nothing of ``rows`` is held: the caller may fill it again
        (a table that spills then reads back into the same pages, not new ones each time)."""
        import numpy as np
        n = int(at[-1])
        self.rows += n
        if self.spilled:
            self.flush()   # (rows ``append`` held since go first, in order)
            for i in np.flatnonzero(at[1:] > at[:-1]).tolist():
                write_rows(self._file(i), [rows[at[i]:at[i + 1]]])
            return True
        copied = 2 * n < len(rows)
        if copied:
            rows = rows[:n].copy()
        for i in np.flatnonzero(at[1:] > at[:-1]).tolist():
            self._held[i].append(rows[at[i]:at[i + 1]])
        self._held_bytes += rows.nbytes
        if self._held_bytes > self.budget:
            self.flush()
            return True
        return copied

    def flush(self) -> None:
        """Write every range's held rows to its file."""
        if self._held_bytes == 0:
            return
        self.spilled = True
        for i, held in enumerate(self._held):
            if held:
                write_rows(self._file(i), held)
                self._held[i] = []
        self._held_bytes = 0

    def _file(self, i: int) -> str:
        """Range ``i``'s file (its name chosen with the first rows it is given)."""
        path = self._files[i]
        if path is None:
            path = self._files[i] = os.path.join(self.folder.get(), f"{self.name}-{id(self):x}-{i}.bin")
        return path

    def range_rows(self, i: int) -> np.ndarray:
        """Range ``i``'s rows in append order (read back from its file when it spilled)."""
        return joined_range_rows([self], i)

    def ranges(self) -> Iterator[tuple[int, np.ndarray]]:
        for i in range(self.n):
            yield i, self.range_rows(i)

    def close(self) -> None:
        """Drop the held rows and the files."""
        for i, p in enumerate(self._files):
            if p is not None:
                try:
                    os.unlink(p)
                except OSError:
                    pass
                self._files[i] = None
        self._held = [[] for _ in range(self.n)]
        self._held_bytes = 0


def joined_range_rows(spills: Sequence[RangeSpill], i: int) -> np.ndarray:
    """Range ``i``'s rows of each of ``spills`` (one dtype, one folder) in turn, each in append order: read
    back into one of the folder's reused blocks, as the next range's will be (not a new array a range,
    whose pages the system would zero first); rows held only in memory, in one part, as they are."""
    import numpy as np
    dtype, read_back = spills[0].dtype, spills[0].folder.read_back
    parts: list[tuple[str | None, int, list[np.ndarray]]] = []
    for s in spills:
        path = s._files[i]
        parts.append((path, 0 if path is None else os.path.getsize(path) // dtype.itemsize, s._held[i]))
    total = sum(n + sum(len(h) for h in held) for _p, n, held in parts)
    if total == 0:
        return np.zeros(0, dtype)
    if all(p is None for p, _n, _h in parts) and sum(len(held) for _p, _n, held in parts) == 1:
        return next(held[0] for _p, _n, held in parts if held)
    out = read_back.block(total * dtype.itemsize)[:total * dtype.itemsize].view(dtype)
    at = 0
    for path, n, held in parts:
        if path is not None and n:
            with open(path, "rb", buffering=0) as f:
                read_into(f, path, out[at:at + n], 0)
            at += n
        for h in held:
            out[at:at + len(h)] = h
            at += len(h)
    return out


def split_ranges(keys: np.ndarray, weights: np.ndarray, limit: float) -> np.ndarray:
    """Bounds that cut sorted ``keys`` into ranges whose summed ``weights`` stay under ``limit`` where a
    single key allows: the first key of each range after the first (for ``np.searchsorted(bounds, k,
    'right')`` as the range of key ``k``)."""
    import numpy as np
    bounds, acc = [], 0.0
    for k, w in zip(np.asarray(keys).tolist(), np.asarray(weights, np.float64).tolist()):
        if acc and acc + w > limit:
            bounds.append(k)
            acc = 0.0
        acc += w
    return np.array(bounds, dtype=np.asarray(keys).dtype)
