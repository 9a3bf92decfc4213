"""The entry ids a bookie's ledger storage holds, per ledger, as columns: what pass 7 compares with the
ledger metadata.

The rows come in parts (an index chunk's locations, a log's entries, the journal's pending adds), each
sorted once by (scope, ledger, entry) and kept as its column of entry ids. A ledger's ids are the runs
of it in those parts: a table of runs (part, start, length), ordered by ledger, says where they are. A
bookie of a million ledgers is then a few arrays, not a million small ones and their keys; a ledger's
ids are joined from its runs only when asked (``ids``), and its count of distinct ids is worked out for
every ledger at once (``counts``), a bounded batch of entries at a time."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bkdisk.diskio.distinct import distinct, run_heads, run_starts, span_indices
from bkdisk.diskio.sorted_search import pair_row
from bkdisk.formats.ids import LedgerId

COUNT_BATCH = 1 << 20   # entries of ledgers held in several runs counted at once
_RUN_DTYPES = {"scope": np.uint64, "ledger": np.uint64, "part": np.int64, "start": np.int64, "length": np.int64}


class HeldEntries:
    """Per ledger, sorted by (scope, ledger): its scope and id, and its runs of entry ids."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []   # per part: its entry ids, sorted and distinct per ledger
        self._runs: dict[str, list[np.ndarray]] = {k: [] for k in _RUN_DTYPES}
        self.scope: np.ndarray = np.zeros(0, np.uint64)
        self.ledger: np.ndarray = np.zeros(0, np.uint64)
        # per ledger: its first run (in run order), and how many it has
        self._first: np.ndarray = np.zeros(0, np.int64)
        self._nruns: np.ndarray = np.zeros(0, np.int64)
        # per run, ordered by ledger: its part, where in the part it starts, its length
        self._part: np.ndarray = np.zeros(0, np.int64)
        self._start: np.ndarray = np.zeros(0, np.int64)
        self._length: np.ndarray = np.zeros(0, np.int64)
        self._lengths: np.ndarray | None = None   # per ledger, its runs' lengths summed (_held_lengths)

    def add(self, scope: np.ndarray, ledger: np.ndarray, entry: np.ndarray) -> None:
        """Take in rows (one per entry held; repeats allowed)."""
        if not len(entry):
            return
        order = _ordered(scope, ledger, np.asarray(entry, np.int64))
        s, led, e = scope[order], ledger[order], np.asarray(entry, np.int64)[order]
        keep = run_heads(s, led, e)   # an entry held twice in one part (a log and the journal's pending) once
        s, led, e = s[keep], led[keep], e[keep]
        starts = run_starts(s, led)
        self._add_runs(s[starts], led[starts], len(self._parts), starts, np.diff(np.append(starts, len(e))))
        self._parts.append(e)

    def add_ledgers(self, scope: np.ndarray, ledger: np.ndarray) -> None:
        """Ledgers held with no entry (an index file that locates none)."""
        self._add_runs(scope, ledger, -1, np.zeros(len(ledger), np.int64), np.zeros(len(ledger), np.int64))

    def _add_runs(self, scope, ledger, part: int, start, length) -> None:
        for (k, dtype), v in zip(_RUN_DTYPES.items(), (scope, ledger, np.full(len(ledger), part), start, length)):
            self._runs[k].append(np.asarray(v, dtype))

    def finish(self) -> HeldEntries:
        """Order the runs by ledger (each ledger's in the order their parts came)."""
        self._lengths = None
        def column(k: str) -> np.ndarray:
            parts, self._runs[k] = self._runs[k], []
            return np.concatenate(parts) if parts else np.zeros(0, _RUN_DTYPES[k])

        scope, ledger = column("scope"), column("ledger")
        order = np.lexsort((ledger, scope))   # (stable: a ledger's runs stay in part order)
        scope, ledger = scope[order], ledger[order]
        self._first = run_starts(scope, ledger)
        self._nruns = np.diff(np.append(self._first, len(order)))
        self.scope, self.ledger = scope[self._first], ledger[self._first]
        del scope, ledger
        # one column at a time, each dropped as its ordered copy is made: a million ledgers' runs are
        # tens of megabytes a column
        self._part, self._start, self._length = (column(k)[order] for k in ("part", "start", "length"))
        return self

    def __len__(self) -> int:
        return len(self.ledger)

    def find(self, lid: LedgerId) -> int:
        """The ledger's row, or -1 when the bookie holds nothing of it."""
        return pair_row(self.scope, self.ledger, lid.scope, lid.ledger)

    def ids(self, i: int) -> np.ndarray:
        """The distinct entry ids held of ledger ``i``, ascending (int64)."""
        f, n = int(self._first[i]), int(self._nruns[i])
        got = [self._parts[p][a:a + m] for p, a, m in zip(self._part[f:f + n].tolist(), self._start[f:f + n].tolist(),
                                                           self._length[f:f + n].tolist()) if m]
        if not got:
            return np.zeros(0, np.int64)
        return got[0].copy() if len(got) == 1 else distinct(np.concatenate(got))

    def counts(self) -> np.ndarray:
        """Per ledger, how many distinct entry ids it holds."""
        out = np.zeros(len(self), np.int64)
        if not len(self):
            return out
        # A ledger's runs hold distinct ids each: one run is its count; the rest are counted by batch.
        runs_total = self._held_lengths()
        single = self._nruns == 1
        out[single] = runs_total[single]
        several = np.flatnonzero(~single)
        for batch in _batches(several, runs_total[several]):
            out[batch] = self._distinct_counts(batch)
        return out

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per ledger, the least and the greatest entry id it holds (0 and -1 for a ledger held with none)."""
        first_id = np.zeros(len(self._length), np.int64)
        last_id = np.zeros(len(self._length), np.int64)
        runs = np.flatnonzero(self._length > 0)
        runs = runs[np.argsort(self._part[runs], kind="stable")]   # a part's runs together
        part = self._part[runs]
        cuts = [*np.flatnonzero(run_heads(part)).tolist(), len(part)]
        for a, b in zip(cuts, cuts[1:]):   # (each run's ids ascend: its first and last are its bounds)
            rows, ids = runs[a:b], self._parts[int(part[a])]
            first_id[rows] = ids[self._start[rows]]
            last_id[rows] = ids[self._start[rows] + self._length[rows] - 1]
        if not len(self):
            return first_id, last_id
        some = self._length > 0
        lo = np.minimum.reduceat(np.where(some, first_id, np.iinfo(np.int64).max), self._first)
        hi = np.maximum.reduceat(np.where(some, last_id, np.iinfo(np.int64).min), self._first)
        none = lo > hi
        lo[none], hi[none] = 0, -1
        return lo, hi

    def batches(self, ledgers: np.ndarray) -> Iterator[np.ndarray]:
        """``ledgers`` (rows) in consecutive groups of about COUNT_BATCH ids held (a larger ledger alone)."""
        if not len(self):
            return iter(())
        return _batches(ledgers, self._held_lengths()[ledgers])

    def _held_lengths(self) -> np.ndarray:
        """Per ledger, the ids of its runs together (repeats counted): made once, for every batching."""
        if self._lengths is None:
            self._lengths = np.add.reduceat(self._length, self._first) if len(self._length) \
                else np.zeros(len(self), np.int64)
        return self._lengths

    def gathered(self, ledgers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ids held of ``ledgers`` (rows), each ledger's together as its runs one after another (each
        run ascending; an id in two runs is there twice), and ``cuts``: ledger i's are ``cuts[i]:cuts[i + 1]``."""
        nruns = self._nruns[ledgers]
        runs = span_indices(self._first[ledgers], nruns)
        length = self._length[runs]
        ends = np.cumsum(length)
        cuts = np.zeros(len(ledgers) + 1, np.int64)
        if len(runs):
            cuts[1:] = ends[np.cumsum(nruns) - 1]
        out = np.empty(int(cuts[-1]), np.int64)
        kept = np.flatnonzero(length > 0)
        kept = kept[np.argsort(self._part[runs[kept]], kind="stable")]   # a part's runs together
        part = self._part[runs[kept]]
        at, start, length = (ends - length)[kept], self._start[runs[kept]], length[kept]
        bounds = [*np.flatnonzero(run_heads(part)).tolist(), len(part)]
        for a, b in zip(bounds, bounds[1:]):
            out[span_indices(at[a:b], length[a:b])] = self._parts[int(part[a])][span_indices(start[a:b], length[a:b])]
        return out, cuts

    def _distinct_counts(self, ledgers: np.ndarray) -> np.ndarray:
        """Distinct ids of each of ``ledgers`` (rows): their ids ``gathered`` and sorted at once."""
        e, cuts = self.gathered(ledgers)
        k = np.repeat(np.arange(len(ledgers)), np.diff(cuts))
        order = np.lexsort((e, k))
        k, e = k[order], e[order]
        return np.bincount(k[run_heads(k, e)], minlength=len(ledgers)).astype(np.int64)



def _ordered(scope: np.ndarray, ledger: np.ndarray, entry: np.ndarray) -> np.ndarray:
    """The order of the rows by (scope, ledger, entry). Rows that come a ledger at a time, each ledger's
    entries ascending (an index chunk's: a file's locations, file after file) are ordered by their runs'
    keys alone; others are sorted whole."""
    heads = run_heads(scope, ledger)
    starts = np.flatnonzero(heads)
    if len(starts) < len(entry) // 4 and bool(np.all((entry[1:] > entry[:-1]) | heads[1:])):
        by_key = np.lexsort((ledger[starts], scope[starts]))
        ks, kl = scope[starts][by_key], ledger[starts][by_key]
        if not bool(np.any((ks[1:] == ks[:-1]) & (kl[1:] == kl[:-1]))):   # (each ledger one run)
            lengths = np.diff(np.append(starts, len(entry)))
            return span_indices(starts[by_key], lengths[by_key])
    return np.lexsort((entry, ledger, scope))


def _batches(rows: np.ndarray, sizes: np.ndarray) -> Iterator[np.ndarray]:
    """``rows`` in consecutive groups of about COUNT_BATCH entries (a larger ledger alone)."""
    if not len(rows):
        return
    ends = np.cumsum(sizes)
    lo = 0
    while lo < len(rows):
        base = ends[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + COUNT_BATCH, "right")))
        yield rows[lo:hi]
        lo = hi
