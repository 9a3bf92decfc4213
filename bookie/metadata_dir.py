"""A folder of ledger metadata files serialized as BookKeeper does, one per ledger, and the digest
plan (type and password per ledger) it gives the scanners."""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from bkdisk.diskio.mapped import DiskError, read_bytes
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.formats.metadata import parse_metadata

# Preference when a ledger has several files: the binary format first, as BookKeeper writes today.
SUFFIXES = (".bin", ".txt", ".v1.txt")

T = TypeVar("T")
R = TypeVar("R")


# A ledger's file name: 1 to 32 lower-case hex digits, then a suffix of SUFFIXES.
_FILE_NAME = re.compile(r"([0-9a-f]{1,32})(\.bin|\.v1\.txt|\.txt)")
_RANK = {suf: rank for rank, suf in enumerate(SUFFIXES)}
LISTED_BATCH = 1 << 20   # ledger ids of a listing compared at once


def ledger_of_file(name: str) -> tuple[LedgerId, int] | None:
    """(ledger, preference rank) a metadata file name stands for, or None."""
    m = _FILE_NAME.fullmatch(name)
    if m is None:
        return None
    stem, rank = m.group(1), _RANK[m.group(2)]
    if len(stem) == 32:
        return LedgerId.from_qualified_name(stem), rank
    value = int(stem, 16)
    # 17 to 31 digits above 2^64 - 1 name no ledger (scoped ledgers take all 32 digits)
    return (LedgerId(0, value), rank) if value >> 64 == 0 else None


def metadata_names(folder: str, exact: bool = True) -> Iterator[str]:
    """The names of ``folder`` that name a ledger's metadata file, as the folder lists them (streamed:
    a folder of millions of ledgers is never held as a list). ``exact`` False: the names of that form,
    without the ledger's id (one above 2^64 passes; its reader, ``read_metadata_files``, drops it)."""
    named = ledger_of_file if exact else _FILE_NAME.fullmatch
    try:
        it = os.scandir(folder)
    except OSError as e:
        raise DiskError(folder, f"cannot list the metadata folder ({e.strerror})") from None
    with it:
        for entry in it:
            if named(entry.name) is not None:
                yield entry.name


def preferred_file(folder: str, name: str, rank: int | None = None) -> bool:
    """Whether ``name`` is the file its ledger is read from: no file of a format preferred to its own
    (``.bin`` before ``.txt`` before ``.v1.txt``) exists beside it. ``rank``: its format's rank, when
    the caller has it from ``ledger_of_file`` already."""
    if rank is None:
        found = ledger_of_file(name)
        assert found is not None, f"{name} is named as a metadata file"
        rank = found[1]
    return _preferred(folder, name, rank)


def _preferred(folder: str, name: str, rank: int) -> bool:
    stem = name[: -len(SUFFIXES[rank])]
    return not any(os.path.lexists(os.path.join(folder, stem + suf)) for suf in SUFFIXES[:rank])


def read_metadata_files(folder: str, names: Iterable[str], threads: int = 1
                        ) -> Iterator[tuple[LedgerId, LedgerMetadata | FormatError | DiskError]]:
    """Each ledger of ``names`` (files of ``folder``) that is read from that file, parsed; a file that
    cannot be read or parsed comes back as its error. ``threads`` > 1 reads the files on that many
    threads (``_threaded``)."""
    def fetch(n: str) -> tuple[LedgerId, str, bytes | DiskError] | None:
        got = ledger_of_file(n)
        if got is None or not _preferred(folder, n, got[1]):
            return None
        p = os.path.join(folder, n)
        return got[0], p, _read(p)

    for f in _threaded(fetch, names, threads):
        if f is None:
            continue
        lid, p, data = f
        try:
            yield lid, data if isinstance(data, DiskError) else parse_metadata(data, path=p)
        except FormatError as e:
            yield lid, e


def read_files(files: Iterable[tuple[LedgerId, str]], threads: int = 1
               ) -> Iterator[tuple[LedgerId, str, bytes | DiskError]]:
    """Each (ledger, path) of ``files`` with the file's bytes, or the DiskError reading it, in the
    order given; ``threads`` > 1 reads on that many threads (``_threaded``)."""
    return _threaded(lambda f: (f[0], f[1], _read(f[1])), files, threads)


def _read(path: str) -> bytes | DiskError:
    try:
        return read_bytes(path)
    except DiskError as e:
        return e


def _threaded(fn: Callable[[T], R], items: Iterable[T], threads: int) -> Iterator[R]:
    """``fn`` of each item, in order; ``threads`` > 1: on that many threads (a folder not in the page
    cache costs a device read a file; reads overlap, the caller's parsing does not), a thousand items
    at a time, each thread a slice of them (a future a file costs more than the read of a file in
    the page cache)."""
    if threads <= 1:
        yield from map(fn, items)
        return
    from concurrent.futures import ThreadPoolExecutor
    from itertools import islice
    it = iter(items)
    with ThreadPoolExecutor(threads) as pool:
        while batch := list(islice(it, 1000)):
            step = -(-len(batch) // threads)
            slices = (batch[i:i + step] for i in range(0, len(batch), step))
            for part in pool.map(lambda s: list(map(fn, s)), slices):
                yield from part


def file_stem(lid: LedgerId) -> str:
    """A ledger's metadata file name before its suffix: the hex id, or the 32-digit qualified name of
    a scoped (BP-35) ledger."""
    return lid.qualified_name if lid.scope else f"{lid.ledger:x}"


def read_ledger_file(folder: str, lid: LedgerId) -> LedgerMetadata | None:
    """One ledger's metadata from ``folder`` (its preferred file), None when it has none; raises the
    file's error when it cannot be read or parsed."""
    stem = file_stem(lid)
    for suf in SUFFIXES:
        p = os.path.join(folder, stem + suf)
        if os.path.lexists(p):
            return parse_metadata(read_bytes(p), path=p)
    return None


def places_entries_on(m: LedgerMetadata, bookie: str) -> bool:
    """Whether metadata may place entries on ``bookie``: it is in an ensemble that holds entries (a
    ledger not closed: any ensemble). The ledgers a bookie's check iterates."""
    ens = m.ensembles
    for first, members in ens:
        if bookie in members and (not m.is_closed or first <= m.last_entry_id):
            return True
    return False


def kept_for(m: LedgerMetadata, bookie: str | None) -> bool:
    """Whether a bookie's view of the metadata (a folder's, the service's) keeps ledger ``m``: one that
    may place entries on it; every ledger for a bookie not known by its cookie (None): any may be its."""
    return bookie is None or places_entries_on(m, bookie)


def over_replicated(m: LedgerMetadata, bookie: str) -> bool:
    """Whether ``bookie``, holding this ledger, is no longer meant to: the ledger is closed (an open
    one's ensemble may change back) and ``bookie`` is in none of its ensembles. BookKeeper's
    ScanAndCompareGarbageCollector removes such a ledger from the bookie (removeOverReplicatedledgers,
    isNotBookieIncludedInLedgerEnsembles)."""
    return m.is_closed and all(bookie not in members for _first, members in m.ensembles)


class MetadataView(Mapping):
    """Ledger metadata as one bookie's check needs it, without every ledger in memory: the ledgers
    that place entries on the bookie are held (``near``; iterating the view gives those), any other
    ledger is looked up on demand (``lookup``: its metadata, or None when it has none) and kept.
    ``listed`` streams the (scope, ledger) of every ledger that has metadata, where the view can tell
    them: ``known`` then answers for many ledgers at once, none of them looked up or kept."""

    def __init__(self, near: Mapping[LedgerId, LedgerMetadata],
                 lookup: Callable[[LedgerId], LedgerMetadata | None] | None = None,
                 listed: Callable[[], Iterator[tuple[int, int]]] | None = None):
        self.near, self.lookup, self.listed = near, lookup, listed
        self._far: dict[LedgerId, LedgerMetadata | None] = {}

    def known(self, scope, ledger):
        """Per (scope, ledger) row (numpy arrays), whether the ledger has metadata, from one streamed
        listing of those that have, a batch at a time; None when the view cannot list them (then ask
        each: ``in``). A bookie whose metadata is lost is not asked for a million ledgers one by one."""
        if self.listed is None:
            return None
        import itertools

        import numpy as np

        from bkdisk.diskio.distinct import pair_members
        out = np.zeros(len(ledger), bool)
        it = self.listed()
        pair = np.dtype([("scope", np.uint64), ("ledger", np.uint64)])
        while len(batch := np.fromiter(itertools.islice(it, LISTED_BATCH), pair)):
            out |= pair_members(scope, ledger, batch["scope"], batch["ledger"])
        return out

    def key_columns(self):
        """The held ledgers' (scope, ledger) columns where they are held as columns, else None."""
        columns = getattr(self.near, "key_columns", None)
        return None if columns is None else columns()

    def _get(self, lid: LedgerId) -> LedgerMetadata | None:
        m = self.near.get(lid)
        if m is not None or self.lookup is None:
            return m
        if lid not in self._far:
            self._far[lid] = self.lookup(lid)
        return self._far[lid]

    def __getitem__(self, lid: LedgerId) -> LedgerMetadata:
        m = self._get(lid)
        if m is None:
            raise KeyError(lid)
        return m

    def __contains__(self, lid: object) -> bool:
        return isinstance(lid, LedgerId) and self._get(lid) is not None

    def __iter__(self) -> Iterator[LedgerId]:
        return iter(self.near)

    def __len__(self) -> int:
        return len(self.near)


def each_metadata(md: Mapping[LedgerId, LedgerMetadata], scope, ledger, batch: int = 1 << 16
                  ) -> Iterator[LedgerMetadata | None]:
    """``md.get`` of each (scope, ledger) row (uint64 arrays), in order: of a view whose ledgers are held
    as columns, those found a batch at a time (a binary search each, no lookup of its own), the others
    asked one by one."""
    from bkdisk.bookie.near_ledgers import NearLedgers
    near = md.near if isinstance(md, MetadataView) else md
    if not isinstance(near, NearLedgers):   # (the ids made Python values a batch at a time, as below)
        for lo in range(0, len(ledger), batch):
            for s, led in zip(scope[lo:lo + batch].tolist(), ledger[lo:lo + batch].tolist()):
                yield md.get(LedgerId(s, led))
        return
    at = near.positions(scope, ledger)
    for lo in range(0, len(at), batch):
        part = at[lo:lo + batch]
        found = iter(near.metadata_at(part[part >= 0]))
        for i, s, led in zip(part.tolist(), scope[lo:lo + batch].tolist(), ledger[lo:lo + batch].tolist()):
            yield next(found) if i >= 0 else md.get(LedgerId(s, led))


def bookie_metadata_dir(folder: str, bookie: str | None) -> tuple[MetadataView, list[FormatError | DiskError]]:
    """The folder as one bookie's check reads it: streamed once, keeping only the ledgers ``kept_for``
    ``bookie``, any other ledger read from its file when asked. Peak memory grows with the bookie's
    ledgers, not the folder's."""
    # (numpy: loaded by a command that reads metadata)
    from bkdisk.bookie.near_ledgers import NearLedgers
    near = NearLedgers()
    errors: list[FormatError | DiskError] = []
    for lid, m in read_metadata_files(folder, metadata_names(folder), threads=8):
        if isinstance(m, Exception):
            errors.append(m)
        elif kept_for(m, bookie):
            near.add(lid, m)

    def lookup(lid: LedgerId) -> LedgerMetadata | None:
        try:
            return read_ledger_file(folder, lid)
        except (FormatError, DiskError):
            return None   # said once already, among the errors of the streamed read

    def listed() -> Iterator[tuple[int, int]]:
        for n in metadata_names(folder):
            got = ledger_of_file(n)
            if got is not None:
                yield got[0].scope, got[0].ledger
    return MetadataView(near, lookup, listed), errors


def load_metadata_dir(folder: str) -> tuple[dict[LedgerId, LedgerMetadata], list[FormatError | DiskError]]:
    """Parse every metadata file in ``folder``; unreadable files come back as errors, not exceptions."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as e:
        raise DiskError(folder, f"cannot list the metadata folder ({e.strerror})") from None
    best: dict[LedgerId, tuple[int, str]] = {}
    for n in names:
        got = ledger_of_file(n)
        if got is None:
            continue
        lid, rank = got
        if lid not in best or rank < best[lid][0]:
            best[lid] = (rank, n)
    out: dict[LedgerId, LedgerMetadata] = {}
    errors: list[FormatError | DiskError] = []
    for lid, (_rank, n) in sorted(best.items()):
        p = os.path.join(folder, n)
        try:
            out[lid] = parse_metadata(read_bytes(p), path=p)
        except (FormatError, DiskError) as e:
            errors.append(e)
    return out, errors


def digest_plan(md: Mapping[LedgerId, LedgerMetadata]):
    """The scanners' DigestPlan: digest type and password per ledger where the metadata has them;
    the scanner sniffs the rest. Ledgers held as columns (NearLedgers) give columns, a value per shape."""
    from bkdisk.bookie.near_ledgers import NearLedgers
    from bkdisk.digests.plan import DigestPlan
    from bkdisk.formats.digests import DigestType
    near = md.near if isinstance(md, MetadataView) else md
    if isinstance(near, NearLedgers):
        types = near.per_shape(lambda m: None if m.digest_type is None else DigestType.parse(m.digest_type))
        return DigestPlan(known=_per_ledger(near, types), passwords=_per_ledger(near, near.per_shape(
            lambda m: m.password)))
    known = {(lid.scope, lid.ledger): DigestType.parse(m.digest_type) for lid, m in md.items()
             if m.digest_type is not None}
    passwords = {(lid.scope, lid.ledger): m.password for lid, m in md.items() if m.password is not None}
    return DigestPlan(known=known, passwords=passwords)


def _per_ledger(near, per_shape: list):
    """Each ledger's value of ``per_shape`` (a value per shape; None: none) in NearLedgers ``near``, as
    a LedgerValues."""
    import numpy as np

    from bkdisk.digests.ledger_values import LedgerValues
    numbers: dict = {}
    of_shape = np.array([-1 if v is None else numbers.setdefault(v, len(numbers)) for v in per_shape], np.int64)
    number = of_shape[near.shape] if len(of_shape) else np.zeros(0, np.int64)
    keep = number >= 0
    return LedgerValues(near.scope[keep], near.ledger[keep], number[keep], list(numbers))
