"""The listing of an index hierarchy made in a process of its own while a check loads its kernels.

Listing ``.idx`` hierarchies is system calls and a little Python: a folder per 256 ledgers and a
file per ledger. A check's own process spends its first fraction of a second loading numpy, numba
and the kernels, one core busy and the others idle; a process forked before that (``start``) lists
the dirs meanwhile, with numpy only, and sends the IndexListing back through a pipe. The check's
walk takes it (``take``) instead of listing, and reads the files in its order
(indexfiles.scan.walk_index_dirs), which gives the same inventory as listing and reading together.

Anything but a whole listing (the process failed, was killed, or sent part of one) is no listing:
the walk then lists the dirs itself, and meets whatever stopped the other process in its own.
The process ends with the check's (diskio.fault_guard.child_stream asks the kernel to end it when
its parent goes); ``close`` ends it sooner when its listing is not wanted.
"""
from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, BinaryIO

from bkdisk.diskio import fault_guard

if TYPE_CHECKING:
    from bkdisk.indexfiles.listing import IndexListing


class ListingAhead:
    """The listing of ``dirs`` being made by another process; ``take`` gives it once."""

    def __init__(self, dirs: Sequence[str], stack: ExitStack, src: BinaryIO, outcome):
        self.dirs, self._stack, self._src, self._outcome = list(dirs), stack, src, outcome
        self.taken = False

    @classmethod
    def start(cls, dirs: Sequence[str]) -> ListingAhead | None:
        """Fork the listing process (None where the system cannot fork, or BKDISK_NO_FORK is set)."""
        if not hasattr(os, "fork") or os.environ.get("BKDISK_NO_FORK", "") in ("1", "true", "yes"):
            return None
        stack = ExitStack()
        wanted = list(dirs)
        try:
            src, outcome = stack.enter_context(fault_guard.child_stream(lambda sink: _send_listing(wanted, sink)))
        except OSError:   # no process to spare (a ulimit): the walk lists for itself
            stack.close()
            return None
        return cls(wanted, stack, src, outcome)

    def take(self, dirs: Sequence[str]) -> IndexListing | None:
        """The listing of ``dirs`` when the process made a whole one (once; None after, or for other dirs)."""
        if self.taken or list(dirs) != self.dirs:
            return None
        self.taken = True
        try:
            listing = pickle.load(self._src)
        except Exception:   # noqa: BLE001 - cut short or empty: the process did not finish
            listing = None
        ended = self._outcome()
        self.close()
        from bkdisk.indexfiles.listing import IndexListing
        return listing if ended is None and isinstance(listing, IndexListing) else None

    def close(self) -> None:
        """End the process (if it still runs) and close the pipe."""
        self.taken = True
        self._stack.close()


class _Pipe:
    """A pipe's write end written whole with os.write: nothing buffered is left to fail at close when
    the reader went away."""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data) -> int:
        whole = view = memoryview(data).cast("B")
        while len(view):
            view = view[os.write(self.fd, view):]
        return len(whole)


def _send_listing(dirs: list[str], sink: BinaryIO) -> None:
    """In the forked process: list ``dirs`` and pickle the listing down the pipe. A failure (Ctrl-C
    included) sends nothing and says nothing: the check's walk lists for itself."""
    try:
        from bkdisk.indexfiles.listing import list_index_tree
        pickle.dump(list_index_tree(dirs), _Pipe(sink.fileno()), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:   # noqa: BLE001, S110 - see above
        pass
