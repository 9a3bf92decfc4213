"""A cluster of bookies on disk: ledgers striped over ensembles as a BookKeeper client places them,
each bookie written by bookie/writer.py, plus the matching serialized ledger metadata.

Placement (BookKeeper's RoundRobinDistributionSchedule, LedgerMetadataImpl.getEnsembleAt): entry
``e`` goes to the bookies at positions ``(e + i) % E`` for ``i < Qw`` of the ensemble whose first
entry id is the greatest one ``<= e``. The ack quorum does not change placement.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace

from bkdisk.bookie.model import BookieSpec, LedgerSpec, WrittenBookie
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats.digests import DigestType
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.formats.metadata import serialize_metadata

Ensembles = tuple[tuple[int, tuple[str, ...]], ...]   # (first entry id, bookie ids in position order)


def ensemble_for(ensembles: Ensembles, entry_id: int) -> tuple[str, ...]:
    """The ensemble in force for ``entry_id``: the greatest first entry id <= ``entry_id``."""
    best = None
    for first, members in ensembles:
        if first <= entry_id and (best is None or first >= best[0]):
            best = (first, members)
    if best is None:
        raise KeyError(f"no ensemble covers entry {entry_id}")
    return best[1]


def write_set(ensembles: Ensembles, write_quorum: int, entry_id: int) -> tuple[str, ...]:
    """The bookies of entry ``entry_id``'s write set, in write-set order (position ``e % E`` first)."""
    members = ensemble_for(ensembles, entry_id)
    size = len(members)
    return tuple(members[(entry_id + i) % size] for i in range(write_quorum))


@dataclass
class ClusterLedger:
    """One ledger as its client wrote it to the cluster."""

    ledger_id: int
    payloads: list[bytes]
    ensembles: Ensembles
    write_quorum: int
    ack_quorum: int
    digest_type: DigestType = DigestType.CRC32C
    password: bytes = b""
    scope_id: int = 0
    state: str = "CLOSED"           # OPEN and IN_RECOVERY metadata keep lastEntryId -1, length 0

    @property
    def lid(self) -> LedgerId:
        return LedgerId(self.scope_id, self.ledger_id)

    @property
    def ensemble_size(self) -> int:
        return len(self.ensembles[0][1])

    def placement(self) -> dict[int, tuple[str, ...]]:
        return {e: write_set(self.ensembles, self.write_quorum, e) for e in range(len(self.payloads))}

    def metadata(self, ctime: int = 1700000000000) -> LedgerMetadata:
        closed = self.state == "CLOSED"
        return LedgerMetadata(format_version=3, write_quorum=self.write_quorum, ensemble_size=self.ensemble_size,
                              ack_quorum=self.ack_quorum,
                              length=sum(len(p) for p in self.payloads) if closed else 0,
                              last_entry_id=len(self.payloads) - 1 if closed else -1, state=self.state,
                              ensembles=self.ensembles, digest_type=self.digest_type.name, password=self.password,
                              ctime=ctime + self.ledger_id % 1000, custom_metadata=(("application", b"bkdisk"),))


@dataclass
class ClusterSpec:
    """Bookies (a BookieSpec each, its ``ledgers`` left empty: the cluster fills them) and ledgers."""

    bookies: list[BookieSpec]
    ledgers: list[ClusterLedger]


@dataclass
class WrittenCluster:
    root: str
    metadata_dir: str
    bookie_roots: dict[str, str]                              # bookie id -> its root
    bookies: dict[str, WrittenBookie]
    placement: dict[tuple[LedgerId, int], tuple[str, ...]] = field(default_factory=dict)


def metadata_file_name(lid: LedgerId) -> str:
    """``<hex id>.bin``, or the 32-digit qualified name for a scoped (BP-35) ledger."""
    return (f"{lid.ledger:x}" if lid.scope == 0 else lid.qualified_name) + ".bin"


def write_cluster(spec: ClusterSpec, root: str) -> WrittenCluster:
    """Write every bookie under ``root/bookies/<id>`` and the metadata under ``root/metadata``."""
    ids = [b.bookie_id for b in spec.bookies]
    if len(set(ids)) != len(ids):
        raise ValueError("bookie ids must be distinct")
    held: dict[str, list[LedgerSpec]] = {b: [] for b in ids}
    placement: dict[tuple[LedgerId, int], tuple[str, ...]] = {}
    for l in spec.ledgers:
        unknown = {m for _f, ms in l.ensembles for m in ms} - set(ids)
        if unknown:
            raise ValueError(f"ledger {l.lid}: ensemble names bookies not in the cluster: {sorted(unknown)}")
        where = l.placement()
        placement.update({(l.lid, e): ws for e, ws in where.items()})
        after, total = [], 0
        for p in l.payloads:
            total += len(p)
            after.append(total)
        last_members = set(l.ensembles[-1][1])
        for b in ids:
            mine = [e for e in range(len(l.payloads)) if b in where[e]]
            named = any(b in ms for _f, ms in l.ensembles)
            if not mine and not named:
                continue
            # Recovery fences every bookie of the last ensemble.
            fenced = l.state == "IN_RECOVERY" and b in last_members
            held[b].append(LedgerSpec(l.ledger_id, [l.payloads[e] for e in mine], l.digest_type, l.password,
                                      l.scope_id, fenced=fenced, entry_ids=mine, lengths=[after[e] for e in mine]))
    roots, written = {}, {}
    for bookie in spec.bookies:
        broot = os.path.join(root, "bookies", bookie.bookie_id)
        roots[bookie.bookie_id] = broot
        written[bookie.bookie_id] = write_bookie(replace(bookie, ledgers=held[bookie.bookie_id]), broot)
    md_dir = os.path.join(root, "metadata")
    os.makedirs(md_dir, exist_ok=True)
    for l in spec.ledgers:
        with open(os.path.join(md_dir, metadata_file_name(l.lid)), "wb") as f:
            f.write(serialize_metadata(l.metadata()))
    return WrittenCluster(root, md_dir, roots, written, placement)


def sample_cluster(bookies: int = 4, *, seed: int = 11, entries: int = 40, max_payload: int = 3000,
                   ledgers: int = 6, db_bookies: int = 0) -> ClusterSpec:
    """A cluster for tests, the demo and the benchmark: mixed E/Qw/Qa, an ensemble change per ledger
    when a spare bookie exists, scope 0 and scoped ledgers, every digest type, Interleaved-like and
    Sorted-like write orders, journal formats 5 and 6, one OPEN and one IN_RECOVERY ledger. The last
    ``db_bookies`` bookies are DbLedgerStorage bookies (one ledger dir), which no scoped ledger's
    ensemble names (DbLedgerStorage keys ledgers by 64-bit ids)."""
    if bookies < 3 or bookies - db_bookies < 3:
        raise ValueError("a sample cluster needs at least 3 bookies, 3 of them not DbLedgerStorage")
    rnd = random.Random(seed)
    ids = [f"bk-{i + 1}.rack-{'ab'[i % 2]}" for i in range(bookies)]
    wide = ids[:bookies - db_bookies]   # the bookies a scoped ledger may use
    specs = []
    for i, b in enumerate(ids):
        v6 = i % 2 == 0
        db = b not in wide
        specs.append(BookieSpec([], bookie_id=b, instance_id="bkdisk-sample-cluster", journal_version=6 if v6 else 5,
                                index_version=1 if v6 else 0, interleave=v6,
                                ledger_dirs=["ledgers0", "ledgers1"] if i % 3 == 0 and not db else ["ledgers"],
                                entry_log_size_limit=256 * 1024, first_journal_id=0x1A200000000 + i,
                                storage="rocksdb" if db else "index-files"))
    digests = [DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC, DigestType.DUMMY]
    states = ["CLOSED"] * ledgers
    if ledgers >= 3:
        states[1], states[2] = "OPEN", "IN_RECOVERY"
    out = []
    for k in range(ledgers):
        e_size = min(3, bookies) if k % 2 == 0 else min(bookies, 4) if bookies > 3 else 2
        qw = e_size if k % 3 == 0 else max(2, e_size - 1)
        scope = 0 if k % 3 != 2 else 0x5EED0000CAFE + k
        pool = ids if scope == 0 else wide
        e_size = min(e_size, len(pool))
        qw = min(qw, e_size)
        members = tuple(rnd.sample(pool, e_size))
        ens = [(0, members)]
        spare = [b for b in pool if b not in members]
        if spare and entries >= 4:
            # One bookie replaced at an entry boundary, as LedgerHandle's ensemble change does.
            swap_at, pos = rnd.randint(1, entries - 2), rnd.randrange(e_size)
            changed = list(members)
            changed[pos] = rnd.choice(spare)
            ens.append((swap_at, tuple(changed)))
        out.append(ClusterLedger(0x10 + k * 0x111, [rnd.randbytes(rnd.randint(0, max_payload)) for _ in range(entries)],
                                 tuple(ens), qw, max(1, qw - 1), digests[k % 4], f"pw-{k}".encode(), scope,
                                 states[k]))
    return ClusterSpec(specs, out)
