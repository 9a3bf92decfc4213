"""Record arrays of an index-hierarchy walk, and the reference (pure-Python) way to produce them.

The walk of indexfiles/scan.py returns the same IndexInventory; tests compare the two. Both list the
hierarchy with indexfiles/listing.py; the reference then reads each file whole and decodes it with
indexfiles.reader.read_index (so it is for tests and small files: a sparse file is read whole).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.failures import LIST, READ, IoFailure, open_regular_file
from bkdisk.diskio.mapped import DiskError
from bkdisk.formats import index as fi
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, index_relpath
from bkdisk.indexfiles.reader import read_index

INDEX_FILE_DTYPE = np.dtype([
    ("dir", "<i4"),          # index into the walked dirs
    ("scope", "<u8"),        # the ledger the file name claims
    ("ledger", "<u8"),
    ("named", "?"),          # False: the name does not parse as an index name
    ("depth", "<i4"),        # path components below current/ (2 for scope 0, 4 for scoped, when placed right)
    ("size", "<i8"),
    ("header_ok", "?"),
    ("version", "<i4"),
    ("state_bits", "<u4"),
    ("present", "<i8"),      # slots that hold a location
    ("last_entry", "<i8"),   # -1 when none
    ("trailing", "<i4"),     # bytes of a partial last slot
])
LOCATION_DTYPE = np.dtype([("file", "<i4"), ("entry", "<i8"), ("log", "<u4"), ("pos", "<u4")])


@dataclass
class IndexInventory:
    dirs: list[str]
    paths: Sequence[str] = field(default_factory=list)      # one per file row (indexfiles.path_column)
    relpaths: Sequence[str] = field(default_factory=list)   # below <dir>/current
    files: np.ndarray = field(default_factory=lambda: np.zeros(0, INDEX_FILE_DTYPE))
    headers: Sequence[fi.IndexHeader | None] = field(default_factory=list)   # (indexfiles.row_objects)
    errors: Sequence[FormatError | DiskError | None] = field(default_factory=list)
    locations: np.ndarray = field(default_factory=lambda: np.zeros(0, LOCATION_DTYPE))
    strays: list[tuple[str, str]] = field(default_factory=list)   # (path, why), files that are not indexes
    # Every folder that could not be listed and file that could not be opened or read (path, op, errno,
    # message), by path; the file's row also has a DiskError in ``errors``.
    io_failures: list[IoFailure] = field(default_factory=list)
    # Symbolic links the walk met (to files or folders), not counting those inside a followed symlinked
    # folder: (dir index, path).
    symlinks: list[tuple[int, str]] = field(default_factory=list)

    def unlisted_folder_of(self, lid: LedgerId) -> IoFailure | None:
        """The failure of a folder that could not be listed and may hold ``lid``'s index (its
        ``<dir>/current`` or a folder on the ledger's path), else None: what was not seen there is unknown."""
        want = index_relpath(lid).split("/")[:-1]
        for f in self.io_failures:
            if f.op != LIST:
                continue
            for d in self.dirs:
                rel = os.path.relpath(f.path, os.path.join(d, CURRENT_DIR))
                parts = [] if rel == "." else rel.split(os.sep)
                if not rel.startswith("..") and parts == want[:len(parts)]:
                    return f
        return None


def _read_whole(path: str) -> bytes | IoFailure:
    opened = open_regular_file(path)
    if isinstance(opened, IoFailure):
        return opened
    fd, _size = opened
    try:
        with os.fdopen(fd, "rb", closefd=True) as f:
            return f.read()
    except OSError as e:
        return IoFailure.from_oserror(path, READ, e)


def walk_index_dirs_reference(dirs: list[str]) -> IndexInventory:
    from bkdisk.indexfiles.listing import list_index_tree

    lst = list_index_tree(dirs)
    inv = IndexInventory(lst.dirs, lst.paths, lst.relpaths, strays=lst.strays)
    failures = list(lst.failures)
    rows, locs = [], []
    headers: list[fi.IndexHeader | None] = []
    errors: list[FormatError | DiskError | None] = []
    for fidx, (path, _rel) in enumerate(zip(lst.paths, lst.relpaths)):
        named = (int(lst.dir_index[fidx]), int(lst.scope[fidx]), int(lst.ledger[fidx]), bool(lst.named[fidx]),
                 int(lst.depth[fidx]))
        data = _read_whole(path)
        try:
            if isinstance(data, IoFailure):
                failures.append(data)
                raise data.as_disk_error()
            x = read_index(path, data)
        except (FormatError, DiskError) as e:
            try:
                size = os.stat(path).st_size
            except OSError:
                size = -1
            rows.append(named + (size, False, -1, 0, 0, -1, 0))
            headers.append(None)
            errors.append(e)
            continue
        nz = np.flatnonzero(x.locations)
        rows.append(named + (x.size, True, x.header.version, x.header.state_bits, len(nz),
                             int(nz[-1]) if len(nz) else -1, x.trailing_bytes))
        headers.append(x.header)
        errors.append(None)
        v = x.locations[nz]
        part = np.zeros(len(nz), LOCATION_DTYPE)
        part["file"] = fidx
        part["entry"] = nz
        part["log"] = fi.location_logs(v)
        part["pos"] = fi.location_positions(v)
        locs.append(part)
    inv.files = np.array(rows, dtype=INDEX_FILE_DTYPE)
    inv.headers, inv.errors = headers, errors
    inv.locations = np.concatenate(locs) if locs else np.zeros(0, LOCATION_DTYPE)
    inv.io_failures = sorted(failures, key=lambda f: f.path)
    inv.symlinks = lst.symlinks
    return inv
