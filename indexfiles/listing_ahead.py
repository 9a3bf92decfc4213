"""The listing of an index hierarchy made by a process of its own, streamed to the check as it goes.

Listing ``.idx`` hierarchies is system calls and a little Python: a folder per 256 ledgers (a folder
per ledger when ids spread over the 64-bit range) and a file per ledger. A process forked before the
check loads numba and its kernels (``start``) lists the dirs with numpy only and streams what it lists
a block of files at a time (indexfiles.listing.stream_index_tree); the check's walk reads each block's
files as it comes (``take``; indexfiles.scan.walk_index_dirs), while the process lists the next, so
listing and reading overlap, on two cores, instead of the reading waiting for the whole listing. The
walk gives the same inventory as listing and reading together.

Each block is pickled into an unlinked temporary file of the spill folder's parent (``--tmp-dir``) at
the next offset, and its place (offset, length: 16 bytes) is then written to a pipe. The pipe wakes
the reader and holds the places of some 4,000 blocks (four million files) before the process waits
for the check to read them, and the process keeps nothing it has sent: on a bookie of millions of
ledgers the listing is a few hundred MiB, held by the check alone. The last part is the rest of the
listing (strays, failures, symlinks).

A stream that ends before that part (the process failed, was killed, or wrote part of a block) is cut:
the walk lists the dirs itself, keeps the files it read (when the hierarchy still begins with them)
and reads the rest, and meets whatever stopped the other process in its own listing. The process ends
with the check's (diskio.fault_guard.child_stream asks the kernel to end it when its parent goes);
``close`` ends it sooner when its listing is not wanted.
"""
from __future__ import annotations

import os
import pickle
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, BinaryIO

from bkdisk.diskio import fault_guard
from bkdisk.diskio.atomic import write_whole

if TYPE_CHECKING:
    from bkdisk.indexfiles.listing import IndexListing, ListedBlock

SPOOL_PREFIX = "bkdisk-listing-"
STREAM_BLOCK = 1024   # files a block: about 10 ms of the walk's reading
PLACE_BYTES = 16      # a part's place in the spool: (offset, length), two native uint64 (one machine's processes)


class ListingAhead:
    """The listing of ``dirs`` being made by another process; ``take`` gives its stream once."""

    def __init__(self, dirs: Sequence[str], stack: ExitStack, spool: BinaryIO, places: BinaryIO):
        self.dirs, self._stack, self._spool, self._places = list(dirs), stack, spool, places
        self.taken = False

    @classmethod
    def start(cls, dirs: Sequence[str], spool_dir: str) -> ListingAhead | None:
        """Fork the listing process, its parts to go to a file in ``spool_dir`` (None where the system
        cannot fork or make the file, or BKDISK_NO_FORK is set)."""
        if not fault_guard.forking_allowed():
            return None
        stack = ExitStack()
        wanted = list(dirs)
        try:
            spool = stack.enter_context(tempfile.TemporaryFile(dir=spool_dir, prefix=SPOOL_PREFIX))
            places, _outcome = stack.enter_context(
                fault_guard.child_stream(lambda sink: _stream_listing(wanted, spool, sink)))
        except OSError:   # no file or no process to spare (a full disk, a ulimit): the walk lists for itself
            stack.close()
            return None
        return cls(wanted, stack, spool, places)

    def take(self, dirs: Sequence[str]) -> Iterator[ListedBlock | IndexListing] | None:
        """The parts of the listing of ``dirs`` as the process sends them (once; None after, or for other
        dirs): ListedBlocks, then the rest of the listing, unless the stream is cut (indexfiles.listing.
        read_streamed). The process is ended when the stream is, or left."""
        if self.taken or list(dirs) != self.dirs:
            return None
        self.taken = True
        return self._parts()

    def _parts(self) -> Iterator[ListedBlock | IndexListing]:
        try:
            fd = self._spool.fileno()
            while True:
                place = self._places.read(PLACE_BYTES)
                if len(place) < PLACE_BYTES:   # the process ended (without its last part, or it was seen)
                    return
                at, length = unplaced(place)
                blob = os.pread(fd, length, at)
                try:
                    part = pickle.loads(blob)
                except Exception:   # noqa: BLE001 - cut short: the stream ends here
                    return
                yield part
        finally:
            self.close()

    def close(self) -> None:
        """End the process (if it still runs) and drop the file."""
        self.taken = True
        self._stack.close()


def _stream_listing(dirs: list[str], spool: BinaryIO, sink: BinaryIO) -> None:
    """In the forked process: list ``dirs``, each part pickled into ``spool`` and its place written to
    ``sink``. A failure (Ctrl-C included) says nothing: the stream is cut, and the walk lists for itself."""
    try:
        from bkdisk.indexfiles.listing import stream_index_tree
        fd, places = spool.fileno(), sink.fileno()
        at = 0

        def ship(part) -> None:
            nonlocal at
            blob = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
            write_whole(fd, blob)   # (at the file's end: the check only reads it, at the places given)
            write_whole(places, placed(at, len(blob)))
            at += len(blob)

        ship(stream_index_tree(dirs, ship, STREAM_BLOCK))
    except BaseException:   # noqa: BLE001, S110 - see above
        pass


def placed(at: int, length: int) -> bytes:
    """A part's place, as the pipe carries it."""
    return array("Q", (at, length)).tobytes()   # (no numpy: this module loads before the checker)


def unplaced(place: bytes) -> tuple[int, int]:
    at, length = array("Q", place)
    return at, length
