"""Index-file writer: the FileInfo header, then whole pages of locations up to the last entry's page."""
from __future__ import annotations

import numpy as np

from bkdisk.formats import index as fi


def index_bytes(header: fi.IndexHeader, locations: np.ndarray, page_size: int) -> bytes:
    """A complete ``.idx``: header block, then every page up to the one holding the last present slot."""
    if page_size % 8 or page_size <= 0:
        raise ValueError("page size must be a positive multiple of 8")
    locs = np.asarray(locations, dtype=np.uint64)
    nz = np.flatnonzero(locs)
    per_page = page_size // 8
    pages = 0 if len(nz) == 0 else int(nz[-1]) // per_page + 1
    slots = np.zeros(pages * per_page, dtype=fi.SLOT_DTYPE)
    n = min(len(locs), len(slots))
    slots[:n] = locs[:n]
    return fi.build_header(header) + slots.tobytes()


def write_index(path: str, header: fi.IndexHeader, locations: np.ndarray, page_size: int) -> int:
    data = index_bytes(header, locations, page_size)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)
