"""The reference (pure-Python) walk of an index hierarchy, beside the fast one of indexfiles/scan.py.

Both list the hierarchy with indexfiles/listing.py and return the same IndexInventory; tests compare
the two. The reference then reads each file whole and decodes it with indexfiles.reference_reader.read_index (so
it is for tests and small files: a sparse file is read whole).
"""
from __future__ import annotations

import os

import numpy as np

from bkdisk.diskio.failures import READ, IoFailure, open_regular_file
from bkdisk.diskio.mapped import DiskError
from bkdisk.formats import index as fi
from bkdisk.formats.errors import FormatError
from bkdisk.indexfiles.arrays import INDEX_FILE_DTYPE, LOCATION_DTYPE, IndexInventory
from bkdisk.indexfiles.listing import list_index_tree
from bkdisk.indexfiles.reference_reader import read_index


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
