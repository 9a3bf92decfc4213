"""Reading listed ``.idx`` files: small ones back to back into one batch buffer, large ones a window at a time.

Python does the I/O (open, fstat, one readv per file) and the jitted indexfiles.decode.decode_files
decodes a whole batch at once. A file larger than the batch buffer is read in windows of that
buffer, and only its parts that hold data: an ``.idx`` may be sparse (one location in slot 2^31-2
makes a 16 GiB file of which a page is stored), so holes are skipped with SEEK_DATA/SEEK_HOLE and
memory stays bounded by the buffer whatever size a file claims. Every file that cannot be opened or
read is kept as an IoFailure (with its errno) and a DiskError in its row; the walk goes on.
"""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.failures import OPEN, READ, IoFailure, open_regular_file
from bkdisk.diskio.mapped import NOT_REGULAR, OPEN_FLAGS, DiskError
from bkdisk.formats import index as fi
from bkdisk.formats.errors import FormatError
from bkdisk.indexfiles import decode as D
from bkdisk.indexfiles.arrays import LOCATION_DTYPE

DEFAULT_BATCH = 32 << 20   # bytes of files read before a decode; also a large file's window
FIRST_READ = 1 << 20       # read before asking a file's size: most .idx files are a few pages


@dataclass
class IndexReads:
    """What reading and decoding each file gave, one row per path."""

    size: np.ndarray                                   # int64; -1 when the path does not lead to a file
    info: np.ndarray                                   # (files, D.INFO_COLUMNS), columns D.OK .. D.TRAILING
    locations: np.ndarray                              # LOCATION_DTYPE, ``file`` = the row
    headers: list[fi.IndexHeader | None]
    errors: list[FormatError | DiskError | None]
    failures: list[IoFailure] = field(default_factory=list)


def data_ranges(fd: int, start: int, end: int):
    """Slot-aligned (begin, end) ranges of ``[start, end)`` that may hold data; holes are skipped.

    Where SEEK_DATA is not supported the whole range is one range (read, but still a window at a time).
    """
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        yield start, end
        return
    slot, base = fi.SLOT_SIZE, fi.HEADER_SIZE
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, seek_data)
        except OSError as e:
            if e.errno != errno.ENXIO:   # ENXIO: nothing but holes after pos
                yield pos, end
            return
        if data >= end:
            return
        hole = os.lseek(fd, data, seek_hole)
        lo = max(pos, base + (data - base) // slot * slot)
        hi = min(end, base + -(-(hole - base) // slot) * slot)
        yield lo, hi
        pos = hi


class _Reader:
    """Accumulates the rows of read_index_files."""

    def __init__(self, paths: Sequence[str], batch_bytes: int, sink=None):
        self.paths = paths
        self.sink = sink   # a diskio.spill.ChunkedArray the locations go to, instead of ``parts``
        n = len(paths)
        self.size = np.full(n, -1, np.int64)
        self.info = np.zeros((n, D.INFO_COLUMNS), np.int64)
        self.info[:, D.LAST_ENTRY] = -1
        self.parts: list[np.ndarray] = []
        self.headers: list[fi.IndexHeader | None] = [None] * n
        self.errors: list[FormatError | DiskError | None] = [None] * n
        self.failures: list[IoFailure] = []
        self.buf = np.empty(_aligned(max(batch_bytes, fi.HEADER_SIZE)), np.uint8)
        self.words = self.buf.view(np.uint64)
        self.known_headers: dict[bytes, fi.IndexHeader] = {}   # many ledgers share one header (same password)

    def failed(self, r: int, failure: IoFailure) -> None:
        self.failures.append(failure)
        self.errors[r] = failure.as_disk_error()
        try:
            self.size[r] = os.stat(self.paths[r]).st_size
        except OSError:
            self.size[r] = -1

    def decode_batch(self, rows: np.ndarray, at: np.ndarray, lens: np.ndarray) -> None:
        """Decode files already in the buffer at ``at`` (file ``rows[i]`` has ``lens[i]`` bytes)."""
        if len(rows) == 0:
            return
        info = np.zeros((len(rows), D.INFO_COLUMNS), np.int64)
        files, entries, locs = D.decode_files(self.buf, self.words, at, lens, info)
        self.size[rows] = lens
        self.info[rows] = info
        if len(files):
            self._add(_location_rows(rows[files], entries, locs))
        self._headers(rows, at, lens, info)

    def _add(self, part: np.ndarray) -> None:
        (self.parts if self.sink is None else self.sink).append(part)

    def _headers(self, rows: np.ndarray, at: np.ndarray, lens: np.ndarray, info: np.ndarray) -> None:
        mv = self.buf.data
        ok = info[:, D.OK] != 0
        cols = [c.tolist() for c in (rows[ok], at[ok], info[ok, D.VERSION], info[ok, D.KEY_LENGTH],
                                     info[ok, D.STATE], info[ok, D.LAC_LENGTH])]
        key_at, fixed, known, headers = fi.KEY_OFFSET, fi.HEADER_FIXED_SIZE, self.known_headers, self.headers
        lac_at = fixed[fi.HEADER_V1]
        for r, o, version, key, state, lac in zip(*cols):
            whole = mv[o:o + fixed[version] + key + lac].tobytes()   # every field of the header
            h = known.get(whole)
            if h is None:
                h = known[whole] = fi.IndexHeader(
                    version, whole[key_at:key_at + key], state,
                    whole[lac_at + key:lac_at + key + lac] if version >= fi.HEADER_V1 and lac else None)
            headers[r] = h
        for r, o, n in zip(rows[~ok].tolist(), at[~ok].tolist(), lens[~ok].tolist()):
            try:   # the twin names what is wrong
                fi.parse_header(mv[o:o + min(n, fi.HEADER_SIZE)].tobytes(), path=self.paths[r])
            except FormatError as e:
                self.errors[r] = e
            else:
                raise AssertionError(f"{self.paths[r]}: jitted and reference index header checks disagree")

    def decode_large(self, r: int, fd: int, size: int) -> None:
        """A file larger than the buffer: its header, then its data ranges a buffer at a time."""
        head = os.pread(fd, fi.HEADER_SIZE, 0)
        self.buf[:len(head)] = np.frombuffer(head, np.uint8)
        one = np.array([r], np.int64)
        self.decode_batch(one, np.zeros(1, np.int64), np.array([len(head)], np.int64))
        self.size[r] = size
        if not self.info[r, D.OK]:
            return
        slot, base = fi.SLOT_SIZE, fi.HEADER_SIZE
        end = base + (size - base) // slot * slot
        window = len(self.buf) // slot * slot
        view = self.buf.data
        present, last, found = 0, -1, []
        try:
            for begin, stop in data_ranges(fd, base, end):
                for at in range(begin, stop, window):
                    got = os.preadv(fd, [view[:min(window, stop - at)]], at)
                    got -= got % slot
                    nz = np.flatnonzero(self.buf[:got].view(np.uint64))   # endianness does not change zero
                    if len(nz):
                        vals = self.buf[:got].view(fi.SLOT_DTYPE)[nz].astype(np.uint64)
                        found.append(_location_rows(np.full(len(nz), r), (at - base) // slot + nz, vals))
                        present += len(nz)
                        last = (at - base) // slot + int(nz[-1])
        except OSError:   # the row becomes a failure, without locations
            self.info[r] = 0
            self.info[r, D.LAST_ENTRY] = -1
            self.headers[r] = None
            raise
        for part in found:
            self._add(part)
        self.info[r, D.PRESENT], self.info[r, D.LAST_ENTRY], self.info[r, D.TRAILING] = \
            present, last, (size - base) % slot

    def result(self) -> IndexReads:
        # In row order: a large file is decoded after the batch before it was flushed.
        if self.sink is not None:   # spilled: the sink itself; else the one array, as without it
            locs = self.sink if self.sink.spilled else self.sink.array()
        else:
            locs = np.concatenate(self.parts) if self.parts else np.zeros(0, LOCATION_DTYPE)
        return IndexReads(self.size, self.info, locs, self.headers, self.errors, self.failures)


def _aligned(n: int) -> int:
    return -(-n // fi.SLOT_SIZE) * fi.SLOT_SIZE


def _location_rows(files: np.ndarray, entries: np.ndarray, locations: np.ndarray) -> np.ndarray:
    out = np.empty(len(files), LOCATION_DTYPE)
    out["file"] = files
    out["entry"] = entries
    out["log"] = fi.location_logs(locations)
    out["pos"] = fi.location_positions(locations)
    return out


def read_index_files(paths: Sequence[str], batch_bytes: int = DEFAULT_BATCH,
                     regular: np.ndarray | None = None, sink=None) -> IndexReads:
    """Header, counts and every present location of each file; failures as data, never raised.

    ``sink``: a diskio.spill.ChunkedArray of LOCATION_DTYPE that takes the locations batch by batch
    (it spills past its budget); ``locations`` is then the sink when it spilled, else its array.

    ``regular[i]``: the listing saw a regular file (not a link), so its type needs no fstat: it is read
    at once, and checked and sized only when it fills FIRST_READ. Other paths are checked first.
    """
    rd = _Reader(paths, batch_bytes, sink)
    view, cap = rd.buf.data, len(rd.buf)
    rows: list[int] = []
    at: list[int] = []
    lens: list[int] = []
    used = 0

    def flush() -> None:
        nonlocal rows, at, lens, used
        rd.decode_batch(np.array(rows, np.int64), np.array(at, np.int64), np.array(lens, np.int64))
        rows, at, lens, used = [], [], [], 0

    for r, path in enumerate(paths):
        if regular is not None and regular[r]:
            try:
                fd = os.open(path, OPEN_FLAGS)
            except OSError as e:
                rd.failed(r, IoFailure.from_oserror(path, OPEN, e))
                continue
            size = -1   # not known yet
        else:
            opened = open_regular_file(path)
            if isinstance(opened, IoFailure):
                rd.failed(r, opened)
                continue
            fd, size = opened
        try:
            got = 0
            if size < 0:   # the type is known from the listing, the size not yet: read, and ask if it filled
                want = min(cap - used, FIRST_READ)
                got = os.readv(fd, [view[used:used + want]]) if want else 0
                if got == want:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        rd.failed(r, IoFailure(path, OPEN, None, NOT_REGULAR))
                        continue
                    size = st.st_size
                else:
                    size = got
            if size > cap:
                flush()
                rd.decode_large(r, fd, size)   # the buffer becomes its window
                continue
            if used + size > cap:
                flush()
                got = 0   # read it again at the start of the emptied buffer
            if got < size:
                got += os.preadv(fd, [view[used + got:used + size]], got)
        except OSError as e:
            rd.failed(r, IoFailure.from_oserror(path, READ, e))
            continue
        finally:
            os.close(fd)
        rows.append(r)
        at.append(used)
        lens.append(got)
        used = _aligned(used + got)   # each file starts on a word: its slots are whole words
    flush()
    return rd.result()


def decode_index_bytes(path: str, data: bytes | bytearray | memoryview) -> IndexReads:
    """The same row as read_index_files gives for a file holding ``data``."""
    rd = _Reader([path], len(data))
    rd.buf[:len(data)] = np.frombuffer(data, np.uint8)
    rd.decode_batch(np.zeros(1, np.int64), np.zeros(1, np.int64), np.array([len(data)], np.int64))
    return rd.result()
