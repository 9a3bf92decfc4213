"""Pass 5's index locations as rows, grouped by the ranges of entry-log ids its join runs over
(fsck/passes/p5_crosscheck/), each range's rows in index order.

With few ranges each range's rows are built when its join asks for them, by a pass over the
inventory's locations that keeps those pointing into the range: nothing is copied, routed or spilled
beyond the rows of the ranges being joined. With many ranges, those passes would cost more than one
routing: the rows are routed once (diskio.spill.RangeSpill, spilled to the check's folder when they
do not fit in the share)."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bkdisk.diskio.spill import RangeSpill, SpillFolder
from bkdisk.formats.index import location_logs
from bkdisk.fsck.passes.p5_crosscheck.kernels import location_rows, locations_per_log

# (its scope and ledger are those of its file row: read there by the join, not copied per location)
LOCATION_ROW = np.dtype([("k", "<i8"), ("key", "<u8"), ("entry", "<i8"), ("file", "<i4")])
CHUNK = 1 << 20       # locations read at once
BLOCK = 1 << 16       # locations a range's pass looks at or passes over at once
_NO_BLOCKS = np.zeros(0, np.int64)
FEW_RANGES = 8        # up to this many ranges, each range reads the locations again


class RereadLocations:
    """Each range's rows built on demand from ``locations``; the counts per log come from one pass,
    which also notes which logs each BLOCK of locations points into: a range's pass looks only at the
    blocks that point into it (an index's locations come in runs of one log)."""

    def __init__(self, locations: np.ndarray, ids: np.ndarray, sizes: np.ndarray, bounds: np.ndarray):
        self.locations, self.ids, self.sizes = locations, ids, sizes
        self.per_log = np.zeros(len(ids), np.int64)
        self.blocks: list[tuple[np.ndarray, np.ndarray]] = []   # per chunk: first and last log index per block
        for k0 in range(0, len(locations), CHUNK):
            c = locations[k0:k0 + CHUNK]
            blocks = -(-len(c) // BLOCK)
            first, last = np.full(blocks, len(ids), np.int64), np.full(blocks, -1, np.int64)
            locations_per_log(c["log"], c["pos"], ids, sizes, self.per_log, BLOCK, first, last)
            self.blocks.append((first, last))
        cuts = np.searchsorted(ids, np.asarray(bounds, ids.dtype), side="left").tolist()
        self.edges = [0, *cuts, len(ids)]

    def range_rows(self, r: int) -> np.ndarray:
        lo, hi = self.edges[r], self.edges[r + 1]
        rows = np.empty(int(self.per_log[lo:hi].sum()), LOCATION_ROW)
        n, locs = 0, self.locations
        for k0, (first, last) in zip(range(0, len(locs), CHUNK), self.blocks):
            if n == len(rows):
                break
            if not ((first < hi) & (last >= lo)).any():
                continue
            c = locs[k0:k0 + CHUNK]
            n += location_rows(c["file"], c["entry"], c["log"], c["pos"], self.ids, self.sizes, lo, hi, k0, BLOCK,
                               first, last, rows["k"][n:], rows["key"][n:], rows["entry"][n:], rows["file"][n:])
        return rows

    def ranges(self) -> Iterator[tuple[int, np.ndarray]]:
        for r in range(len(self.edges) - 1):
            yield r, self.range_rows(r)

    def close(self) -> None:
        pass


def routed_locations(locations: np.ndarray, ids: np.ndarray, sizes: np.ndarray,
                     bounds: np.ndarray, budget: int, folder: SpillFolder,
                     few: int = FEW_RANGES) -> RereadLocations | RangeSpill:
    """The rows of the ``locations`` that point into a scanned log (sorted ``ids``) before its end
    (``sizes``), grouped by range of log ids (``bounds``: the first id of each range after the first):
    ``ranges()`` gives (range, rows) in range order; ``close()`` drops what is held."""
    if len(bounds) + 1 <= few:
        return RereadLocations(locations, ids, sizes, bounds)

    def route(rows: np.ndarray) -> np.ndarray:
        return np.searchsorted(bounds, location_logs(rows["key"]), side="right")

    spill = RangeSpill(LOCATION_ROW, route, len(bounds) + 1, budget, folder, "locations")
    everything = (0, len(ids))
    for k0 in range(0, len(locations), CHUNK):
        c = locations[k0:k0 + CHUNK]
        # (a location past the end of its log is pass 3's INDEX_LOCATION_OUT_OF_RANGE: reported once, there)
        rows = np.empty(len(c), LOCATION_ROW)
        n = location_rows(c["file"], c["entry"], c["log"], c["pos"], ids, sizes, *everything, k0, BLOCK, _NO_BLOCKS,
                          _NO_BLOCKS, rows["k"], rows["key"], rows["entry"], rows["file"])
        spill.append(rows[:n])
    return spill
