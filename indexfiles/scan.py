"""The index-hierarchy walk (one listing, then every file read and decoded), and one file's locations.

``walk_index_dirs`` returns the same IndexInventory as ``indexfiles.reference_walk.walk_index_dirs_reference``
(its pure-Python twin; tests compare them): indexfiles/listing.py lists the hierarchy once and
indexfiles/reading.py reads each file as the listing meets it (holes of sparse files skipped), the
jitted kernels of indexfiles/decode.py decoding whole batches. Compiled kernels are cached (diskio/kernels.py sets
NUMBA_CACHE_DIR from BKDISK_NUMBA_CACHE_DIR).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from bkdisk.diskio.mapped import DiskError
from bkdisk.formats import index as fi
from bkdisk.formats.errors import FormatError
from bkdisk.indexfiles.arrays import LOCATION_DTYPE, IndexInventory
from bkdisk.indexfiles.canonical_paths import placed_paths
from bkdisk.indexfiles.file_rows import FileRows
from bkdisk.indexfiles.listing import (
    IndexListing,
    ListedBlock,
    ListingCut,
    list_index_tree,
    read_listed,
    read_streamed,
)
from bkdisk.indexfiles.path_column import PathColumn
from bkdisk.indexfiles.reading import DEFAULT_BATCH, Reader, decode_index_bytes, read_index_files


def walk_index_dirs(dirs: list[str], *, batch_bytes: int = DEFAULT_BATCH, sink=None,
                    listing: IndexListing | Iterable[ListedBlock | IndexListing] | None = None) -> IndexInventory:
    """Every ``.idx`` below each ``<dir>/current`` (2-level and 4-level): one row per file, every location,
    strays, and every folder or file that could not be read (``io_failures``). The walk reads each file
    as it lists it, or in the order of ``listing``: a whole one (``list_index_tree(dirs)``, made
    beforehand), or one streamed by another process as it lists (``stream_index_tree``: see
    indexfiles.listing_ahead), each block read as it comes; a stream cut short is listed to its end
    here. ``sink``: where the locations go (reading.Reader); ``locations`` is then a
    diskio.spill.ChunkedArray when it spilled."""
    if listing is None:
        reader = Reader(FileRows(), batch_bytes, sink)
        lst = list_index_tree(dirs, reader=reader)
    elif isinstance(listing, IndexListing):   # (its rows become the reader's, filled in place)
        reader = Reader(FileRows.holding(listing.files), batch_bytes, sink)
        lst = read_listed(listing, reader)
    else:
        reader = Reader(FileRows(), batch_bytes, sink)
        cut = None
        try:
            lst = read_streamed(dirs, listing, reader)
        except ListingCut as e:
            cut = e.relpaths   # (not the exception: its frames would hold the stream)
        finally:
            close = getattr(listing, "close", None)
            if close is not None:   # the stream's process and file go now, not when the stream is collected
                close()
        if cut is not None:
            lst, reader = _after_cut(dirs, reader, cut, batch_bytes, sink)
    reads = reader.result(lst.files)
    relpaths = placed_paths(lst.relpaths, reads.files)   # (the walk's column of every path is dropped)
    paths = relpaths.prefixed(lst.paths.prefixes, lst.files["dir"]) if relpaths is not lst.relpaths else lst.paths
    return IndexInventory(lst.dirs, paths, relpaths, reads.files, reads.headers, reads.errors,
                          reads.locations, lst.strays, sorted(lst.failures + reads.failures, key=lambda f: f.path),
                          lst.symlinks)


def _after_cut(dirs: list[str], reader: Reader, relpaths: PathColumn, batch_bytes: int,
               sink) -> tuple[IndexListing, Reader]:
    """A streamed listing cut short (its process failed or was killed): the dirs listed here, and the
    files after those read already read in its order. Files listed otherwise than the stream did (the
    hierarchy changed since) are all read again, by a new reader."""
    lst = list_index_tree(dirs)
    k = reader.rows.n
    if k and not _listed_first(lst, reader.rows.array["dir"][:k], relpaths):
        reader.discard()
        fresh = Reader(FileRows.holding(lst.files), batch_bytes, sink)
        return read_listed(lst, fresh), fresh
    have, depth = reader.rows.array[:k].copy(), lst.files["depth"][:k].copy()
    reader.rows = FileRows.holding(lst.files)
    reader.rows.array[:k] = have   # (the rows read; the names' columns are the same, the depth is the listing's)
    reader.rows.array["depth"][:k] = depth
    return read_listed(lst, reader, start=k), reader


def _listed_first(lst: IndexListing, dir_index: np.ndarray, relpaths: PathColumn) -> bool:
    """Whether ``lst`` begins with the files of ``dir_index`` and ``relpaths``."""
    k = len(relpaths)
    if len(lst.relpaths) < k or not np.array_equal(lst.files["dir"][:k], dir_index):
        return False
    ends = lst.relpaths.ends[:k]
    return np.array_equal(ends, relpaths.ends) and np.array_equal(lst.relpaths.data[:relpaths.ends[-1]], relpaths.data)


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
