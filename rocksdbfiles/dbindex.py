"""DbLedgerStorage's two indexes in a ledger dir: ``current/locations`` (entry -> location in an entry log)
and ``current/ledgers`` (ledger -> exists, fenced, master key, explicit LAC), with their problems."""
from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from formats import dbledger as fd
from formats.errors import FormatError
from formats.paths import LEDGERS_DB, LOCATIONS_DB
from rocksdbfiles.db import Database, Problem, open_db


@dataclass
class LedgerDirIndex:
    current: str                                          # the ledger dir's ``current`` folder
    columns: dict[str, np.ndarray] = field(default_factory=lambda: fd.location_columns(
        np.zeros((0, fd.LOCATIONS_KEY_SIZE), np.uint8), np.zeros((0, fd.LOCATION_VALUE_SIZE), np.uint8)))
    ledgers: dict[int, fd.LedgerInfo] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def locations(self) -> list[fd.Location]:
        """The live locations as objects, in key order (ledger, then entry); ``columns`` holds them as arrays."""
        c = self.columns
        rows = zip(c["ledger"].tolist(), c["entry"].tolist(), c["log"].tolist(), c["offset"].tolist())
        return [fd.Location(*r) for r in rows]


def is_dbledger_dir(current: str | os.PathLike) -> bool:
    """Whether a ledger dir's ``current`` holds DbLedgerStorage databases (a CURRENT file in locations/)."""
    return os.path.isfile(os.path.join(os.fspath(current), LOCATIONS_DB, "CURRENT"))


def _entries(db: Database, parse, kind: str):
    for key, value in db.items():
        try:
            yield parse(key, value, path=db.path)
        except FormatError as e:
            db.problems.append(Problem(kind, db.path, None, f"key {key.hex()}: {e.expected}, found {e.found}",
                                       (key, key)))


def iter_location_columns(db_dir: str | os.PathLike, stack: ExitStack, problems: list[Problem]
                          ) -> Iterator[dict[str, np.ndarray]]:
    """The live locations as chunks of columns (ledger, entry, log, offset), in key order, decoded by the
    jitted kernels in bounded memory; the database's problems are added to ``problems`` at the end."""
    db = open_db(db_dir, stack)
    for keys, values in db.fixed_chunks(fd.LOCATIONS_KEY_SIZE, fd.LOCATION_VALUE_SIZE):
        yield fd.location_columns(keys, values)
    problems += db.problems


def read_location_columns(db_dir: str | os.PathLike, stack: ExitStack) -> tuple[dict, list[Problem]]:
    """The live locations as columns (ledger, entry, log, offset), in key order: ``iter_location_columns`` joined."""
    problems: list[Problem] = []
    parts = list(iter_location_columns(db_dir, stack, problems))
    if not parts:
        return LedgerDirIndex("").columns, problems
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}, problems


def read_locations(db_dir: str | os.PathLike, stack: ExitStack) -> tuple[list[fd.Location], list[Problem]]:
    cols, problems = read_location_columns(db_dir, stack)
    rows = zip(cols["ledger"].tolist(), cols["entry"].tolist(), cols["log"].tolist(), cols["offset"].tolist())
    return [fd.Location(*r) for r in rows], problems


def read_locations_reference(db_dir: str | os.PathLike, stack: ExitStack) -> tuple[list[fd.Location], list[Problem]]:
    """The pure-Python twin of read_locations (every entry through Block.entries and parse_location)."""
    db = open_db(db_dir, stack)
    return list(_entries(db, fd.parse_location, "locations-bad-entry")), db.problems


def read_ledgers(db_dir: str | os.PathLike, stack: ExitStack) -> tuple[dict[int, fd.LedgerInfo], list[Problem]]:
    db = open_db(db_dir, stack)
    out = {i.ledger_id: i for i in _entries(db, fd.parse_ledger, "ledgers-bad-entry")}
    return out, db.problems


def read_ledger_dir(current: str | os.PathLike) -> LedgerDirIndex:
    """Both indexes of one ledger dir, every block read and checked; a MANIFEST that cannot be read
    raises FormatError (nothing below it can be trusted)."""
    c = os.fspath(current)
    out = LedgerDirIndex(c)
    with ExitStack() as stack:
        out.columns, p1 = read_location_columns(os.path.join(c, LOCATIONS_DB), stack)
        ledgers, p2 = read_ledgers(os.path.join(c, LEDGERS_DB), stack)
        out.ledgers = ledgers
        out.problems = p1 + p2
    return out


def ledgers_without_metadata(idx: LedgerDirIndex) -> dict[int, int]:
    """Ledgers with locations in this dir that its ledgers index does not know: ledger id -> locations."""
    ids, counts = np.unique(idx.columns["ledger"], return_counts=True)
    return {i: n for i, n in zip(ids.tolist(), counts.tolist()) if i not in idx.ledgers}
