"""Where the index's locations point: into no entry log of the bookie, or too near a log's end (or
past it) for an entry to start there (pass 3's INDEX_LOCATION_MISSING_LOG and
INDEX_LOCATION_OUT_OF_RANGE).

Found a chunk of locations at a time, by pass 3 over the locations the index walk held; over spilled
ones, as the walk writes them (``PlacedCheck`` as the spill's tap), so that pass 3 does not read them
back from the spill file."""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from bkdisk.diskio.config import kernel
from bkdisk.diskio.kernels import first_at_least, unowned
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE
from bkdisk.formats.entrylog import ENTRY_SIZE
from bkdisk.indexfiles.arrays import LOCATION_DTYPE

# A location points just past an entry's size prefix; that prefix and a whole V1 entry header must
# lie inside the log: (pos - prefix) + header <= log size.
SHORTEST_ENTRY_END = ENTRY_V1_HEADER_SIZE - ENTRY_SIZE.sizeof()
CHUNK = 1 << 20   # locations checked at once


def log_sizes(log_files: Sequence) -> dict[int, int]:
    """Each entry log's size by id (fsck.context.LogFile rows; a log gone since it was listed left out)."""
    return {lf.log_id: os.path.getsize(lf.path) for lf in log_files if os.access(lf.path, os.F_OK)}


@kernel(any_layout=("c_log", "c_pos"))
def misplaced_locations(c_log, c_pos, ids, sizes, shortest_end, out_missing, out_past):
    """The locations (LOCATION_DTYPE fields ``c_*``) that point into no log of ``ids`` (sorted):
    their indices in ``out_missing``; and of the others those where an entry could not start, within
    ``shortest_end`` bytes of their log's end (``sizes``) or past it: in ``out_past``. Returns how many
    of each were written."""
    ids = unowned(ids)
    missing = past = 0
    for i in range(c_log.size):
        log = np.uint64(c_log[i])
        w = min(first_at_least(ids, log, 0, ids.size), ids.size - 1)
        if ids.size == 0 or ids[w] != log:
            out_missing[missing] = i
            missing += 1
        elif np.int64(c_pos[i]) + shortest_end > sizes[w]:
            out_past[past] = i
            past += 1
    return missing, past


class PlacedCheck:
    """The misplaced locations among rows given in order (``add``), against the logs of ``sizes``
    (``log_sizes``): their numbers (row order) and rows, those that point into no log first."""

    def __init__(self, sizes: dict[int, int]):
        self.sizes = sizes
        self._ids = np.array(sorted(sizes), dtype=np.uint64)
        self._log_size = np.array([sizes[k] for k in sorted(sizes)], dtype=np.int64)
        self.clear()

    def clear(self) -> None:
        """No rows given (the walk's reader started again)."""
        self.rows = 0
        self._found: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])   # (missing, past) numbers

    def add(self, first: int, rows: np.ndarray) -> None:
        """Rows numbered from ``first``, the rows given so far (a chunk of them at a time)."""
        if first != self.rows:   # (not the rows after those given: nothing said of them holds)
            raise ValueError(f"locations from row {first} given after {self.rows} rows")
        for k0 in range(0, len(rows), CHUNK):
            c = rows[k0:k0 + CHUNK]
            missing, past = np.empty(len(c), np.int64), np.empty(len(c), np.int64)
            n_missing, n_past = misplaced_locations(c["log"], c["pos"], self._ids, self._log_size, SHORTEST_ENTRY_END,
                                                    missing, past)
            for found, n, at in zip(self._found, (n_missing, n_past), (missing, past)):
                if n:
                    found.append(_numbered(first + k0, at[:n], c))
        self.rows += len(rows)

    def found(self) -> tuple[np.ndarray, np.ndarray]:
        """(locations into no log, locations too near or past their log's end): NUMBERED rows each."""
        return tuple(np.concatenate(f) if f else np.zeros(0, NUMBERED) for f in self._found)  # type: ignore[return-value]


# A misplaced location: its number among the index's locations, and its row.
NUMBERED = np.dtype([("k", "<i8"), ("loc", LOCATION_DTYPE)])


def _numbered(k0: int, at: np.ndarray, rows: np.ndarray) -> np.ndarray:
    out = np.empty(len(at), NUMBERED)
    out["k"], out["loc"] = k0 + at, rows[at]
    return out
