"""The listing of an index hierarchy made in a process of its own while a check loads its kernels.

Listing ``.idx`` hierarchies is system calls and a little Python: a folder per 256 ledgers and a
file per ledger. A check's own process spends its first fraction of a second loading numpy, numba
and the kernels, one core busy and the others idle; a process forked before that (``start``) lists
the dirs meanwhile, with numpy only, and pickles the IndexListing into an unlinked temporary file of
the spill folder's parent (``--tmp-dir``). The check's walk takes it once that process has ended
(``take``) instead of listing, and reads the files in its order (indexfiles.scan.walk_index_dirs),
which gives the same inventory as listing and reading together. The two processes never hold the
listing at once (a pipe would keep the lister alive, and its copy resident, until the walk had read
it all): on a bookie of millions of ledgers the listing is a few hundred MiB.

Anything but a whole listing (the process failed, was killed, or wrote part of one) is no listing:
the walk then lists the dirs itself, and meets whatever stopped the other process in its own.
The process ends with the check's (diskio.fault_guard.child_stream asks the kernel to end it when
its parent goes); ``close`` ends it sooner when its listing is not wanted.
"""
from __future__ import annotations

import pickle
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, BinaryIO

from bkdisk.diskio import fault_guard
from bkdisk.diskio.atomic import write_whole

if TYPE_CHECKING:
    from bkdisk.indexfiles.listing import IndexListing

SPOOL_PREFIX = "bkdisk-listing-"


class ListingAhead:
    """The listing of ``dirs`` being made by another process; ``take`` gives it once."""

    def __init__(self, dirs: Sequence[str], stack: ExitStack, spool: BinaryIO, outcome):
        self.dirs, self._stack, self._spool, self._outcome = list(dirs), stack, spool, outcome
        self.taken = False

    @classmethod
    def start(cls, dirs: Sequence[str], spool_dir: str) -> ListingAhead | None:
        """Fork the listing process, its listing to go to a file in ``spool_dir`` (None where the system
        cannot fork or make the file, or BKDISK_NO_FORK is set)."""
        if not fault_guard.forking_allowed():
            return None
        stack = ExitStack()
        wanted = list(dirs)
        try:
            spool = stack.enter_context(tempfile.TemporaryFile(dir=spool_dir, prefix=SPOOL_PREFIX))
            _src, outcome = stack.enter_context(fault_guard.child_stream(lambda _sink: _write_listing(wanted, spool)))
        except OSError:   # no file or no process to spare (a full disk, a ulimit): the walk lists for itself
            stack.close()
            return None
        return cls(wanted, stack, spool, outcome)

    def take(self, dirs: Sequence[str]) -> IndexListing | None:
        """The listing of ``dirs`` once the process has made a whole one (once; None after, or for
        other dirs)."""
        if self.taken or list(dirs) != self.dirs:
            return None
        self.taken = True
        listing = None
        if self._outcome() is None:   # (waits for the process to end)
            try:
                self._spool.seek(0)
                listing = pickle.load(self._spool)
            except Exception:   # noqa: BLE001, S110 - cut short or empty: the process did not finish it
                pass
        self.close()
        from bkdisk.indexfiles.listing import IndexListing
        return listing if isinstance(listing, IndexListing) else None

    def close(self) -> None:
        """End the process (if it still runs) and drop the file."""
        self.taken = True
        self._stack.close()


class _Unbuffered:
    """A file descriptor as pickle's file, each write whole: nothing is left in a buffer when the
    process ends with os._exit."""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data) -> int:
        return write_whole(self.fd, data)


def _write_listing(dirs: list[str], spool: BinaryIO) -> None:
    """In the forked process: list ``dirs`` and pickle the listing into ``spool``. A failure (Ctrl-C
    included) says nothing: the check's walk finds no whole listing and lists for itself."""
    try:
        from bkdisk.indexfiles.listing import list_index_tree
        pickle.dump(list_index_tree(dirs), _Unbuffered(spool.fileno()), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:   # noqa: BLE001, S110 - see above
        pass
