"""Pass 5's index locations as rows, grouped by the ranges of entry-log ids its join runs over
(fsck/passes/p5_crosscheck/), each range's rows in index order.

With few ranges one pass over the inventory's locations notes each one's range (a byte each), and
each range's rows are built when its join asks for them, from the locations of its byte: nothing is
copied, routed or spilled beyond the rows of the ranges being joined. With many ranges, those passes
would cost more than one routing: the rows are routed once (diskio.spill.RangeSpill, spilled to the
check's folder when they do not fit in the share)."""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import numpy as np

from bkdisk.diskio.spill import RangeSpill, SpillFolder, joined_range_rows
from bkdisk.fsck.passes.p5_crosscheck.kernels import NO_RANGE, locations_per_log, range_rows_of, routed_rows

# (its scope and ledger are those of its file row: read there by the join, not copied per location)
LOCATION_ROW = np.dtype([("k", "<i8"), ("key", "<u8"), ("entry", "<i8"), ("file", "<i4")])
CHUNK = 1 << 20       # locations read at once
FEW_RANGES = 8        # up to this many ranges, each range reads the locations again (below NO_RANGE)


def _going() -> None:
    """keep_going of a caller that never stops part-way."""


class RereadLocations:
    """Each range's rows built on demand from ``locations``: one pass counts the locations per log
    and notes each location's range (a byte each); a range's rows are then those of its byte. Where
    the logs interleave ledgers, as a busy bookie's do, every run of an index's locations points into
    every log, so a range's rows are found among all locations, by their byte."""

    def __init__(self, locations: np.ndarray, ids: np.ndarray, sizes: np.ndarray, bounds: np.ndarray,
                 keep_going: Callable[[], None] = _going):
        self.locations, self.ids, self.sizes = locations, ids, sizes
        self.per_log = np.zeros(len(ids), np.int64)
        cuts = np.searchsorted(ids, np.asarray(bounds, ids.dtype), side="left").tolist()
        self.edges = [0, *cuts, len(ids)]
        self.n = len(self.edges) - 1   # ranges (as RangeSpill.n)
        log_range = (np.searchsorted(np.array(self.edges[1:-1], np.int64), np.arange(len(ids)), side="right")
                     .astype(np.uint8))
        self.range_of = np.empty(len(locations), np.uint8)
        for k0 in range(0, len(locations), CHUNK):
            keep_going()
            c = locations[k0:k0 + CHUNK]
            locations_per_log(c["log"], c["pos"], ids, sizes, log_range, self.per_log, self.range_of[k0:k0 + len(c)])

    def range_rows(self, r: int) -> np.ndarray:
        lo, hi = self.edges[r], self.edges[r + 1]
        rows = np.empty(int(self.per_log[lo:hi].sum()), LOCATION_ROW)
        n, locs = 0, self.locations
        for k0 in range(0, len(locs), CHUNK):
            if n == len(rows):
                break
            if not (self.range_of[k0:k0 + CHUNK] == r).any():
                continue
            c = locs[k0:k0 + CHUNK]
            n += range_rows_of(self.range_of[k0:k0 + len(c)], r, c["file"], c["entry"], c["log"], c["pos"], k0,
                               rows["k"][n:], rows["key"][n:], rows["entry"][n:], rows["file"][n:])
        return rows

    def ranges(self) -> Iterator[tuple[int, np.ndarray]]:
        for r in range(self.n):
            yield r, self.range_rows(r)

    def close(self) -> None:
        pass


def routed_locations(locations: np.ndarray, ids: np.ndarray, sizes: np.ndarray,
                     bounds: np.ndarray, budget: int, folder: SpillFolder,
                     few: int = FEW_RANGES, keep_going: Callable[[], None] = _going,
                     threads: int = 1) -> RereadLocations | RangeSpill | HalvesRouted:
    """The rows of the ``locations`` that point into a scanned log (sorted ``ids``) before its end
    (``sizes``), grouped by range of log ids (``bounds``: the first id of each range after the first):
    ``ranges()`` gives (range, rows) in range order; ``close()`` drops what is held. ``keep_going`` is
    called before each chunk of locations (it raises when the check stopped: the rest is not wanted).
    ``threads`` 2: the two halves of the locations routed at once, each on a thread and in half the
    budget, when that half holds a chunk's table (the join waits for the routing, which runs once the
    log scans end, beside what is left of passes 3-4)."""
    if len(bounds) + 1 <= min(few, NO_RANGE):   # (a range a byte: NO_RANGE is none)
        return RereadLocations(locations, ids, sizes, bounds, keep_going)
    log_range = np.searchsorted(np.asarray(bounds, ids.dtype), ids, side="right").astype(np.int64)

    halted = threading.Event()   # set by a half that failed: the other's rows are not wanted

    def route(lo: int, hi: int, share: int) -> RangeSpill:
        spill = RangeSpill(LOCATION_ROW, None, len(bounds) + 1, share, folder, "locations")
        at = np.empty(len(bounds) + 2, np.int64)
        table = None   # the rows' table, filled again for each chunk once the spill keeps nothing of it
        try:
            for k0 in range(lo, hi, CHUNK):
                keep_going()
                if halted.is_set():
                    raise _OtherHalfFailed()
                c = locations[k0:min(k0 + CHUNK, hi)]
                # (a location past the end of its log is pass 3's INDEX_LOCATION_OUT_OF_RANGE: reported once)
                if table is None or len(table) < len(c):
                    table = np.empty(len(c), LOCATION_ROW)
                rows = table[:len(c)]
                routed_rows(c["file"], c["entry"], c["log"], c["pos"], ids, sizes, log_range, k0, at, rows["k"],
                            rows["key"], rows["entry"], rows["file"])
                if not spill.append_grouped(rows, at):
                    table = None
        except BaseException:
            halted.set()
            spill.close()   # (its files go now: nothing will read them)
            raise
        return spill

    n = len(locations)
    if threads < 2 or n < 2 * CHUNK or budget < 2 * CHUNK * LOCATION_ROW.itemsize:
        return route(0, n, budget)
    from concurrent.futures import ThreadPoolExecutor
    mid = (n // CHUNK + 1) // 2 * CHUNK   # (on a chunk's edge: each half's chunks are those of one walk)
    with ThreadPoolExecutor(1, thread_name_prefix="fsck-routing") as pool:
        later = pool.submit(route, mid, n, budget // 2)
        try:
            first = route(0, mid, budget - budget // 2)
        except _OtherHalfFailed:
            later.result()   # (raises what stopped the second half)
            raise
        except BaseException:
            later.cancel()
            with contextlib.suppress(BaseException):
                later.result().close()
            raise
    try:
        second = later.result()
    except BaseException:
        first.close()
        raise
    return HalvesRouted(first, second)


class _OtherHalfFailed(Exception):
    """A half of the routing stops: the other failed, and what it raised is the routing's."""


class HalvesRouted:
    """Locations routed in two halves (``routed_locations`` on two threads): each range's rows are the
    first half's then the second's, in index order as one routing gives them."""

    def __init__(self, first: RangeSpill, second: RangeSpill):
        self.halves, self.n = (first, second), first.n

    def range_rows(self, r: int) -> np.ndarray:
        return joined_range_rows(self.halves, r)

    def ranges(self) -> Iterator[tuple[int, np.ndarray]]:
        for r in range(self.n):
            yield r, self.range_rows(r)

    def close(self) -> None:
        for h in self.halves:
            h.close()
