"""Reference index-file reader: the FileInfo header and the flat array of entry locations."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from bkdisk.diskio.mapped import read_bytes
from bkdisk.formats import index as fi


@dataclass
class IndexFile:
    path: str
    size: int
    header: fi.IndexHeader
    locations: np.ndarray   # uint64, slot i = entry i; 0 = absent
    trailing_bytes: int     # a partial slot at the end of the file (ignored, as BookKeeper does)

    @property
    def present(self) -> np.ndarray:
        return np.flatnonzero(self.locations)

    @property
    def last_entry(self) -> int:
        nz = self.present
        return int(nz[-1]) if len(nz) else -1


def read_index(path: str | os.PathLike, data: bytes | None = None) -> IndexFile:
    p = os.fspath(path)
    b = read_bytes(p) if data is None else data
    h = fi.parse_header(b, path=p)
    body = len(b) - fi.HEADER_SIZE
    whole = body - body % 8
    locs = np.frombuffer(b, dtype=fi.SLOT_DTYPE, count=whole // 8, offset=fi.HEADER_SIZE).astype(np.uint64)
    return IndexFile(p, len(b), h, locs, body % 8)
