"""What must hold before a repair writes anything: no other repair of the bookie runs, no other process
(a running bookie) has a file open in the bookie's dirs, and the default backup folder lies inside them."""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable

from bkdisk.fsck.context import CheckContext


class RepairRefused(Exception):
    """A repair that must not start (a process holds the dirs, the backup folder leads outside)."""


def default_backup_dir(ctx: CheckContext) -> str:
    base = ctx.dirs.ledger_dirs[0] if ctx.dirs.ledger_dirs else ctx.dirs.journal_dirs[0]
    return os.path.join(base, "fsck-backup", time.strftime("%Y%m%dT%H%M%S"))


def processes_holding(dirs: list[str]) -> list[tuple[int, str]]:
    """(pid, file) of other processes with a file open below ``dirs`` (Linux /proc), e.g. a running bookie."""
    roots = [os.path.realpath(d) + os.sep for d in dirs]
    me = os.getpid()
    out: list[tuple[int, str]] = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        if pid == me:
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if any(target.startswith(r) for r in roots):
                out.append((pid, target))
                break
    return out


def hold_repair_lock(dirs: list[str], warn: Callable[[str], None] = lambda s: None) -> list[int]:
    """Lock each of ``dirs`` for this process's repair (an exclusive flock on the folder itself: no file
    is written for it), held until the descriptors returned are closed or the process ends; taken
    before the check, so that no repair acts on findings another repair is making stale.
    RepairRefused when another process holds one. A filesystem that cannot lock a folder (NFS emulates
    flock with locks that need a file open for writing) leaves that one unlocked, said through ``warn``."""
    held: list[int] = []
    for d in sorted({os.path.realpath(d) for d in dirs}):
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue   # a dir that cannot be opened: the check names it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            for f in (*held, fd):
                os.close(f)
            raise RepairRefused(f"another repair of this bookie is running (it holds {d}); "
                                f"not repairing until it ends") from None
        except OSError as e:
            os.close(fd)
            warn(f"{d}: cannot lock it for the repair ({e.strerror}); another repair of this bookie at the "
                 "same time is not excluded")
            continue
        held.append(fd)
    return held
