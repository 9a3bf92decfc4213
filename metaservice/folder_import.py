"""A folder of ledger metadata files put into the metadata service: streamed, created in batches.

The folder is listed as it is read (``os.scandir``, bookie/metadata_dir.py), never held as a list: a
first pass reads and parses every file (nothing is created when one does not parse, or holds what the
service refuses: ids out of range, quorums and ensembles BookKeeper cannot load) and keeps the
bytes it checked in a spool (metaservice/import_spool.py: one temporary file); a second sends them
``BATCH`` at a time as one CreateMany call each (create-only), from the spool in ledger id order
(ledgers that share ZooKeeper parent znodes go together, the SQLite store's key grows at its end),
or from the folder read again, in its listing order, when the spool could not be written. What
happened to each ledger is kept as ids only (16 bytes a ledger; the spool's index, 30), so that a
million ledgers cost the client tens of MiB, not their metadata.
"""
from __future__ import annotations

import os
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bkdisk.bookie.metadata_dir import SUFFIXES, ledger_of_file, metadata_names, preferred_file, read_files
from bkdisk.diskio.mapped import read_bytes
from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.metadata import parse_metadata
from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.client import MAX_BATCH_BYTES, MetadataClient
from bkdisk.metaservice.create_batches import create_many
from bkdisk.metaservice.import_spool import Spool
from bkdisk.metaservice.ledgers import check_consistent
from bkdisk.metaservice.store import BadRequest, check_ids

BATCH = 1000                 # ledgers per CreateMany (the service's MAX_BATCH)
IN_FLIGHT = 2               # CreateMany calls sent before the first is awaited
READ_THREADS = 4             # the checking pass's concurrent file reads (bookie.metadata_dir.read_files)
OUTCOMES = ("imported", "skipped", "overwritten", "unchanged")


class FolderImportError(BkdiskError):
    """The import stopped: a file that does not parse, a ledger that exists, a refused create."""


@dataclass
class Outcomes:
    """The ledgers of each outcome, as (scope, ledger) pairs in flat arrays of unsigned 64-bit ints:
    ``imported`` created, ``skipped`` existing (--skip-existing), ``overwritten`` existing with other
    metadata and written (--overwrite), ``unchanged`` existing with the same bytes (--overwrite: not
    written)."""

    ids: dict[str, array] = field(default_factory=lambda: {k: array("Q") for k in OUTCOMES})
    checked: int = 0

    def add(self, outcome: str, lid: LedgerId) -> None:
        self.ids[outcome].extend((lid.scope, lid.ledger))

    def count(self, outcome: str) -> int:
        return len(self.ids[outcome]) // 2

    def ledgers(self, outcome: str) -> Iterator[LedgerId]:
        a = self.ids[outcome]
        for i in range(0, len(a), 2):
            yield LedgerId(a[i], a[i + 1])


def _files(folder: str) -> Iterator[tuple[LedgerId, str]]:
    """Each ledger's file (the preferred one when it has several), in the folder's listing order."""
    for name in metadata_names(folder, exact=False):
        got = ledger_of_file(name)
        if got is not None and preferred_file(folder, name, got[1]) and _canonical(folder, name, got[0]):
            yield got[0], os.path.join(folder, name)


def _canonical(folder: str, name: str, lid: LedgerId) -> bool:
    """Whether ``name`` is the file its ledger is imported from: its usual name (hex without leading
    zeros; a scoped ledger's 32-digit qualified name), or another name of it (leading zeros, a scope-0
    ledger's 32 digits) when no file has the usual one. Two other names of one ledger and none usual:
    FolderImportError (which one holds the ledger is not told), before anything is imported."""
    usual = lid.qualified_name if lid.scope else f"{lid.ledger:x}"
    if name.startswith(usual + "."):
        return True
    if any(os.path.lexists(os.path.join(folder, usual + suf)) for suf in SUFFIXES):
        return False
    stem = name.split(".")[0]
    shortest = f"{lid.value:x}"
    others = [shortest.rjust(width, "0") for width in range(len(shortest), 33)]   # (every name of it, up to 32 digits)
    twin = next((o + suf for o in others if o != stem for suf in SUFFIXES
                 if os.path.lexists(os.path.join(folder, o + suf))), None)
    if twin is not None:
        raise FolderImportError(f"{os.path.join(folder, name)}: ledger {lid} has two files, {name} and {twin}, and "
                                f"none named {usual}.bin: keep one; nothing imported")
    return True


def check_folder(folder: str, progress: Callable[[str, bool], None] | None = None,
                 spool: Spool | None = None) -> int:
    """Read and parse every ledger's file (each one's bytes added to ``spool``); the number of
    ledgers. The first file that cannot be read or parsed raises its error (one line naming the
    file and offset), one the service would refuse (its ids, its quorums and ensembles) a
    FolderImportError caused by that BAD_REQUEST; none: BkdiskError."""
    n = 0
    for lid, path, data in read_files(_files(folder), threads=READ_THREADS):
        if isinstance(data, Exception):
            raise data
        md = parse_metadata(data, path=path)
        try:   # what the service refuses of a file that parses: refused here, before anything is created
            check_ids(lid.scope, lid.ledger)
            check_consistent(md)
        except BadRequest as exc:
            raise FolderImportError(f"{path}: the service refuses it: {exc}; nothing imported") \
                from MetadataError(exc.code, str(exc))
        if spool is not None:
            spool.add(lid, os.path.basename(path), data)
        n += 1
        if progress is not None and n % 10_000 == 0:
            progress(f"checked {n} ledgers' metadata", False)
    if n == 0:
        raise FolderImportError(f"{folder}: no ledger metadata files (expected <hex ledger id>.bin/.txt/.v1.txt)")
    return n


def _checked_files(folder: str, spool: Spool) -> Iterator[tuple[LedgerId, str, bytes]]:
    """(ledger, path, bytes) of each file the check read: from the spool (in ledger id order), or the
    folder read again."""
    if spool.broken is None:
        for lid, name, data in spool.records():
            yield lid, os.path.join(folder, name), data
        return
    for lid, path in _files(folder):
        yield lid, path, read_bytes(path)


def _batches(files: Iterable[tuple[LedgerId, str, bytes]]) -> Iterator[list[tuple[LedgerId, str, bytes]]]:
    """The files in batches, each in ledger id order (a folder of one batch goes in id order, and
    its first refusal is that of the lowest id)."""
    batch: list[tuple[LedgerId, str, bytes]] = []
    size = 0
    for lid, path, data in files:
        if batch and (len(batch) == BATCH or size + len(data) > MAX_BATCH_BYTES):
            yield sorted(batch, key=lambda f: f[0])
            batch, size = [], 0
        batch.append((lid, path, data))
        size += len(data)
    if batch:
        yield sorted(batch, key=lambda f: f[0])


def import_folder(client: MetadataClient, folder: str, existing: str | None,
                  progress: Callable[[str, bool], None] | None = None) -> Outcomes:
    """Create every ledger of ``folder`` through the service, create-only. A ledger that exists
    stops the import (FolderImportError naming its file) unless ``existing`` is "skip" (left as it is) or
    "overwrite" (its stored bytes read; written at that version only when they differ)."""
    out = Outcomes()
    spool = Spool()
    try:
        total = check_folder(folder, progress, spool)
        spool.finish()
        out.checked = total
        _send(client, _batches(_checked_files(folder, spool)), out, existing, progress)
    finally:
        spool.close()
    return out


def _send(client: MetadataClient, batches: Iterator[list[tuple[LedgerId, str, bytes]]], out: Outcomes,
          existing: str | None, progress: Callable[[str, bool], None] | None) -> None:
    """Create the ledgers of ``batches`` (CreateMany each), their outcomes added to ``out``."""
    total = out.checked
    done = 0
    failures: list[tuple[str, MetadataError]] = []

    def settle(batch: list[tuple[LedgerId, str, bytes]], results: list) -> None:
        nonlocal done
        for (lid, path, data), got in zip(batch, results, strict=True):
            if not isinstance(got, MetadataError):
                out.add("imported", lid)
            elif got.code == "LEDGER_EXISTS" and existing == "skip":
                out.add("skipped", lid)
            elif got.code == "LEDGER_EXISTS" and existing == "overwrite":
                out.add(_overwrite(client, lid, path, data), lid)
            else:
                failures.append((path, got))
        done += len(batch)
        if progress is not None:
            progress(f"imported {done} of {total} ledgers", False)

    # IN_FLIGHT calls at once: the service parses one batch and its store applies another meanwhile
    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        pending: deque = deque()
        for batch in batches:
            pending.append((batch, pool.submit(create_many, client,
                                               [(lid.scope, lid.ledger, data) for lid, _p, data in batch])))
            if len(pending) == IN_FLIGHT:
                settle(*_result(pending.popleft()))
                if failures:
                    break
        while pending:                  # what was sent is counted, even after a failure
            settle(*_result(pending.popleft()))
    if failures:
        path, exc = failures[0]
        # the service's answer as the cause: the command's exit code says which (exists, denied, ...)
        raise FolderImportError(f"{path}: {exc} ({out.count('imported')} of {total} imported)") from exc


def _result(sent: tuple) -> tuple[list, list]:
    batch, future = sent
    return batch, future.result()


def _overwrite(client: MetadataClient, lid: LedgerId, path: str, data: bytes) -> str:
    """"overwritten" when the stored bytes differ and were replaced by a versioned write; "unchanged"
    when they are the file's already."""
    try:
        current = client.read(lid.ledger, lid.scope)
        if current.serialized == data:
            return "unchanged"
        client.write(lid.ledger, data, current.version, scope=lid.scope)
    except MetadataError as exc:
        raise FolderImportError(f"{path}: {exc}") from exc
    return "overwritten"
