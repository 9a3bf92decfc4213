"""Where the audit gets ledger metadata: a folder of serialized metadata or the ledger metadata
service, read in parallel by Spark tasks, never whole by one process.

The driver cuts the ledgers into work units without holding them: it streams the folder's listing
(or the service's ranges of ledger ids) into chunk files of ``CHUNK`` ledgers under a scratch folder
every executor sees. Each task reads its chunk's ledgers (``read``), and a disk's task looks up a
ledger it holds that metadata does not place on it (``lookup``). A source is pickled to the tasks.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import NamedTuple, Protocol

import numpy as np

from bkdisk.bookie.metadata_dir import load_metadata_dir, metadata_names, read_ledger_file, read_metadata_files
from bkdisk.diskio.mapped import DiskError
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata

# The metadata service's client (gRPC, the optional extra 'service') loads in the methods of the
# service source only: a folder's audit runs without it.

CHUNK = 50_000   # ledgers a metadata task reads: a few MiB of metadata, a few seconds of parsing
READ_THREADS = 4   # a task's concurrent file reads: a folder out of the page cache is a read a file

Read = tuple[LedgerId, "LedgerMetadata | Exception"]


class ClosedEmpty(NamedTuple):
    """Ledgers found CLOSED with no ensemble holding entries without building their metadata
    (audit/metadata_batch.py): their keys (int64, as Java's longs) and the bookies they name."""

    scopes: np.ndarray
    ledgers: np.ndarray
    bookies: set[str]


Batch = tuple[ClosedEmpty, Iterable[Read]]


def _signed(values: Iterable[int], n: int) -> np.ndarray:
    return np.fromiter(values, np.uint64, n).view(np.int64)


class MetadataSource(Protocol):
    units_per_chunk: int   # units a metadata task reads

    def describe(self) -> str:
        """Where the metadata came from, for the report."""

    def check(self) -> None:
        """Raise the layer's error when the source cannot be read at all (before Spark starts)."""

    def units(self) -> Iterator[str]:
        """Work units as lines of text (driver side, streamed), each a few ledgers at most."""

    def read_batches(self, units: list[str]) -> Iterator[Batch]:
        """The ledgers of ``units`` (in a task) in batches: those found closed and empty without
        building their metadata, then the others as ``read`` gives them (in their order)."""

    def read(self, units: list[str]) -> Iterator[Read]:
        """The ledgers of ``units`` (in a task): each with its metadata, or the error reading it."""

    def lookup(self, lid: LedgerId) -> LedgerMetadata | None:
        """One ledger's metadata (in a task), None when metadata has none."""


def write_chunks(source: MetadataSource, folder: str) -> list[str]:
    """The source's units in files of at most ``source.units_per_chunk`` each under ``folder``; the paths."""
    os.makedirs(folder, exist_ok=True)
    per_chunk = source.units_per_chunk
    paths: list[str] = []
    f, n = None, 0
    try:
        for u in source.units():
            if f is None or n == per_chunk:
                if f is not None:
                    f.close()
                paths.append(os.path.join(folder, f"chunk-{len(paths):06d}.txt"))
                f, n = open(paths[-1], "w", encoding="utf-8"), 0
            f.write(u + "\n")
            n += 1
    finally:
        if f is not None:
            f.close()
    return paths


def read_chunk(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


class MetadataDirSource:
    """A folder of ``<hex id>.bin``/``.txt`` files as LedgerMetadataSerDe writes them. Every executor
    reads it at the same path (as it reads --out)."""

    units_per_chunk = CHUNK   # a unit is a file name

    def __init__(self, folder: str, *, strict: bool = True):
        self.folder, self.strict = os.path.abspath(folder), strict
        self.errors: list[FormatError | DiskError] = []

    def describe(self) -> str:
        return f"metadata folder {self.folder}"

    def check(self) -> None:
        if not os.path.isdir(self.folder):
            raise DiskError(self.folder, "cannot list the metadata folder (not a folder)")
        with os.scandir(self.folder):
            pass

    def units(self) -> Iterator[str]:
        return metadata_names(self.folder, exact=False)   # the tasks check each name's ledger id

    def read_batches(self, units: list[str]) -> Iterator[Batch]:
        """One batch: the chunk's files the kernel takes, then the rest through the full parser."""
        from bkdisk.audit.metadata_batch import closed_empty_ledgers
        taken, named, rest = closed_empty_ledgers(self.folder, units)
        yield ClosedEmpty(np.zeros_like(taken), taken, named), self.read(rest)

    def read(self, units: list[str]) -> Iterator[Read]:
        return read_metadata_files(self.folder, units, threads=READ_THREADS)

    def lookup(self, lid: LedgerId) -> LedgerMetadata | None:
        try:
            return read_ledger_file(self.folder, lid)
        except (FormatError, DiskError):
            return None   # the metadata stage said it already

    def load(self) -> dict[LedgerId, LedgerMetadata]:
        """Every ledger in one dict (small folders: tests, scan-disk of a few ledgers)."""
        md, self.errors = load_metadata_dir(self.folder)
        if self.errors and self.strict:
            raise self.errors[0]
        return md


class MetadataServiceSource:
    """Ledger metadata through the ledger metadata service (``grpc://HOST:PORT``): the driver cuts
    the ledger ids into ranges, and each task reads its range with the service's streaming bulk
    read (ReadLedgers) as a thin client."""

    units_per_chunk = 1   # a unit is a range of CHUNK ledgers already

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0):
        from bkdisk.metaservice.client import service_target
        self.url, self.target = url, service_target(url)
        self.token, self.timeout = token, timeout

    def describe(self) -> str:
        return f"metadata service {self.url}"

    def _client(self):
        from bkdisk.metaservice.client import MetadataClient
        return MetadataClient(self.target, token=self.token, timeout=self.timeout)

    def check(self) -> None:
        c = self._client()
        try:
            next(iter(c.iterate(all_scopes=True)), None)
        finally:
            c.close()

    def units(self) -> Iterator[str]:
        """``start end``: ranges of 128-bit ledger ids of CHUNK ledgers each, tiling [0, 2^128) (a
        ledger created while the audit runs falls in one of them). Only ids cross to the driver."""
        c = self._client()
        try:
            start, n = 0, 0
            for scope, lid in c.iterate(all_scopes=True):
                if n == CHUNK:
                    key = LedgerId(scope, lid).value
                    yield f"{start} {key}"
                    start, n = key, 0
                n += 1
            yield f"{start} {1 << 128}"
        finally:
            c.close()

    def _pages(self, units: list[str]) -> Iterator[list]:
        """Each range with one streaming bulk read, in pages of a thousand ledgers."""
        c = self._client()
        try:
            for u in units:
                start, end = map(int, u.split())
                yield from c.read_ledgers(start, end, page_size=1000)
        finally:
            c.close()

    def _parsed(self, page) -> Iterator[Read]:
        from bkdisk.metaservice.channel import MetadataError
        for x in page:
            try:
                yield x.key, x.parse(f"{self.url}: ")
            except (MetadataError, FormatError) as exc:
                yield x.key, exc

    def read_batches(self, units: list[str]) -> Iterator[Batch]:
        """A batch a page of the bulk read: the page's ledgers the kernel takes, then the rest parsed."""
        from bkdisk.audit.metadata_batch import closed_empty_blobs
        for page in self._pages(units):
            take, named = closed_empty_blobs([x.serialized for x in page])
            taken = [x for x, t in zip(page, take, strict=True) if t]
            yield (ClosedEmpty(_signed((x.scope for x in taken), len(taken)),
                               _signed((x.ledger_id for x in taken), len(taken)), named),
                   self._parsed([x for x, t in zip(page, take, strict=True) if not t]))

    def read(self, units: list[str]) -> Iterator[Read]:
        for page in self._pages(units):
            yield from self._parsed(page)

    def lookup(self, lid: LedgerId) -> LedgerMetadata | None:
        from bkdisk.metaservice.bookie_view import read_ledger
        try:
            return read_ledger(self.target, lid, token=self.token, timeout=self.timeout)
        except FormatError:
            return None   # the metadata stage said it already

    def load(self) -> dict[LedgerId, LedgerMetadata]:
        """Every ledger in one dict (small stores: tests; one bulk read)."""
        c = self._client()
        try:
            return c.load_all()
        finally:
            c.close()


def open_source(spec: str) -> MetadataSource:
    """``grpc://HOST:PORT`` names the metadata service (its token from the driver's environment,
    carried to the tasks inside the source they are given, never in a Spark setting); anything else
    a metadata folder."""
    if spec.startswith("grpc://"):
        from bkdisk.metaservice.token_source import env_token
        return MetadataServiceSource(spec, token=env_token())
    return MetadataDirSource(spec)
