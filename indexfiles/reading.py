"""Reading listed ``.idx`` files: small ones back to back into a batch, large ones a window at a time.

Python does the I/O (one open and one readv per file; an fstat only when a read fills FIRST_READ or
the listing could not tell the file's type) and the jitted kernels of indexfiles.decode decode a whole
batch at once, writing its locations straight into their rows. A batch fills the buffer's first PACK
bytes (so it is decoded while still in the cache), or the buffer with one file; a file larger than
the buffer is read in windows of it, and only its parts that hold data: an ``.idx`` may be sparse (one
location in slot 2^31-2 makes a 16 GiB file of which a page is stored), so holes are skipped with
SEEK_DATA/SEEK_HOLE and memory stays bounded by the buffer whatever size a file claims. Every file
that cannot be opened or read is kept as an IoFailure (with its errno) and a DiskError in its row;
the walk goes on.
"""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio import read_ahead
from bkdisk.diskio.distinct import distinct
from bkdisk.diskio.failures import OPEN, READ, IoFailure, open_regular_file, without_frames
from bkdisk.diskio.libc_calls import c_strings
from bkdisk.diskio.mapped import NOT_REGULAR, OPEN_FLAGS, DiskError
from bkdisk.formats import index as fi
from bkdisk.formats.errors import FormatError
from bkdisk.indexfiles import decode as D
from bkdisk.indexfiles import small_reads
from bkdisk.indexfiles.arrays import LOCATION_DTYPE
from bkdisk.indexfiles.file_rows import FileRows, location_rows
from bkdisk.indexfiles.row_objects import HeaderColumn, SparseColumn

DEFAULT_BATCH = 32 << 20   # the read buffer: a large file's window (a file up to it is decoded whole)
PACK = 2 << 20             # bytes of small files read back to back before a decode: while they are in the cache
FIRST_READ = 1 << 20       # read before asking a file's size: most .idx files are a few pages
RESERVE_BYTES = 256 << 20  # the location rows' reserve at most (address space: a page is memory once rows reach it)
SLOT = fi.SLOT_SIZE


@dataclass
class IndexReads:
    """What reading and decoding each file gave, one row per path."""

    files: np.ndarray                                  # INDEX_FILE_DTYPE; the read columns filled (size .. trailing)
    locations: np.ndarray                              # LOCATION_DTYPE, ``file`` = the row (or a ChunkedArray)
    headers: HeaderColumn[fi.IndexHeader]              # a Sequence: row i's header or None
    errors: SparseColumn[FormatError | DiskError]      # a Sequence: row i's error or None
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


class Reader:
    """Reads files one by one (``read``) into a batch buffer and decodes each batch at once; the file's
    row of ``rows`` gets its read columns, its locations go to one growing array (or, past the sink's
    budget, to the sink). Files are read in row order, so the locations come in (row, entry) order."""

    def __init__(self, rows: FileRows, batch_bytes: int = DEFAULT_BATCH, sink=None):
        self.rows = rows
        self.sink = sink   # a diskio.spill.ChunkedArray the locations go to when they pass its budget
        self.headers: HeaderColumn[fi.IndexHeader] = HeaderColumn()
        self.errors: SparseColumn[FormatError | DiskError] = SparseColumn()
        self.failures: list[IoFailure] = []
        self.buf = np.empty(_aligned(max(batch_bytes, fi.HEADER_SIZE)), np.uint8)
        self.words = self.buf.view(np.uint64)
        self.view, self.cap = self.buf.data, len(self.buf)
        self.pack = min(self.cap, PACK)   # (the buffer's pages past it are touched by large files only)
        # Rows held at most: the sink's budget, then one batch's (a location a slot) before they go to
        # it; reserved up to RESERVE_BYTES of address space (a larger budget grows past it as needed).
        held = 0 if sink is None else sink.budget // LOCATION_DTYPE.itemsize + self.cap // SLOT + 1
        self.locs = location_rows(min(held, RESERVE_BYTES // LOCATION_DTYPE.itemsize))
        self.known_headers: dict[bytes, int] = {}   # a header's bytes -> its id: the ledgers of a password share one
        self.batch: tuple[list[int], list[int], list[int], list[str]] = ([], [], [], [])
        self.used = 0

    def discard(self) -> None:
        """Drop what was read (the location rows, the buffer; the sink emptied): its files are read again
        by another reader, which then holds no second copy beside these."""
        self.locs = location_rows(0)
        self.buf = np.empty(0, np.uint8)
        self.words, self.view, self.cap = self.buf.view(np.uint64), self.buf.data, 0
        if self.sink is not None:
            self.sink.clear()

    def read(self, r: int, path: str, regular: bool) -> None:
        """Read the file of row ``r`` (rows are read in order); ``regular``: the listing saw a regular
        file (not a link), so its type needs no fstat: it is read at once, and checked and sized only
        when it fills FIRST_READ. Other paths are checked first."""
        self.headers.add()
        self.errors.add()
        if regular:
            try:
                fd = os.open(path, OPEN_FLAGS)
            except OSError as e:
                self.failed(r, path, IoFailure.from_oserror(path, OPEN, e))
                return
            size = -1   # not known yet
        else:
            opened = open_regular_file(path)
            if isinstance(opened, IoFailure):
                self.failed(r, path, opened)
                return
            fd, size = opened
        view, cap, used, pack = self.view, self.cap, self.used, self.pack
        try:
            got = 0
            if size < 0:   # the type is known from the listing, the size not yet: read, and ask if it filled
                want = pack - used if pack - used < FIRST_READ else FIRST_READ
                got = os.readv(fd, [view[used:used + want]]) if want else 0
                if got == want:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        self.failed(r, path, IoFailure(path, OPEN, None, NOT_REGULAR))
                        return
                    size = st.st_size
                else:
                    size = got
            if size > cap:
                self.flush()
                self.decode_large(r, path, fd, size)   # the buffer becomes its window
                return
            if used and used + size > pack:
                self.flush()
                got, used = 0, 0   # read it again at the start of the emptied buffer
            if got < size:
                got += os.preadv(fd, [view[used + got:used + size]], got)
        except OSError as e:
            self.failed(r, path, IoFailure.from_oserror(path, READ, e))
            return
        finally:
            os.close(fd)
        rows, at, lens, paths = self.batch
        rows.append(r)
        at.append(used)
        lens.append(got)
        paths.append(path)
        self.used = -(-(used + got) // SLOT) * SLOT   # each file starts on a word: its slots are whole words
        if self.used >= pack:
            self.flush()

    def read_block(self, r0: int, paths: list[str], regular: np.ndarray) -> None:
        """Rows ``r0`` on, a block of listed ``paths`` (``regular``: as the listing saw each), read in order:
        runs of small regular files by the jitted loop of indexfiles.small_reads straight into the batch,
        each file it leaves by ``read``. Where the buffer has no room past its pack for one more file the
        loop is not used."""
        end, k = len(paths), 0
        self._ask_ahead(paths, regular)
        jitted = self.cap >= self.pack + small_reads.HEAD_BYTES
        names, starts, _ends = c_strings(paths) if jitted else (None, None, None)
        at, lens = np.empty(end, np.int64), np.empty(end, np.int64)
        while k < end:
            if jitted:
                j, pos, full = small_reads.read_small_files(names, starts, regular, k, end, OPEN_FLAGS, self.buf,
                                                            self.used, self.pack, at, lens)
                if j > k:
                    self._taken(r0, paths, k, int(j), at, lens, int(pos))
                k = int(j)
                if full:
                    self.flush()
                    continue
                if k == end:
                    break
            self.read(r0 + k, paths[k], bool(regular[k]))
            k += 1

    @staticmethod
    def _ask_ahead(paths: list[str], regular: np.ndarray) -> None:
        """A block whose first file is not in the page cache (a cold disk): every regular file of it asked
        for at once, so that its reads find their pages read, or on their way, instead of waiting for the
        device one file at a time."""
        first = int(np.argmax(regular)) if len(regular) else 0
        if len(paths) > 1 and regular[first] and not read_ahead.cached(paths[first]):
            read_ahead.ask_for_files(p for p, reg in zip(paths, regular.tolist(), strict=True) if reg)

    def _taken(self, r0: int, paths: list[str], k: int, j: int, at: np.ndarray, lens: np.ndarray, pos: int) -> None:
        """Files ``k`` .. ``j`` of a block, which the jitted loop put in the buffer, into the batch."""
        rows, b_at, b_lens, b_paths = self.batch
        rows.extend(range(r0 + k, r0 + j))
        b_at.extend(at[:j - k].tolist())
        b_lens.extend(lens[:j - k].tolist())
        b_paths.extend(paths[k:j])
        self.headers.add(j - k)
        self.errors.add(j - k)
        self.used = pos

    def flush(self) -> None:
        rows, at, lens, paths = self.batch
        if rows:
            self.decode_batch(np.array(rows, np.int64), np.array(at, np.int64), np.array(lens, np.int64), paths)
        self.batch, self.used = ([], [], [], []), 0

    def failed(self, r: int, path: str, failure: IoFailure) -> None:
        self.failures.append(failure)
        self.errors[r] = failure.as_disk_error()
        try:
            self.rows.array["size"][r] = os.stat(path).st_size
        except OSError:
            self.rows.array["size"][r] = -1

    def decode_batch(self, rows: np.ndarray, at: np.ndarray, lens: np.ndarray, paths: list[str]) -> None:
        """Decode files already in the buffer at ``at`` (file ``rows[i]`` has ``lens[i]`` bytes)."""
        info = np.zeros((len(rows), D.INFO_COLUMNS), np.int64)
        total = D.decode_files(self.buf, self.words, at, lens, info)
        ok = info[:, D.OK] != 0
        table = self.rows.array
        for name, column, bad in _READ_COLUMNS:
            table[name][rows] = np.where(ok, info[:, column], bad)
        table["size"][rows] = lens
        table["header_ok"][rows] = ok
        if total:
            out = self._take(total)
            D.write_locations(self.buf, self.words, at, rows, info, out["file"], out["entry"], out["log"], out["pos"])
        self._headers(rows, at, lens, info, ok, paths)

    def _take(self, k: int) -> np.ndarray:
        """Room for ``k`` location rows. The rows held go to the sink's file first once they pass its
        budget (it spills), so a sink that took rows has spilled."""
        locs = self.locs
        if self.sink is not None and locs.n * locs.dtype.itemsize > self.sink.budget:
            self.sink.write(locs.array[:locs.n])   # (written, not held: the rows are filled again)
            locs.n = 0
        return locs.take(k)

    def _headers(self, rows: np.ndarray, at: np.ndarray, lens: np.ndarray, info: np.ndarray, ok: np.ndarray,
                 paths: list[str]) -> None:
        """Each valid header as the id of its distinct bytes (told apart a length at a time); the
        reference parser names what is wrong with each invalid one."""
        mv = self.buf.data
        good = np.flatnonzero(ok)
        fixed = np.array([fi.HEADER_FIXED_SIZE[v] if v in fi.HEADER_FIXED_SIZE else 0 for v in range(2)], np.int64)
        length = fixed[info[good, D.VERSION]] + info[good, D.KEY_LENGTH] + info[good, D.LAC_LENGTH]
        for width in distinct(length).tolist():
            sel = good[length == width]
            whole = self.buf[at[sel, None] + np.arange(width)]   # every field of each header
            found, inverse = np.unique(np.ascontiguousarray(whole).view(f"V{width}"), return_inverse=True)
            ids = np.array([self._header_id(bytes(d)) for d in found.tolist()], np.int32)
            self.headers.set(rows[sel], ids[inverse.reshape(-1)])
        for i in np.flatnonzero(~ok).tolist():
            r, o, n, path = int(rows[i]), int(at[i]), int(lens[i]), paths[i]
            try:   # the twin names what is wrong
                fi.parse_header(mv[o:o + min(n, fi.HEADER_SIZE)].tobytes(), path=path)
            except FormatError as e:
                self.errors[r] = without_frames(e)   # (its frames would keep this reader)
            else:
                raise AssertionError(f"{path}: jitted and reference index header checks disagree")

    def _header_id(self, whole: bytes) -> int:
        """The id of the header whose fields are ``whole`` (its valid bytes, as check_header read them)."""
        h = self.known_headers.get(whole)
        if h is None:   # (the rest of the header block is not read: zeros stand for it)
            h = self.known_headers[whole] = len(self.headers.distinct)
            self.headers.distinct.append(fi.parse_header(whole + bytes(fi.HEADER_SIZE - len(whole))))
        return h

    def decode_large(self, r: int, path: str, fd: int, size: int) -> None:
        """A file larger than the buffer: its header, then its data ranges a buffer at a time."""
        head = os.pread(fd, fi.HEADER_SIZE, 0)
        self.buf[:len(head)] = np.frombuffer(head, np.uint8)
        self.decode_batch(np.array([r], np.int64), np.zeros(1, np.int64), np.array([len(head)], np.int64), [path])
        table = self.rows.array
        table["size"][r] = size
        if not table["header_ok"][r]:
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
                        found.append(((at - base) // slot + nz, vals))
                        present += len(nz)
                        last = (at - base) // slot + int(nz[-1])
        except OSError:   # the row becomes a failure, without locations
            table["header_ok"][r] = False
            for name, _column, bad in _READ_COLUMNS:
                table[name][r] = bad
            self.headers.set(r, -1)
            raise
        for entries, vals in found:
            out = self._take(len(entries))
            out["file"], out["entry"] = r, entries
            out["log"], out["pos"] = fi.location_logs(vals), fi.location_positions(vals)
        table["present"][r], table["last_entry"][r], table["trailing"][r] = present, last, (size - base) % slot

    def result(self, files: np.ndarray) -> IndexReads:
        """What was read (``files``: the finished rows), after the last ``flush``."""
        locs = self.locs.finish()
        if self.sink is not None and self.sink.spilled:   # spilled: the sink itself, the rest appended
            self.sink.append(locs)
            locs = self.sink
        return IndexReads(files, locs, self.headers.finish(), self.errors, self.failures)


# (column, info column, value without a valid header) of the rows a batch fills
_READ_COLUMNS = (("version", D.VERSION, -1), ("state_bits", D.STATE, 0), ("present", D.PRESENT, 0),
                 ("last_entry", D.LAST_ENTRY, -1), ("trailing", D.TRAILING, 0))


def _aligned(n: int) -> int:
    return -(-n // fi.SLOT_SIZE) * fi.SLOT_SIZE


def read_index_files(paths: Sequence[str], batch_bytes: int = DEFAULT_BATCH, sink=None) -> IndexReads:
    """Header, counts and every present location of each file; failures as data, never raised.

    ``sink``: a diskio.spill.ChunkedArray of LOCATION_DTYPE that takes the locations when they pass its
    budget (it spills); ``locations`` is then the sink when it spilled, else one array.
    """
    table = FileRows(len(paths))
    rd = Reader(table, batch_bytes, sink)
    for r, path in enumerate(paths):
        rd.read(r, path, False)
    rd.flush()
    return rd.result(table.finish())


def decode_index_bytes(path: str, data: bytes | bytearray | memoryview) -> IndexReads:
    """The same row as read_index_files gives for a file holding ``data``."""
    table = FileRows(1)
    rd = Reader(table, len(data))
    rd.headers.add()
    rd.errors.add()
    rd.buf[:len(data)] = np.frombuffer(data, np.uint8)
    rd.decode_batch(np.zeros(1, np.int64), np.zeros(1, np.int64), np.array([len(data)], np.int64), [path])
    return rd.result(table.finish())
