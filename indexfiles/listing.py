"""The one directory walk of ``.idx`` hierarchies: every index file, stray file and unlistable folder.

Below ``<dir>/current`` BookKeeper keeps index files two levels deep (scope-0 ledgers) and bp-35
scoped ledgers four levels deep (formats/paths.py, specs/paths.md). The walk lists every folder
once with os.scandir (file types come from the directory entries, no stat per file), in the order of
the paths as strings (so the rows need no sort, and a reader can read each file as it is met), does not
descend into the RocksDB folders of DbLedgerStorage, follows symbolic links to folders (once each), and keeps
every folder it cannot list as an IoFailure instead of stopping.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from bkdisk.diskio.failures import LIST, IoFailure
from bkdisk.formats.paths import CURRENT_DIR, parse_index_names
from bkdisk.indexfiles import path_column
from bkdisk.indexfiles.file_rows import FileRows, blank_rows
from bkdisk.indexfiles.path_column import PathColumn

if TYPE_CHECKING:
    from bkdisk.indexfiles.reading import Reader

INDEX_SUFFIX = ".idx"
RELOCATION_SUFFIX = ".idx.rloc"   # IndexPersistenceMgr's relocation temp name
ROCKSDB_DIRS = ("ledgers", "locations")
STRAY_RELOCATION = "leftover of an index relocation"
STRAY_OTHER = "not an index file"
READ_BLOCK = 4096   # listed files whose paths are made at once for the reader's jitted loop


@dataclass
class IndexListing:
    """Every ``.idx`` below the walked dirs, ordered by (dir, relative path), with what its name says."""

    dirs: list[str]
    paths: PathColumn = field(default_factory=PathColumn.empty)
    relpaths: PathColumn = field(default_factory=PathColumn.empty)     # below <dir>/current
    # One INDEX_FILE_DTYPE row per file: the listing fills dir, scope, ledger, named (the name parses as
    # an index name) and depth (path components below current/); a reading walk the rest.
    files: np.ndarray = field(default_factory=lambda: blank_rows(0))
    # The directory entry says regular file (not a link, FIFO or device): no fstat needed before reading.
    regular: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))
    strays: list[tuple[str, str]] = field(default_factory=list)        # (path, why), by path
    failures: list[IoFailure] = field(default_factory=list)            # folders that could not be listed
    # Symbolic links met (to files or folders), not counting those inside a followed symlinked folder:
    # fsck's pass 1 names them from this listing instead of walking the hierarchy again.
    symlinks: list[tuple[int, str]] = field(default_factory=list)     # (dir index, path)

    @property
    def dir_index(self) -> np.ndarray:
        return self.files["dir"]

    @property
    def scope(self) -> np.ndarray:
        return self.files["scope"]

    @property
    def ledger(self) -> np.ndarray:
        return self.files["ledger"]

    @property
    def named(self) -> np.ndarray:
        return self.files["named"]

    @property
    def depth(self) -> np.ndarray:
        return self.files["depth"]


class _Found:
    """The ``.idx`` files a walk meets, in the order met: a row each, and each path below its walked
    folder kept as bytes (no Python object kept per file); the names parsed a block at a time."""

    def __init__(self, rows: FileRows, reader: Reader | None, ship: Callable[[ListedBlock], None] | None = None,
                 block: int = path_column.BLOCK):
        self.rows, self.reader = rows, reader
        self.ship, self.block = ship, block   # ship: each block of rows is given away as drained, not kept
        self.pending: list[str] = []   # relpaths of the rows from ``first`` on
        self.first = rows.n
        self.data: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []
        self.regular = bytearray()
        self.to_read: list[str] = []   # paths listed and not read yet (with a reader), rows from ``read_from`` on
        self.read_from = 0
        self.dir, self.skip = 0, 0

    def start(self, dir_index: int, cur: str) -> None:
        self.drain()
        self.dir, self.skip = dir_index, len(cur) + 1

    def add(self, path: str, regular: bool) -> None:
        self.add_files([(path, path, regular)])

    def add_files(self, files: list[tuple[str, str, bool]]) -> None:
        """A row for each (name, path, regular) of a folder's, in order, each read if there is a reader."""
        rows, pending, kinds, skip = self.rows, self.pending, self.regular, self.skip
        r = rows.add(len(files))
        if self.reader is not None:
            if not self.to_read:
                self.read_from = r
            self.to_read += [path for _name, path, _regular in files]
        for _name, path, regular in files:
            pending.append(path[skip:])
            kinds.append(regular)
        if self.reader is not None and len(self.to_read) >= READ_BLOCK:
            self.read_listed()
        if len(pending) >= self.block:
            self.drain()

    def read_listed(self) -> None:
        """The files listed and not read yet, read as one block (reading.Reader.read_block): on a cold
        disk the reader asks for a block's files at once, not one by one as the folders list them."""
        k = len(self.to_read)
        if k and self.reader is not None:
            regular = np.frombuffer(bytes(self.regular[len(self.regular) - k:]), np.bool_)   # (the last k added)
            for lo in range(0, k, READ_BLOCK):   # (a folder of more files than a block: a block at a time)
                hi = lo + READ_BLOCK
                self.reader.read_block(self.read_from + lo, self.to_read[lo:hi], regular[lo:hi])
            self.to_read = []

    def drain(self) -> None:
        rels = self.pending
        if not rels:
            return
        lo, hi = self.first, self.first + len(rels)
        text = "".join(rels)
        encoded = [os.fsencode(x) for x in rels] if not text.isascii() else None   # (ASCII: a byte a character)
        self.data.append(np.frombuffer(text.encode("ascii") if encoded is None else b"".join(encoded), np.uint8))
        self.lengths.append(np.fromiter(map(len, rels if encoded is None else encoded), np.int64, len(rels)))
        sep = os.sep
        scope, ledger, named = parse_index_names([x[x.rfind(sep) + 1:] for x in rels])
        table = self.rows.array
        table["dir"][lo:hi] = self.dir
        table["scope"][lo:hi], table["ledger"][lo:hi], table["named"][lo:hi] = scope, ledger, named
        self.pending, self.first = [], hi
        if self.ship is not None:
            rows = table[lo:hi]
            self.ship(ListedBlock(self.dir, self.data.pop(), self.lengths.pop(), rows["scope"].copy(),
                                  rows["ledger"].copy(), rows["named"].copy(),
                                  np.frombuffer(bytes(self.regular[lo:hi]), np.bool_)))
            self.rows.n, self.first = 0, 0
            del self.regular[:]

    def column(self) -> PathColumn:
        self.drain()
        if not self.data:
            return PathColumn.empty()
        return PathColumn(np.concatenate(self.data), np.cumsum(np.concatenate(self.lengths)))


def _leads_to_folder(link: os.DirEntry) -> bool:
    """Whether a symbolic link leads to a folder. One that leads nowhere (dangling, a loop, a folder on
    the way that cannot be searched) does not: it stays a file its name says it is, whose read fails."""
    try:
        return link.is_dir()
    except OSError:   # ELOOP, EACCES: not "vanished", which would leave the file out of every count
        return False


# What a walk item is: a folder to list, an index file (regular or not), a symlink to a folder (listed
# unless the folder it leads to was listed already: the first path to a folder in the strings' order lists it).
FOLDER, REGULAR, OTHER, LINKED = 0, 1, 2, 3


def _walk_one(cur: str, found: _Found, strays: list[tuple[str, str]], failures: list[IoFailure],
              links: list[str]) -> None:
    """Give ``found`` every ``.idx`` below ``cur`` in the order of the paths as strings; keep strays,
    failures, and the symlinks met outside followed symlinked folders.

    Depth first, each folder's entries by name, a folder's as ``name/`` (what every path below it
    begins with), which is the strings' order: a file ``a-b`` comes before the folder ``a``'s paths.
    A folder without subfolders (where the index files of a bookie are) gives its files at once."""
    stack = [(cur, 0, False, FOLDER)]
    top = os.path.realpath(cur)
    inside = top.rstrip(os.sep) + os.sep
    seen = {top}   # real paths of folders reached through symlinks: a loop is cut
    while stack:
        folder, depth, via_link, kind = stack.pop()
        if kind == LINKED:
            real = os.path.realpath(folder)
            if real in seen:
                continue
            seen.add(real)
        elif kind != FOLDER:
            found.add(folder, kind == REGULAR)
            continue
        try:   # a listing that fails half way is a failure too, not a partial listing
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as e:
            failures.append(IoFailure.from_oserror(folder, LIST, e))
            continue
        files = []     # (name, path, regular) of the index files
        folders = []   # (name + "/", path, depth, via link, FOLDER or LINKED) of the folders to list
        for entry in entries:
            name = entry.name
            try:
                if entry.is_file(follow_symlinks=False):   # a regular file: the one question it needs
                    if name.endswith(INDEX_SUFFIX):
                        files.append((name, entry.path, True))
                    elif depth:
                        strays.append((entry.path, STRAY_RELOCATION if name.endswith(RELOCATION_SUFFIX)
                                       else STRAY_OTHER))
                    continue
                # A symlinked folder is followed (the check reads through it; fsck.confinement keeps
                # repairs from writing through one that leads outside the bookie's dirs).
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir and entry.is_symlink():
                    if not via_link:
                        links.append(entry.path)
                    # (in current/ itself a link named as a RocksDB folder is not walked, as a folder is not)
                    if (depth or name not in ROCKSDB_DIRS) and _leads_to_folder(entry):
                        real = os.path.realpath(entry.path)
                        # A link to a folder of this same tree (``up -> ..``) is an alias of what the
                        # walk lists anyway: followed, it would list those index files twice.
                        if real in seen or real.startswith(inside):
                            continue
                        folders.append((name + "/", entry.path, depth + 1, True, LINKED))
                        continue
            except OSError:   # no type in the entry and the lstat failed: it vanished
                continue
            if is_dir:
                if name.endswith(INDEX_SUFFIX):   # named like an index file: listed (its read is refused) and walked
                    files.append((name, entry.path, False))
                if depth or name not in ROCKSDB_DIRS:
                    folders.append((name + "/", entry.path, depth + 1, via_link, FOLDER))
            elif name.endswith(INDEX_SUFFIX):   # a link, FIFO, device or socket: checked before it is read
                files.append((name, entry.path, False))
            elif depth:
                strays.append((entry.path, STRAY_RELOCATION if name.endswith(RELOCATION_SUFFIX) else STRAY_OTHER))
        if len(files) > 1:
            files.sort()   # (names differ within a folder)
        if not folders:   # files only: met now, in order
            found.add_files(files)
            continue
        items = [(name, path, depth, via_link, REGULAR if regular else OTHER) for name, path, regular in files]
        items += folders
        items.sort()   # (the keys differ: a folder's ends in "/", which no name holds)
        stack.extend([item[1:] for item in reversed(items)])


def _walk_dirs(out: IndexListing, found: _Found) -> None:
    for di, d in enumerate(out.dirs):
        cur = os.path.join(d, CURRENT_DIR)
        found.start(di, cur)
        links: list[str] = []
        _walk_one(cur, found, out.strays, out.failures, links)
        out.symlinks.extend((di, p) for p in links)
    out.strays.sort()
    out.failures.sort(key=lambda f: f.path)


def _prefixes(dirs: Sequence[str]) -> list[str]:
    return [os.path.join(d, CURRENT_DIR) + os.sep for d in dirs]


def _finish(out: IndexListing, relpaths: PathColumn, files: np.ndarray, regular: np.ndarray) -> IndexListing:
    out.relpaths, out.files, out.regular = relpaths, files, regular
    out.files["depth"] = relpaths.count_byte(ord(os.sep))
    out.paths = relpaths.prefixed(_prefixes(out.dirs), out.files["dir"])
    return out


def list_index_tree(dirs: list[str], reader: Reader | None = None) -> IndexListing:
    """Walk ``<dir>/current`` of each dir once: index files in (dir, relpath) order, strays, failures.
    ``reader``: reads each index file as the walk meets it, into the rows of ``reader.rows``."""
    out = IndexListing(list(dirs))
    rows = FileRows() if reader is None else reader.rows
    found = _Found(rows, reader)
    _walk_dirs(out, found)
    found.read_listed()
    relpaths = found.column()
    if reader is not None:
        reader.flush()
    return _finish(out, relpaths, rows.finish(), np.frombuffer(bytes(found.regular), np.bool_))


@dataclass
class ListedBlock:
    """Consecutive index files of a listing, all of one dir: their paths below its ``current/`` (bytes
    back to back, and each one's length), what their names say, and whether each is a regular file."""

    dir: int
    data: np.ndarray      # uint8
    lengths: np.ndarray   # int64
    scope: np.ndarray
    ledger: np.ndarray
    named: np.ndarray
    regular: np.ndarray   # bool

    def __len__(self) -> int:
        return len(self.lengths)


def stream_index_tree(dirs: list[str], ship: Callable[[ListedBlock], None], block: int) -> IndexListing:
    """``list_index_tree``'s walk, its files given to ``ship`` about ``block`` at a time, in the listing's
    order, and not kept: a listing as long as the hierarchy is large is never held. Returns the rest
    of the listing (strays, failures, symlinks), without files; ``read_streamed`` puts the two together."""
    out = IndexListing(list(dirs))
    found = _Found(FileRows(), None, ship, block)
    _walk_dirs(out, found)
    found.drain()
    return out


class ListingCut(Exception):
    """A streamed listing that ended before its last part. The files it gave were read: ``relpaths``,
    in the reader's first rows."""

    def __init__(self, why: str, relpaths: PathColumn):
        super().__init__(why)
        self.relpaths = relpaths


def read_streamed(dirs: Sequence[str], parts: Iterable[ListedBlock | IndexListing], reader: Reader) -> IndexListing:
    """The files of a streamed listing (``stream_index_tree``'s blocks, then its rest) read by ``reader`` as
    each block comes, into new rows of ``reader.rows``: the same listing and reads as ``list_index_tree(dirs,
    reader)``. Raises ListingCut when ``parts`` end before the rest; ``reader`` then holds the files read."""
    prefixes = _prefixes(dirs)
    data: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    regular: list[np.ndarray] = []
    for part in parts:
        if isinstance(part, IndexListing):
            if part.dirs != list(dirs):
                raise ListingCut("a listing of other dirs", _column(data, lengths))
            reader.flush()
            relpaths = _column(data, lengths)
            return _finish(part, relpaths, reader.rows.finish(), _joined(regular, np.bool_))
        k = len(part)
        r0 = reader.rows.add(k)
        table = reader.rows.array[r0:r0 + k]
        table["dir"], table["scope"], table["ledger"], table["named"] = part.dir, part.scope, part.ledger, part.named
        data.append(part.data)
        lengths.append(part.lengths)
        regular.append(part.regular)
        paths = PathColumn(part.data, np.cumsum(part.lengths), [prefixes[part.dir]]).block(0, k)
        for lo in range(0, k, READ_BLOCK):
            reader.read_block(r0 + lo, paths[lo:lo + READ_BLOCK], part.regular[lo:lo + READ_BLOCK])
    raise ListingCut("the listing ended before its last part", _column(data, lengths))


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _column(data: list[np.ndarray], lengths: list[np.ndarray]) -> PathColumn:
    if not data:
        return PathColumn.empty()
    return PathColumn(np.concatenate(data), np.cumsum(np.concatenate(lengths)))


def read_listed(listing: IndexListing, reader: Reader, start: int = 0) -> IndexListing:
    """``listing``'s files read in its order by ``reader``, whose rows are the listing's (FileRows.holding):
    the same listing and reads as ``list_index_tree(listing.dirs, reader)``, which reads each file as it
    lists it. ``start``: the files before it were read already (their rows filled)."""
    for lo in range(start, len(listing.paths), READ_BLOCK):
        paths = listing.paths.block(lo, lo + READ_BLOCK)
        reader.read_block(lo, paths, listing.regular[lo:lo + len(paths)])
    reader.flush()
    return dataclasses.replace(listing, files=reader.rows.finish())
