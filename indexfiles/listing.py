"""The one directory walk of ``.idx`` hierarchies: every index file, stray file and unlistable folder.

Below ``<dir>/current`` BookKeeper keeps index files two levels deep (scope-0 ledgers) and bp-35
scoped ledgers four levels deep (formats/paths.py, specs/paths.md). The walk lists every folder
once with os.scandir (file types come from the directory entries, no stat per file), does not
descend into the RocksDB folders of DbLedgerStorage or through symbolic links to folders, and keeps
every folder it cannot list as an IoFailure instead of stopping.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.failures import LIST, IoFailure
from bkdisk.formats.paths import CURRENT_DIR, parse_index_names

INDEX_SUFFIX = ".idx"
RELOCATION_SUFFIX = ".idx.rloc"   # IndexPersistenceMgr's relocation temp name
ROCKSDB_DIRS = ("ledgers", "locations")
STRAY_RELOCATION = "leftover of an index relocation"
STRAY_OTHER = "not an index file"


@dataclass
class IndexListing:
    """Every ``.idx`` below the walked dirs, ordered by (dir, relative path), with what its name says."""

    dirs: list[str]
    paths: list[str] = field(default_factory=list)
    relpaths: list[str] = field(default_factory=list)                  # below <dir>/current
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


def _walk_one(cur: str, found: list[tuple[str, bool]], strays: list[tuple[str, str]],
              failures: list[IoFailure], symlinks: list[str] | None = None) -> None:
    """Append (path, is a plain regular file) of every ``.idx`` below ``cur``; strays, failures, and the
    symlinks met outside followed symlinked folders."""
    stack = [(cur, 0, False)]
    add = found.append
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
                    add((entry.path, False))
                if depth or name not in ROCKSDB_DIRS:
                    stack.append((entry.path, depth + 1, via_link))
            elif name.endswith(INDEX_SUFFIX):
                add((entry.path, entry.is_file(follow_symlinks=False)))
            elif depth:
                strays.append((entry.path, STRAY_RELOCATION if name.endswith(RELOCATION_SUFFIX) else STRAY_OTHER))


def list_index_tree(dirs: list[str]) -> IndexListing:
    """Walk ``<dir>/current`` of each dir once: index files in (dir, relpath) order, strays, failures."""
    out = IndexListing(list(dirs))
    di_parts, regular = [], []
    sep = os.sep
    for di, d in enumerate(out.dirs):
        found: list[tuple[str, bool]] = []
        cur = os.path.join(d, CURRENT_DIR)
        links: list[str] = []
        _walk_one(cur, found, out.strays, out.failures, links)
        out.symlinks.extend((di, p) for p in links)
        found.sort()   # by path: the same order as by relpath, the prefix being common
        paths = [p for p, _ in found]
        out.paths.extend(paths)
        skip = len(cur) + 1
        out.relpaths.extend([p[skip:] for p in paths])
        regular.extend([k for _, k in found])
        di_parts.append(np.full(len(found), di, np.int32))
    out.dir_index = np.concatenate(di_parts) if di_parts else np.zeros(0, np.int32)
    out.regular = np.array(regular, np.bool_)
    scope, ledger, named = parse_index_names([r[r.rfind(sep) + 1:] for r in out.relpaths])
    out.scope, out.ledger, out.named = np.array(scope, np.uint64), np.array(ledger, np.uint64), np.array(named, bool)
    out.depth = np.array([r.count(sep) for r in out.relpaths], np.int32)
    out.strays.sort()
    out.failures.sort(key=lambda f: f.path)
    return out
