"""Which of a ledger's entries its ensembles place on one bookie, counted for many ledgers at once.

BookKeeper writes entry ``e`` of a segment (an ensemble, from its first entry to the entry before the
next one's) to the write quorum's ``Qw`` bookies from index ``e mod E`` of its ``E`` on, wrapping
(the client's round-robin distribution schedule): the bookie at index ``b`` is given ``e`` when
``(b - e) mod E < Qw``. Per ledger, up to its last entry: how many entries that gives this bookie
(``want``) and how many of those it holds (``held``); they are equal when it misses none."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.distinct import members

# A ledger whose last entry is past this is left to be compared id by id (the counts stay in int64).
LAST_COUNTED = 1 << 62
PLACED_BLOCK = 1 << 20   # entry ids of a segment made at once when a ledger is compared id by id
LISTED_MISSING = 1 << 20   # a ledger's missing ids listed at most (a finding says how many there are)


@dataclass
class Placement:
    """Per shape of a NearLedgers (``near.shapes``): its segments as rows ``lo[k]:hi[k]`` of ``first``
    (its first entry), ``size`` (E) and ``slot`` (the bookie's index in the ensemble, its first if twice;
    -1 when not in it); its write quorum; and whether its ledgers are counted here (``counted``: a
    shape BookKeeper's client loads, its segments starting at 0 or later in ascending order)."""
    lo: np.ndarray
    hi: np.ndarray
    first: np.ndarray
    size: np.ndarray
    slot: np.ndarray
    quorum: np.ndarray
    counted: np.ndarray

    @classmethod
    def of(cls, shapes: list, me: str) -> Placement:
        """``shapes``: per shape, a ledger of it (NearLedgers.per_shape's argument)."""
        from bkdisk.formats.ledger_metadata import bookkeeper_refusal
        cols: dict[str, list] = {k: [] for k in ("lo", "hi", "first", "size", "slot", "quorum", "counted")}
        for m in shapes:
            firsts = [f for f, _e in m.ensembles]
            cols["lo"].append(len(cols["first"]))
            for f, e in m.ensembles:
                cols["first"].append(f)
                cols["size"].append(max(len(e), 1))
                cols["slot"].append(e.index(me) if me in e else -1)
            cols["hi"].append(len(cols["first"]))
            cols["quorum"].append(m.write_quorum)
            cols["counted"].append(bookkeeper_refusal(m) is None and bool(firsts) and firsts[0] >= 0
                                   and all(a < b for a, b in zip(firsts, firsts[1:])))
        return cls(*(np.array(cols[k], bool if k == "counted" else np.int64) for k in cols))

    def wanted(self, shape: np.ndarray, last: np.ndarray) -> np.ndarray:
        """Per ledger (its shape, its last entry id): the entries placed on the bookie."""
        out = np.zeros(len(shape), np.int64)
        placed_wanted(np.asarray(shape, np.int64), np.asarray(last, np.int64), self.lo, self.hi, self.first,
                      self.size, self.slot, self.quorum, out)
        return out

    def held(self, ids: np.ndarray, cuts: np.ndarray, shape: np.ndarray, last: np.ndarray) -> np.ndarray:
        """Per ledger, of its ids ``ids[cuts[r]:cuts[r + 1]]`` (in any order, repeats allowed), the
        distinct ones placed on the bookie."""
        out = np.zeros(len(shape), np.int64)
        most = int(np.diff(cuts).max()) if len(shape) else 0
        placed_held(ids, cuts, np.asarray(shape, np.int64), np.asarray(last, np.int64), self.lo, self.hi,
                    self.first, self.size, self.slot, self.quorum, np.empty(most, np.int64), np.empty(most, np.int64),
                    out)
        return out


@kernel
def placed_wanted(shape, last, lo, hi, first, size, slot, quorum, out):
    """Per ledger, the entries 0..last its segments place on the bookie (a whole round of E entries
    places Qw of them, or E when Qw passes E)."""
    for r in range(shape.size):
        k = shape[r]
        n = 0
        for j in range(lo[k], hi[k]):
            s = first[j]
            end = first[j + 1] - 1 if j + 1 < hi[k] else last[r]
            b, e_size = slot[j], size[j]
            q = min(quorum[k], e_size)
            if b < 0 or end < s or q <= 0:
                continue
            span = end - s   # entries s .. s + span
            n += (span // e_size) * q
            for t in range(span % e_size + 1):   # (the part round after the whole ones)
                if (b - (s + t)) % e_size < q:
                    n += 1
        out[r] = n


@kernel
def placed_held(ids, cuts, shape, last, lo, hi, first, size, slot, quorum, one, two, out):
    """Per ledger, its distinct ids that a segment places on the bookie (the last segment's up to the
    ledger's last entry)."""
    for r in range(shape.size):
        own = ascending(ids, cuts[r], cuts[r + 1], one, two)
        k = shape[r]
        j = lo[k]
        n = 0
        for i in range(cuts[r + 1] - cuts[r]):
            e = own[i]
            if (i > 0 and e == own[i - 1]) or e < first[j]:
                continue
            while j + 1 < hi[k] and first[j + 1] <= e:
                j += 1
            if j + 1 == hi[k] and e > last[r]:   # (a segment before the last runs to the next one's first)
                break
            b, e_size = slot[j], size[j]
            if b >= 0 and (b - e) % e_size < min(quorum[k], e_size):
                n += 1
        out[r] = n


@inline_kernel
def ascending(ids, a, z, one, two):
    """``ids[a:z]`` in ascending order, in the first ``z - a`` rows of ``one`` or ``two`` (the one returned):
    its ascending runs (a ledger's runs of ids, one a part) merged two by two until one is left."""
    n = z - a
    for i in range(n):
        one[i] = ids[a + i]
    src, dst = one, two
    while True:
        runs = 0
        i = 0
        while i < n:
            m = i + 1
            while m < n and src[m - 1] <= src[m]:
                m += 1
            e = m + 1 if m < n else n
            while e < n and src[e - 1] <= src[e]:
                e += 1
            p, q, o = i, m, i   # (the runs [i, m) and [m, e) merged into dst[i:e])
            while p < m and q < e:
                if src[q] < src[p]:
                    dst[o] = src[q]
                    q += 1
                else:
                    dst[o] = src[p]
                    p += 1
                o += 1
            while p < m:
                dst[o] = src[p]
                p += 1
                o += 1
            while q < e:
                dst[o] = src[q]
                q += 1
                o += 1
            runs += 1
            i = e
        src, dst = dst, src
        if runs <= 1:
            return src


def expected_entries(md, me: str, last_entry: int) -> np.ndarray:
    """Entry ids 0..last_entry that the ensembles place on bookie ``me`` (round-robin write sets)."""
    out = list(placed_blocks(md, me, last_entry))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def placed_blocks(md, me: str, last_entry: int, block: int | None = None) -> Iterator[np.ndarray]:
    """``expected_entries`` in ascending blocks, each made of at most ``block`` ids of a segment
    (PLACED_BLOCK unless given). A write quorum of none places nothing."""
    block = PLACED_BLOCK if block is None else block
    segs = list(md.ensembles)
    for k, (first, ensemble) in enumerate(segs):
        end = segs[k + 1][0] - 1 if k + 1 < len(segs) else last_entry
        E, Qw = len(ensemble), md.write_quorum
        if end < first or me not in ensemble or Qw <= 0:
            continue
        b = ensemble.index(me)
        for lo in range(first, end + 1, block):
            e = np.arange(min(block, end - lo + 1), dtype=np.int64) + lo   # (no bound past int64 made)
            yield e[((b - e % E) % E) < Qw]   # (e mod E first: b - e wraps for e near -2^63)


def missing_listed(md, me: str, last_entry: int, have: np.ndarray, most: int | None = None
                   ) -> tuple[np.ndarray, bool]:
    """The ids placed on ``me`` that ``have`` (sorted, distinct) lacks, the first ``most`` of them, and
    whether they are all: a block of placed ids at a time, so that metadata of billions of entries costs
    the ids held and those listed, not its length. ``most``: LISTED_MISSING unless given."""
    most = max(1, LISTED_MISSING if most is None else most)
    out: list[np.ndarray] = []
    listed = 0
    for want in placed_blocks(md, me, last_entry):
        missing = want[~members(want, have)]   # (both sorted and distinct)
        out.append(missing)
        listed += len(missing)
        if listed > most:
            return np.concatenate(out)[:most], False
    return (np.concatenate(out) if out else np.zeros(0, np.int64)), True
