"""A mapped read that faults, said in one line instead of killing the process without a word.

The scanners read files through memory maps (diskio/mapped.py). When the disk returns an I/O error
under a mapped page, or the file is cut short while it is mapped, the read raises no exception: the
kernel sends SIGBUS and the process dies ("Bus error", exit 135), mid-output, naming nothing. On a
failing disk (when fsck is run) that is the likely case, not a rare one.

So the commands that read bookie files run their work in a forked child (``guard_command``), and an
audit task scans its disk in one (``child_stream``). While a window is mapped, ``noting`` keeps its
file and byte range in a small table of shared memory; when the child dies by a signal the parent
reads the table and says which file and which bytes were being read, and exits with the caller's
code for an operational error. Nothing is written either way: the parent only waits.

The parent passes on the signals sent to it alone (``kill PID``: SIGTERM, SIGINT, SIGHUP, SIGQUIT);
the ones a terminal sends to the whole process group (Ctrl-C) reach the child directly. A parent that
dies with no chance to pass anything on (SIGKILL, the OOM killer, a Spark executor torn down) takes
the child with it: on Linux the child asks the kernel for SIGTERM when its parent goes, so no orphan
goes on reading a disk (or writing a repair) with nobody waiting for its result.
``BKDISK_NO_FORK=1`` runs the work in the process itself (for a debugger or a profiler).
"""
from __future__ import annotations

import mmap
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

SLOTS = 64                    # windows mapped at once that can be named (threads x nesting)
PATH_BYTES = 4000
# One row per slot: busy flag, offset, length, path length, path bytes (struct: no numpy in a parent
# that only waits, nor in the start-up of a command that fails early).
SLOT_HEAD = struct.Struct("<B7xqqI4x")
SLOT_SIZE = SLOT_HEAD.size + PATH_BYTES
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
CANCELLING = frozenset(FORWARDED)   # a death by one of these is the user cancelling
FAULTS = {signal.SIGBUS: "the disk returned an I/O error, or the file shrank, while it was read through a map",
          signal.SIGSEGV: "the reader crashed (SIGSEGV)"}


class _Slots:
    """Shared (MAP_SHARED | MAP_ANONYMOUS) rows of the windows mapped now: the child writes, the
    parent reads them after the child died."""

    def __init__(self) -> None:
        self._mem = mmap.mmap(-1, SLOTS * SLOT_SIZE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self._free = list(range(SLOTS - 1, -1, -1))
        self._lock = threading.Lock()

    def take(self, path: str, offset: int, length: int) -> int:
        with self._lock:
            if not self._free:
                return -1   # more windows than slots: this one is not named
            i = self._free.pop()
        raw = os.fsencode(path)[:PATH_BYTES]
        at = i * SLOT_SIZE
        self._mem[at + SLOT_HEAD.size:at + SLOT_HEAD.size + len(raw)] = raw
        SLOT_HEAD.pack_into(self._mem, at, 0, offset, length, len(raw))
        self._mem[at] = 1        # last: a row is complete when it says busy
        return i

    def release(self, i: int) -> None:
        if i < 0:
            return
        self._mem[i * SLOT_SIZE] = 0
        with self._lock:
            self._free.append(i)

    def busy(self) -> list[tuple[str, int, int]]:
        out = []
        for i in range(SLOTS):
            at = i * SLOT_SIZE
            flag, offset, length, n = SLOT_HEAD.unpack_from(self._mem, at)
            if flag == 1:
                raw = self._mem[at + SLOT_HEAD.size:at + SLOT_HEAD.size + min(n, PATH_BYTES)]
                out.append((os.fsdecode(raw), offset, length))
        return sorted(out)


_table: _Slots | None = None   # set in a guarded child only


@contextmanager
def noting(path: str, offset: int, length: int) -> Iterator[None]:
    """Name ``path`` bytes [offset, offset + length) as mapped while the block runs (in a guarded child)."""
    table = _table
    if table is None:
        yield
        return
    i = table.take(path, offset, length)
    try:
        yield
    finally:
        table.release(i)


def describe_death(status: int, mapped: list[tuple[str, int, int]]) -> str | None:
    """One line for a child's wait status: None when it exited by itself."""
    if not os.WIFSIGNALED(status):
        return None
    sig = os.WTERMSIG(status)
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    if sig in CANCELLING:
        return f"cancelled ({name})"
    where = "; ".join(f"{p} bytes {o}..{o + n - 1}" for p, o, n in mapped)
    if sig == signal.SIGBUS:
        shrunk = [(p, o, n, size) for p, o, n in mapped if (size := _size_now(p)) is not None and size < o + n]
        if shrunk:   # the windows whose file is now shorter than they were: the read that faulted
            return "; ".join(f"{p} bytes {o}..{o + n - 1}: the file shrank to {size} bytes while it was read "
                             f"through a map" for p, o, n, size in shrunk) + "; stopped"
    if sig in FAULTS:
        what = FAULTS[signal.Signals(sig)]
        return f"{where}: {what}; stopped" if where else f"{what}; stopped (no mapped read was in progress)"
    if sig == signal.SIGKILL:
        return "killed (SIGKILL: by an operator, or by the system out of memory)"
    return f"stopped by {name}" + (f" while reading {where}" if where else "")


def _size_now(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def forking_allowed() -> bool:
    """Whether work may go to a forked process here: the system forks and BKDISK_NO_FORK is not set."""
    return hasattr(os, "fork") and os.environ.get("BKDISK_NO_FORK", "") not in ("1", "true", "yes")


def _can_fork() -> bool:
    return forking_allowed() and hasattr(signal, "sigwaitinfo") and _table is None


def _wait_passing_signals(pid: int) -> int:
    """Wait for ``pid`` with SIGCHLD and FORWARDED blocked (the caller blocked them before forking);
    a signal sent to this process alone is passed on; one the terminal sent the group is not."""
    waited = {signal.SIGCHLD, *FORWARDED}
    while True:
        info = signal.sigwaitinfo(waited)
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return status
        elif info.si_code <= 0:   # SI_USER, SI_QUEUE, SI_TKILL: kill() by a process, not the tty driver
            try:
                os.kill(pid, info.si_signo)
            except ProcessLookupError:
                pass


def _fork_child() -> tuple[int, _Slots, set]:
    """Fork with SIGCHLD and FORWARDED blocked in the parent (none is lost before it waits); the
    child gets the mask back and the table of mapped windows."""
    global _table
    table = _Slots()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, *FORWARDED})
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _end_with_parent(parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        _table = table
    return pid, table, old


PR_SET_PDEATHSIG = 1   # prctl(2)


def _end_with_parent(parent: int) -> None:
    """In a forked child: SIGTERM (a cancel) when the parent dies. The kernel sends it when the
    thread that forked ends, so the guards fork from the thread that then waits for the child."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return   # a kernel that refuses it: the child only loses this safety net
    if os.getppid() != parent:   # the parent died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


def guard_command(run: Callable[[], object], prog: str, fault_exit: int, cancel_exit: int) -> object:
    """Run a command's work in a forked child and return what it returns (in the child, which then
    exits as the command would); in the parent return the child's exit code, after one line on
    stderr (``prog: ...``) when a signal ended it: ``fault_exit`` for a fault, ``cancel_exit`` for
    a signal that cancels."""
    if not _can_fork():
        return run()
    sys.stdout.flush()
    sys.stderr.flush()
    pid, table, old = _fork_child()
    if pid == 0:
        return run()
    try:
        status = _wait_passing_signals(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    line = describe_death(status, table.busy())
    if line is None:
        return os.waitstatus_to_exitcode(status)
    print(f"{prog}: {line}", file=sys.stderr, flush=True)
    return cancel_exit if os.WTERMSIG(status) in CANCELLING else fault_exit


@contextmanager
def child_stream(produce: Callable[[BinaryIO], None]) -> Iterator[tuple[BinaryIO, Callable[[], str | None]]]:
    """Run ``produce(sink)`` in a forked child writing to a pipe; yield (the pipe's read end, a
    function that waits for the child and says how it ended: None, or one line). The child always
    ends with ``os._exit`` (it never returns into the caller's code); leaving the block early kills it."""
    r, w = os.pipe()
    pid, table, old = _fork_child()
    if pid == 0:
        code = 0
        try:
            import faulthandler
            faulthandler.disable()   # the parent says how this child ended, in one line
            os.close(r)
            with os.fdopen(w, "wb") as sink:
                produce(sink)
        except BaseException as e:   # noqa: BLE001 - said to the parent through the exit code and stderr
            print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
            code = 1
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, old)   # the parent reads the pipe; it waits below
    os.close(w)
    src = os.fdopen(r, "rb")
    ended: list[str | None] = []

    def outcome() -> str | None:
        if not ended:
            _, status = os.waitpid(pid, 0)
            line = describe_death(status, table.busy())
            if line is None and os.waitstatus_to_exitcode(status) != 0:
                line = f"the scan's process exited with code {os.waitstatus_to_exitcode(status)}"
            ended.append(line)
        return ended[0]

    try:
        yield src, outcome
    finally:
        src.close()
        if not ended:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            outcome()
