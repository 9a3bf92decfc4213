"""Names of files and folders a run makes beside others' and removes when it ends: each carries the
process id and its start time, so that the next run can tell one left by a run that was killed (its
process gone, or the id reused by another) from one a run still going holds, and remove it."""
from __future__ import annotations

import os
import shutil


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None when it does not run."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2:].split()[19].decode()


def own_prefix(prefix: str) -> str:
    """``prefix`` followed by this process's id and start time: the start of a name this run owns."""
    pid = os.getpid()
    return f"{prefix}{pid}-{start_time(pid) or 0}-"


def remove_stale(root: str, prefix: str) -> list[str]:
    """Remove what the entries of ``root`` named ``own_prefix(prefix)`` by runs no longer running hold."""
    removed: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for n in names:
        if not n.startswith(prefix):
            continue
        parts = n[len(prefix):].split("-")
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        if start_time(int(parts[0])) == parts[1]:
            continue   # its run goes on
        path = os.path.join(root, n)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                continue
        removed.append(path)
    return removed
