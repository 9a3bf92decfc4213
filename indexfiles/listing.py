"""The one directory walk of ``.idx`` hierarchies: every index file, stray file and unlistable folder.

Below ``<dir>/current`` BookKeeper keeps index files two levels deep (scope-0 ledgers) and bp-35
scoped ledgers four levels deep (formats/paths.py, specs/paths.md). The walk lists every folder
once with os.scandir (file types come from the directory entries, no stat per file), does not
descend into the RocksDB folders of DbLedgerStorage or through symbolic links to folders, and keeps
every folder it cannot list as an IoFailure instead of stopping.
"""
from __future__ import annotations

import os
from array import array
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.failures import LIST, IoFailure
from bkdisk.formats.paths import CURRENT_DIR, parse_index_names
from bkdisk.indexfiles import path_column
from bkdisk.indexfiles.path_column import PathColumn

INDEX_SUFFIX = ".idx"
RELOCATION_SUFFIX = ".idx.rloc"   # IndexPersistenceMgr's relocation temp name
ROCKSDB_DIRS = ("ledgers", "locations")
STRAY_RELOCATION = "leftover of an index relocation"
STRAY_OTHER = "not an index file"


@dataclass
class IndexListing:
    """Every ``.idx`` below the walked dirs, ordered by (dir, relative path), with what its name says."""

    dirs: list[str]
    paths: PathColumn = field(default_factory=PathColumn.empty)
    relpaths: PathColumn = field(default_factory=PathColumn.empty)     # below <dir>/current
    dir_index: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    scope: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    ledger: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    named: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))   # the name parses as an index name
    depth: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))   # path components below current/
    # The directory entry says regular file (not a link, FIFO or device): no fstat needed before reading.
    regular: np.ndarray = field(default_factory=lambda: np.zeros(0, np.bool_))
    strays: list[tuple[str, str]] = field(default_factory=list)        # (path, why), by path
    failures: list[IoFailure] = field(default_factory=list)            # folders that could not be listed
    # Symbolic links met (to files or folders), not counting those inside a followed symlinked folder:
    # fsck's pass 1 names them from this listing instead of walking the hierarchy again.
    symlinks: list[tuple[int, str]] = field(default_factory=list)     # (dir index, path)


class _Found:
    """The ``.idx`` files one walk meets, as bytes: each path below the walked folder, its end, and
    whether the directory entry says plain regular file (no Python object kept per file)."""

    def __init__(self, cur: str):
        self.skip = len(cur) + 1
        self.names = bytearray()
        self.ends = array("q")
        self.regular = bytearray()

    def add(self, path: str, regular: bool) -> None:
        self.names += os.fsencode(path[self.skip:])
        self.ends.append(len(self.names))
        self.regular.append(regular)

    def column(self) -> PathColumn:
        return PathColumn(np.frombuffer(self.names, np.uint8).copy(), np.frombuffer(self.ends, np.int64).copy())


def _walk_one(cur: str, found: _Found, strays: list[tuple[str, str]],
              failures: list[IoFailure], symlinks: list[str] | None = None) -> None:
    """Add every ``.idx`` below ``cur`` to ``found``; strays, failures, and the symlinks met outside
    followed symlinked folders."""
    stack = [(cur, 0, False)]
    add = found.add
    links = [] if symlinks is None else symlinks
    top = os.path.realpath(cur)
    inside = top.rstrip(os.sep) + os.sep
    seen = {top}   # real paths of folders reached through symlinks: a loop is cut
    while stack:
        folder, depth, via_link = stack.pop()
        try:   # a listing that fails half way is a failure too, not a partial listing
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as e:
            failures.append(IoFailure.from_oserror(folder, LIST, e))
            continue
        for entry in entries:
            try:
                # A symlinked folder is followed (the check reads through it; fsck.confinement keeps
                # repairs from writing through one that leads outside the bookie's dirs).
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir and entry.is_symlink():
                    if not via_link:
                        links.append(entry.path)
                    if depth and entry.is_dir():
                        real = os.path.realpath(entry.path)
                        # A link to a folder of this same tree (``up -> ..``) is an alias of what the
                        # walk lists anyway: followed, it would list those index files twice.
                        if real in seen or real.startswith(inside):
                            continue
                        seen.add(real)
                        stack.append((entry.path, depth + 1, True))
                        continue
            except OSError:   # no type in the entry and the lstat failed: it vanished
                continue
            name = entry.name
            if is_dir:
                if name.endswith(INDEX_SUFFIX):   # named like an index file: listed (its read is refused) and walked
                    add(entry.path, False)
                if depth or name not in ROCKSDB_DIRS:
                    stack.append((entry.path, depth + 1, via_link))
            elif name.endswith(INDEX_SUFFIX):
                add(entry.path, entry.is_file(follow_symlinks=False))
            elif depth:
                strays.append((entry.path, STRAY_RELOCATION if name.endswith(RELOCATION_SUFFIX) else STRAY_OTHER))


def list_index_tree(dirs: list[str]) -> IndexListing:
    """Walk ``<dir>/current`` of each dir once: index files in (dir, relpath) order, strays, failures."""
    out = IndexListing(list(dirs))
    di_parts, regular, rels = [], [], []
    for di, d in enumerate(out.dirs):
        cur = os.path.join(d, CURRENT_DIR)
        found = _Found(cur)
        links: list[str] = []
        _walk_one(cur, found, out.strays, out.failures, links)
        out.symlinks.extend((di, p) for p in links)
        col = found.column()
        order = path_column.sort_order(col)   # by path: the same order as by relpath, the prefix being common
        rels.append(path_column.take(col, order))
        regular.append(np.frombuffer(bytes(found.regular), np.bool_)[order])
        di_parts.append(np.full(len(col), di, np.int32))
    out.dir_index = np.concatenate(di_parts) if di_parts else np.zeros(0, np.int32)
    out.regular = np.concatenate(regular) if regular else np.zeros(0, np.bool_)
    out.relpaths = path_column.concat(rels)
    out.paths = out.relpaths.prefixed([os.path.join(d, CURRENT_DIR) + os.sep for d in out.dirs], out.dir_index)
    n = len(out.relpaths)
    out.scope, out.ledger = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    out.named = np.zeros(n, np.bool_)
    sep = os.sep
    for lo in range(0, n, path_column.BLOCK):   # the names parsed a block at a time
        part = out.relpaths.block(lo, lo + path_column.BLOCK)
        scope, ledger, named = parse_index_names([r[r.rfind(sep) + 1:] for r in part])
        hi = lo + len(part)
        out.scope[lo:hi], out.ledger[lo:hi], out.named[lo:hi] = scope, ledger, named
    out.depth = out.relpaths.count_byte(ord(sep)).astype(np.int32)
    out.strays.sort()
    out.failures.sort(key=lambda f: f.path)
    return out
