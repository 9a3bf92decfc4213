"""Copies of a ledger's entries that no disk's index holds, found in the entry logs of the disks the
ledger's metadata places them on (read-ledger): an ``.idx`` cut at a slot boundary, or keys a
``locations`` database lost, reads as an index of fewer entries, and only the ensembles tell that the
disk was given the rest.

BookKeeper's client writes entry ``e`` of a segment of ``E`` bookies to the ``Qw`` from index ``e mod E``
on (its round-robin distribution schedule: salvage_placement.write_set); any ``E`` ids in a row give
every index one. A disk is searched (every entry log
scanned once, this ledger's locations kept: bookie.ledger_copies.scanned_locations) the first time a
run of ids no index holds contains one placed on it; its copies then serve every such id."""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from bkdisk.bookie.ledger_copies import Disk, Location, scanned_locations
from bkdisk.bookie.salvage_placement import write_set
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata


def placed_disks(bookies: dict[int, str], md: LedgerMetadata, a: int, b: int) -> dict[int, tuple[int, int]]:
    """The disks (number -> bookie id in ``bookies``) to which ``md`` gives some id of ``a``..``b``, each with
    the first and last id of the run in a segment that places one there."""
    out: dict[int, tuple[int, int]] = {}
    starts = sorted(f for f, _m in md.ensembles)
    for k, f in enumerate(starts):
        lo, hi = max(a, f), min(b, starts[k + 1] - 1 if k + 1 < len(starts) else b)
        if lo > hi:
            continue
        members = md.ensemble_at(f)
        size = len(members)
        for n, bid in bookies.items():
            slots = [i for i, m in enumerate(members) if m == bid]
            if any(hi - lo + 1 >= size or any(i in write_set(e, size, md.write_quorum) for e in range(lo, hi + 1))
                   for i in slots):
                was = out.get(n)
                out[n] = (lo, hi) if was is None else (min(was[0], lo), max(was[1], hi))
    return out


@dataclass
class UnindexedSearch:
    """The disks read through their index (not ``skip``: those already scanned) searched as runs of ids no
    index holds ask; ``said`` gets (disk root, first id it was searched for) once per disk searched."""

    disks: list[Disk]
    lid: LedgerId
    md: LedgerMetadata
    said: list[tuple[str, int]]
    skip: set[int] = field(default_factory=set)
    found: dict[int, list[Location]] = field(default_factory=dict)
    ids: dict[int, list[int]] = field(default_factory=dict)

    def copies(self, a: int, b: int) -> dict[int, list[tuple[int, str, int]]]:
        """Per id of ``a``..``b`` found in a searched disk's logs: its (disk number, log path, position)."""
        if a > b:
            return {}
        unsearched = {n: d.bookie_id for n, d in enumerate(self.disks) if n not in self.skip and n not in self.found}
        for n, (lo, _hi) in sorted(placed_disks(unsearched, self.md, a, b).items()):
            self.found[n] = scanned_locations(self.disks[n], self.lid)
            self.ids[n] = [loc[0] for loc in self.found[n]]
            self.said.append((self.disks[n].root, lo))
        out: dict[int, list[tuple[int, str, int]]] = {}
        for n, locs in self.found.items():
            ids = self.ids[n]
            for eid, path, pos in locs[bisect_left(ids, a):bisect_right(ids, b)]:
                out.setdefault(eid, []).append((n, path, pos))
        return out
