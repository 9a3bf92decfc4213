"""The index-hierarchy walk (one listing, then every file read and decoded), and one file's locations.

``walk_index_dirs`` returns the same IndexInventory as ``indexfiles.reference_walk.walk_index_dirs_reference``
(its pure-Python twin; tests compare them): indexfiles/listing.py lists the hierarchy once and
indexfiles/reading.py reads each file as the listing meets it (holes of sparse files skipped), the
jitted kernels of indexfiles/decode.py decoding whole batches. Compiled kernels are cached (diskio/kernels.py sets
NUMBA_CACHE_DIR from BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from bkdisk.diskio.mapped import DiskError
from bkdisk.formats import index as fi
from bkdisk.formats.errors import FormatError
from bkdisk.indexfiles.arrays import LOCATION_DTYPE, IndexInventory
from bkdisk.indexfiles.canonical_paths import placed_paths
from bkdisk.indexfiles.file_rows import FileRows
from bkdisk.indexfiles.listing import IndexListing, list_index_tree, read_listed
from bkdisk.indexfiles.reading import DEFAULT_BATCH, Reader, decode_index_bytes, read_index_files


def walk_index_dirs(dirs: list[str], *, batch_bytes: int = DEFAULT_BATCH, sink=None,
                    listing: IndexListing | None = None) -> IndexInventory:
    """Every ``.idx`` below each ``<dir>/current`` (2-level and 4-level): one row per file, every location,
    strays, and every folder or file that could not be read (``io_failures``). The walk reads each file
    as it lists it, or in the order of ``listing`` (``list_index_tree(dirs)``, made beforehand: see
    indexfiles.listing_ahead). ``sink``: where the locations go (reading.Reader); ``locations`` is then
    a diskio.spill.ChunkedArray when it spilled."""
    if listing is None:
        reader = Reader(FileRows(), batch_bytes, sink)
        lst = list_index_tree(dirs, reader=reader)
    else:   # (its rows become the reader's, filled in place)
        reader = Reader(FileRows.holding(listing.files), batch_bytes, sink)
        lst = read_listed(listing, reader)
    reads = reader.result(lst.files)
    relpaths = placed_paths(lst.relpaths, reads.files)   # (the walk's column of every path is dropped)
    paths = relpaths.prefixed(lst.paths.prefixes, lst.files["dir"]) if relpaths is not lst.relpaths else lst.paths
    return IndexInventory(lst.dirs, paths, relpaths, reads.files, reads.headers, reads.errors,
                          reads.locations, lst.strays, sorted(lst.failures + reads.failures, key=lambda f: f.path),
                          lst.symlinks)


@dataclass
class IndexLocations:
    """One ``.idx`` file: header, every present entry location, counts."""

    path: str
    size: int
    header: fi.IndexHeader | None
    header_error: FormatError | DiskError | None
    locations: np.ndarray      # LOCATION_DTYPE with file = 0
    present: int               # slots that hold a location
    last_entry: int            # -1 when none
    trailing_bytes: int

    @property
    def fenced(self) -> bool | None:
        return None if self.header is None else self.header.fenced


def read_index_locations(path: str | os.PathLike, data: bytes | None = None) -> IndexLocations:
    """Decode one ``.idx`` file (or its bytes): header state and every entry -> (entry log id, offset).

    A file that cannot be read raises DiskError; a bad header comes back in ``header_error``. Memory
    stays bounded whatever size the file claims (holes of a sparse file are never read).
    """
    p = os.fspath(path)
    if data is None:
        reads = read_index_files([p])
        if reads.failures:
            raise reads.failures[0].as_disk_error()
    else:
        reads = decode_index_bytes(p, data)
    row = reads.files[0]
    if reads.errors[0] is not None:
        return IndexLocations(p, int(row["size"]), None, reads.errors[0], np.zeros(0, LOCATION_DTYPE), 0, -1, 0)
    return IndexLocations(p, int(row["size"]), reads.headers[0], None, reads.locations, int(row["present"]),
                          int(row["last_entry"]), int(row["trailing"]))
