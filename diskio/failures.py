"""I/O failures as data (path, errno, message), and opening a regular file without raising.

A walk over thousands of files must not stop at the first folder it cannot list or file it cannot
open: each failure is kept as an IoFailure so a checker can name it, with the system's errno, and
refuse to repair what depends on it.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TypeVar

from bkdisk.diskio.mapped import NOT_REGULAR, OPEN_FLAGS, DiskError

LIST, OPEN, READ = "list", "open", "read"   # IoFailure.op: what was being done
Failed = TypeVar("Failed", bound=BaseException)


@dataclass(frozen=True)
class IoFailure:
    """A folder that could not be listed or a file that could not be opened or read."""

    path: str
    op: str               # LIST, OPEN or READ
    errno: int | None     # the OS errno; None when the path is not a regular file (a FIFO, a device)
    message: str          # the system's text for errno (os.strerror), or NOT_REGULAR

    @classmethod
    def from_oserror(cls, path: str, op: str, e: OSError) -> IoFailure:
        return cls(path, op, e.errno, e.strerror or os.strerror(e.errno or 0))

    def describe(self) -> str:
        """The reason as a report shows it: "cannot list (Permission denied)", "not a regular file"."""
        if self.errno is None:
            return self.message
        return f"cannot {'list' if self.op == LIST else 'read'} ({self.message})"

    def as_disk_error(self) -> DiskError:
        return DiskError(self.path, self.describe())


def open_regular_file(path: str) -> tuple[int, int] | IoFailure:
    """(descriptor, size) of the regular file ``path`` opened read-only and non-blocking, or why not.

    The same rule as diskio.mapped.open_regular (a FIFO opens at once and is refused, never read),
    with the failure returned instead of raised. The caller closes the descriptor.
    """
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as e:
        return IoFailure.from_oserror(path, OPEN, e)
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        return IoFailure.from_oserror(path, OPEN, e)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return IoFailure(path, OPEN, None, NOT_REGULAR)
    return fd, st.st_size


def without_frames(e: Failed) -> Failed:
    """``e`` and the exceptions it was raised from or while handling, their tracebacks dropped: an
    exception kept as a finding's data (a damaged file's) would otherwise keep every frame it passed
    through, and what they hold (a scan's arrays, a reader's buffer, a file's map), as long as it is kept."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        x.with_traceback(None)
        todo += [x.__cause__, x.__context__]
    return e
