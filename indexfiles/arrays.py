"""Record arrays of an index-hierarchy walk: the file and location rows and the IndexInventory holding them.

The fast walk (indexfiles/scan.py) and the reference walk (indexfiles/reference_walk.py) both return an
IndexInventory; tests compare the two.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.failures import LIST, IoFailure
from bkdisk.diskio.mapped import DiskError
from bkdisk.formats import index as fi
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, index_relpath

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
