"""Where the records of logs walked light start, from the bookie's own index (the ``.idx`` files'
locations), for the logs whose last deep read the scrub does not know (a state's first runs): their
header pages are then asked for ahead of their walks (fsck.log_read_ahead) instead of the whole logs.

A location's position is just past its record's size prefix, as BookKeeper's entry logger returns it.
Bounded by ``limit`` offsets in all, given to the logs in walk order while they fit; a log past the
limit, or dense (its indexed records less than SPARSE_RECORD_BYTES apart on average: nearly every page
holds a header), gets none. Entries the index does not hold are walked all the same: their pages are
read as the walk meets them.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from bkdisk.diskio.distinct import distinct
from bkdisk.entrylogs.walk import SPARSE_RECORD_BYTES
from bkdisk.formats import index as fi
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE

CHUNK = 1 << 20   # locations looked at at once
INDEX_HINT_SHARE = 1 / 32   # of --memory-limit: the offsets held for the logs not yet asked for
INDEX_HINT_BYTES = 8        # an offset held (int64)


def index_offsets(locations, logs: Sequence[tuple[str, int, int]], limit: int) -> dict[str, np.ndarray]:
    """Each of ``logs`` ((path, log id, size), in walk order) that is sparse and fits: the sorted record
    offsets of its indexed entries. ``locations``: LOCATION_DTYPE rows (an array or a ChunkedArray)."""
    if not logs or not len(locations):
        return {}
    ids = np.array([i for _p, i, _n in logs], np.int64)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]

    def rows_of(c) -> tuple[np.ndarray, np.ndarray]:
        """The chunk's rows whose log is one of ``logs``, and that log's place among them."""
        at = np.searchsorted(sorted_ids, c["log"].astype(np.int64))
        hit = at < len(sorted_ids)
        hit[hit] = sorted_ids[at[hit]] == c["log"][hit]
        return np.flatnonzero(hit), order[at[hit]]

    counts = np.zeros(len(logs), np.int64)
    for k0 in range(0, len(locations), CHUNK):
        _rows, which = rows_of(locations[k0:k0 + CHUNK])
        counts += np.bincount(which, minlength=len(logs))
    chosen = np.zeros(len(logs), bool)
    room = limit
    for k, (_p, _i, size) in enumerate(logs):
        n = int(counts[k])
        if n and n * SPARSE_RECORD_BYTES <= size and n <= room:
            chosen[k], room = True, room - n
    if not chosen.any():
        return {}
    # Each location again as BookKeeper packs one, with the log's place for its id: sorted in place, they
    # are the chosen logs' positions in order.
    parts = []
    for k0 in range(0, len(locations), CHUNK):
        c = locations[k0:k0 + CHUNK]
        rows, which = rows_of(c)
        keep = chosen[which]
        parts.append(fi.join_locations(which[keep], c["pos"][rows[keep]]))
    keys = np.concatenate(parts)
    del parts
    keys.sort()
    cuts = np.searchsorted(fi.location_logs(keys), np.arange(len(logs) + 1))
    return {logs[k][0]: distinct(fi.location_positions(keys[cuts[k]:cuts[k + 1]]).astype(np.int64) - SIZE_PREFIX_SIZE)
            for k in np.flatnonzero(chosen).tolist()}


class IndexHints:
    """``index_offsets`` of the check's index walk for ``logs``, made once when the asking thread first
    needs them: it waits for the walk, which pass 1 makes on the passes' thread (``give``)."""

    def __init__(self, logs: Sequence[tuple[str, int, int]], limit: int):
        self.logs, self.limit = logs, limit
        self._walked = threading.Event()
        self._locations = None
        self._offsets: dict[str, np.ndarray] | None = None

    def give(self, locations) -> None:
        """The index walk is done: its locations (None: it failed, no offsets from it)."""
        self._locations = locations
        self._walked.set()

    def of(self, path: str, stopped: Callable[[], bool]) -> np.ndarray | None:
        """``path``'s offsets (given once: a log is walked once), None when it has none or the check stopped."""
        while not self._walked.wait(0.05):
            if stopped():
                return None
        if self._offsets is None:
            locs, self._locations = self._locations, None
            self._offsets = {} if locs is None else index_offsets(locs, self.logs, self.limit)
        return self._offsets.pop(path, None)
