"""The windowed walk over a mapped file, shared by the jitted scanners (entry logs, journals, ...).

A scanner's kernel walks records through one window of the file (``map_window``, default 64 MiB)
and keeps its position in a small int64 state array, so the next window resumes where it stopped and
memory stays bounded whatever the file size. The first slots of that array mean the same to every
scanner (``MODE``, ``RESUME``, ``NEED``); a scanner numbers its own slots from ``FIRST_OWN_SLOT``.
The kernel returns a status: ``DONE`` (mode is ``MODE_DONE``), ``NEXT_WINDOW`` (the next window must
start at ``state[RESUME]`` and hold at least ``state[NEED]`` bytes), ``FULL`` (grow the output
columns) or a scanner's own request, which its ``on_request`` callback serves before the kernel
runs again on the same window.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Callable
from concurrent.futures import Executor, Future, wait
from contextlib import AbstractContextManager, ExitStack, nullcontext

import numpy as np

from bkdisk.diskio.kernels import as_bytes_array, last_nonzero, readonly
from bkdisk.diskio.mapped import DiskError, file_size, map_file, map_window, read_range

DEFAULT_WINDOW = 64 << 20
MIN_WINDOW = 4096

# State slots every windowed kernel shares.
MODE, RESUME, NEED = 0, 1, 2
FIRST_OWN_SLOT = 3
MODE_DONE = -1
# Statuses every windowed kernel shares; a scanner's own requests are numbered from FIRST_OWN_STATUS.
DONE, NEXT_WINDOW, FULL = 0, 1, 2
FIRST_OWN_STATUS = 3


class FileSource:
    """A file (read through windows) or in-memory bytes, behind the same small interface."""

    def __init__(self, path: str, data, stack: ExitStack):
        self.path = path
        self.random_access = False   # set by ``will_need``: windows read only the pages touched
        self._stack = stack
        self._whole: np.ndarray | None = None
        self._held: np.ndarray | None
        self._fd: int | None = None
        if data is not None:
            self._held = as_bytes_array(data)
            self.size = self._held.size
        else:
            self._held = None
            self.size = file_size(path)   # DiskError unless a readable regular file (no FIFO, no device)

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer at the end of the file)."""
        length = max(0, min(length, self.size - offset))
        if self._held is not None:
            return self._held[offset:offset + length].tobytes()
        return read_range(self.path, offset, length)

    def window(self, offset: int, length: int) -> AbstractContextManager[np.ndarray]:
        """The bytes [offset, offset + length) as a uint8 array, unmapped on exit."""
        if self._held is not None:
            return nullcontext(self._held[offset:offset + length])
        return map_window(self.path, offset, length, random_access=self.random_access)

    def whole(self) -> np.ndarray:
        """The whole file, mapped once for the rest of the scan (pages are read only where touched)."""
        whole = self._whole
        if whole is None:
            whole = self._whole = self._held if self._held is not None else readonly(
                self._stack.enter_context(map_file(self.path)))
        return whole

    def _descriptor(self) -> int:
        if self._fd is None:
            from bkdisk.diskio.mapped import open_regular
            self._fd = open_regular(self.path, "cannot read")[0]
            self._stack.callback(os.close, self._fd)
        return self._fd

    def will_need(self, offsets: np.ndarray, span: int, asked: bool = False) -> None:
        """The reader will touch [offset, offset + span) at each of the sorted ``offsets`` and little
        else: those pages are asked for now (unless ``asked`` already), all at once, and the windows
        read no other page ahead."""
        if self._held is None:
            if not asked:
                from bkdisk.diskio.read_ahead import will_need
                will_need(self._descriptor(), offsets, span)
            self.random_access = True

    def next_data(self, offset: int) -> int:
        """The first offset at or after ``offset`` that may hold data, ``size`` when none does: the
        bytes between are a hole of a sparse file and read as zeros (SEEK_DATA; where the system cannot
        tell, ``offset`` itself). A 1 TB sparse file is not read through to learn it holds zeros."""
        seek_data = getattr(os, "SEEK_DATA", None)
        if self._held is not None or seek_data is None or offset >= self.size:
            return min(offset, self.size)
        try:
            return min(os.lseek(self._descriptor(), offset, seek_data), self.size)
        except OSError as e:
            return self.size if e.errno == errno.ENXIO else offset   # ENXIO: only a hole from offset on

    def last_nonzero(self, end: int, window: int) -> int:
        """Offset of the last non-zero byte before ``end``, or -1, read backwards window by window
        (windows that hold no data, holes of a sparse file, are not read)."""
        hi = end
        while hi > 0:
            lo = max(0, hi - window)
            if self.next_data(lo) >= hi:
                hi = lo
                continue
            with self.window(lo, hi - lo) as w:
                i = last_nonzero(readonly(w))
                del w
            if i >= 0:
                return lo + i
            hi = lo
        return -1


def read_head(path: str, data, n: int) -> tuple[bytes, int]:
    """The first ``n`` bytes and the size of a file (or of in-memory bytes), without mapping it."""
    if data is not None:
        arr = as_bytes_array(data)
        return arr[:n].tobytes(), arr.size
    from bkdisk.diskio.mapped import open_regular
    fd, fst = open_regular(path, "cannot read")   # DiskError for a FIFO or device: never blocks
    try:
        return os.pread(fd, n, 0), fst.st_size
    except OSError as e:
        raise DiskError(path, f"cannot read ({e.strerror})") from None
    finally:
        os.close(fd)


# Rows a table of columns has at least: a column of one row is contiguous, which numba types as another
# array layout than a longer one's, and a kernel met with it first compiles again (minutes, for a walk).
MIN_ROWS = 2


class Columns:
    """Output columns a kernel fills in place: the fields of one structured table (so the rows need no
    copy to become one), grown when the kernel reports FULL.

    ``kernel``: the fields the kernel fills, in its order, when the table keeps only some of them
    (``dtype``'s): a field the table does not keep is given to the kernel as one value written over
    and over (a zero-stride array), so one compiled kernel serves narrow and whole tables."""

    def __init__(self, dtype: np.dtype, capacity: int, kernel: np.dtype | None = None):
        self.dtype = dtype
        self._kernel = dtype if kernel is None else kernel
        missing = set(dtype.names or ()) - set(self._kernel.names or ())
        if missing:
            raise ValueError(f"the kernel fills no {sorted(missing)}")
        self._rows = np.zeros(max(MIN_ROWS, capacity), dtype)
        self.arrays = self._fields(self._rows)

    def _fields(self, rows: np.ndarray) -> list[np.ndarray]:
        kept = self.dtype.names or ()
        return [rows[name] if name in kept else _dropped(self._kernel[name], len(rows))
                for name in self._kernel.names or ()]

    def grow_if_full(self, used: int, walked: int = 0, size: int = 0, most: int | None = None) -> None:
        """Make room past ``used`` rows: to what the rows so far project for the whole input when the
        walk has covered ``walked`` of its ``size`` bytes (at most eight times the room, as a file
        mostly zeros past its start projects far too many, and at most ``most`` rows), and at least
        double. Rows already written stay where they are (a view of them taken earlier still reads them)."""
        if used < len(self._rows):
            return
        want = 2 * len(self._rows)
        if 0 < walked < size:
            projected = min(used * size // walked + used // 16 + 1024, 8 * len(self._rows))
            want = max(want, projected if most is None else min(projected, most))
        rows = np.empty(want, self.dtype)
        copy_rows(rows[:used], self._rows[:used])
        self._rows = rows
        self.arrays = self._fields(rows)

    def restart(self, capacity: int) -> None:
        """Room for ``capacity`` rows, none written (a view of the rows before still reads them): a table
        grown large while its rows were kept in it, once they are handed over, is not filled again."""
        self._rows = np.zeros(max(MIN_ROWS, capacity), self.dtype)
        self.arrays = self._fields(self._rows)

    def table(self, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi), a view: the kernel writes only rows past the ones it reported."""
        return self._rows[lo:hi]

    def finished(self, used: int) -> np.ndarray:
        """The first ``used`` rows, copied when the room left past them is large."""
        rows = self._rows[:used]
        if not room_worth_freeing(len(self._rows), used):
            return rows
        out = np.empty(used, self.dtype)
        copy_rows(out, rows)
        return out


def _dropped(dtype: np.dtype, rows: int) -> np.ndarray:
    """A writable column of ``rows`` that all are one value: what a kernel writes there is not kept
    (numba types it as it types a table's field, a strided 1-d array, so no kernel is compiled again)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape=(rows,), strides=(0,))


def room_worth_freeing(capacity: int, used: int) -> bool:
    """Whether the room past ``used`` of ``capacity`` rows is large enough to copy the rows out of it."""
    return capacity - used > used // 8 + 1024


def grown_beside(column: np.ndarray, table: Columns, used: int) -> np.ndarray:
    """``column`` (a value per row beside ``table``'s rows) with the room the table has after growing,
    its first ``used`` values kept (a window's job keeps reading the array it was given)."""
    room = len(table.arrays[0])
    if len(column) >= room:
        return column
    more = np.zeros(room, column.dtype)
    more[:used] = column[:used]
    return more


def copy_rows(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[:] = src`` for contiguous rows of one structured dtype, copied as their bytes: numpy copies
    a packed (unaligned) structured dtype field by field, many times slower than its bytes."""
    dst.view(np.uint8)[:] = src.view(np.uint8)


def concat_rows(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """``np.concatenate(parts)`` of contiguous rows of ``dtype``, copied as their bytes (see copy_rows)."""
    out = np.empty(sum(len(p) for p in parts), dtype)
    if len(out):
        np.concatenate([np.ascontiguousarray(p).view(np.uint8) for p in parts], out=out.view(np.uint8))
    return out


def new_state(slots: int) -> np.ndarray:
    return np.zeros(FIRST_OWN_SLOT + slots, np.int64)


def walk_windows(source: FileSource, state: np.ndarray, end: int, window: int, lookahead: int,
                 run_kernel: Callable[[np.ndarray, int], int], on_request: Callable[[int], None],
                 after_window: Callable[[np.ndarray, int], Callable[[], None] | None] | None = None,
                 background: Executor | None = None) -> None:
    """Run a windowed kernel over [state[RESUME], end) of ``source`` until it reports DONE.

    ``run_kernel(buf, base)`` walks ``buf`` (file bytes [base, base + buf.size)) and returns a
    status; ``on_request(status)`` serves any status but DONE and NEXT_WINDOW; ``after_window(buf,
    base)`` sees each window once the kernel is through with it (e.g. to check the digests of the
    records it emitted, while their bytes are mapped) and may return more work on that window: run
    at once, or with ``background`` (an executor of ONE thread, so jobs run in window order) while
    the kernel walks the next window, that window kept mapped until its job is done. At most two
    windows are mapped at a time. A window holds at least ``window`` bytes, or ``state[NEED] +
    lookahead`` when a record is larger.
    """
    window = max(int(window), MIN_WINDOW)
    pending: Future | None = None
    try:
        while state[MODE] != MODE_DONE:
            start = int(state[RESUME])
            length = max(0, min(end - start, max(window, int(state[NEED]) + lookahead)))
            state[NEED] = 0
            stack = ExitStack()
            with ExitStack() as on_error:
                on_error.callback(stack.close)
                buf = readonly(stack.enter_context(source.window(start, length)))
                while True:
                    status = run_kernel(buf, start)
                    if status in (DONE, NEXT_WINDOW):
                        break
                    on_request(status)
                job = after_window(buf, start) if after_window is not None else None
                on_error.pop_all()
            mapped: ExitStack | None = stack   # (None once a background job owns it)
            try:
                if pending is not None:
                    previous, pending = pending, None
                    previous.result()   # the previous window's job (its exception, if any, surfaces here)
                if job is not None and background is not None:
                    pending = background.submit(_then_close, job, stack)
                    mapped = None
                elif job is not None:
                    job()
            finally:
                del buf, job   # let map_window unmap now, before the next window is mapped
                if mapped is not None:
                    mapped.close()
            if status == DONE and state[MODE] != MODE_DONE:
                raise AssertionError(f"{source.path}: kernel reported done without finishing the walk")
        if pending is not None:
            previous, pending = pending, None
            previous.result()
    finally:
        if pending is not None:
            wait([pending])   # never leave a job running on a window after the walk is gone


def _then_close(job: Callable[[], None], mapped: ExitStack) -> None:
    try:
        job()
    finally:
        mapped.close()
