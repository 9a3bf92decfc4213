"""DbLedgerStorage's two indexes in a ledger dir: ``current/locations`` (entry -> location in an entry log)
and ``current/ledgers`` (ledger -> exists, fenced, master key, explicit LAC), with their problems."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bkdisk.diskio.distinct import distinct, members
from bkdisk.formats import dbledger as fd
from bkdisk.formats.errors import FormatError
from bkdisk.formats.paths import LEDGERS_DB, LOCATIONS_DB
from bkdisk.rocksdbfiles.db import Database, open_db
from bkdisk.rocksdbfiles.problem import Problem

LOCATION_ROW = np.dtype([("ledger", "<i8"), ("entry", "<i8"), ("log", "<i8"), ("offset", "<i8")])


@dataclass
class LedgerDirIndex:
    current: str                                          # the ledger dir's ``current`` folder
    rows: Any = field(default_factory=list)   # LOCATION_ROW arrays in key order: a list, or a store that spills
    ledgers: LedgerTable | dict = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    count: int = 0                                        # live locations
    ledger_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # with locations, ascending
    ledger_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def location_chunks(self) -> Iterator[np.ndarray]:
        """The live locations as LOCATION_ROW arrays, in key order (ledger, then entry)."""
        if isinstance(self.rows, list):
            yield from self.rows
        else:
            for _start, c in self.rows.chunks():
                yield c

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """The live locations as whole columns (ledger, entry, log, offset): for small indexes and tests."""
        parts = list(self.location_chunks())
        rows = np.concatenate(parts) if parts else np.zeros(0, LOCATION_ROW)
        return {k: rows[k] for k in LOCATION_ROW.names or ()}

    @property
    def locations(self) -> list[fd.Location]:
        """The live locations as objects, in key order (ledger, then entry); ``columns`` holds them as arrays."""
        c = self.columns
        rows = zip(c["ledger"].tolist(), c["entry"].tolist(), c["log"].tolist(), c["offset"].tolist())
        return [fd.Location(*r) for r in rows]


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


MAX_LEDGER_DATA = 128    # bytes of a LedgerData read in the arrays' pass (a longer one is read by lookup)
NO_KEY = 0xFF            # LedgerTable.key_at of a value whose key place the jitted walk does not know


class LedgerTable:
    """The ``ledgers`` index as arrays: ledger ids ascending, each ledger's LedgerData bytes in one arena.
    A ledger's LedgerInfo is parsed when asked for (fsck asks for the ledgers the journal knows); its
    master key is known without parsing where the jitted walk read its value (``key_at``: the key's
    offset in the value, NO_KEY where the protobuf library read it; a byte each, as values past
    MAX_LEDGER_DATA are read by the library)."""

    def __init__(self, ids: np.ndarray, arena: np.ndarray, ends: np.ndarray,
                 key_at: np.ndarray | None = None, key_len: np.ndarray | None = None):
        order = np.argsort(ids, kind="stable") if len(ids) > 1 and (ids[1:] < ids[:-1]).any() else None
        starts = ends - np.diff(np.concatenate([[0], ends]))
        key_at = np.full(len(ids), NO_KEY, np.uint8) if key_at is None else key_at
        key_len = np.zeros(len(ids), np.uint8) if key_len is None else key_len
        if order is not None:
            ids, starts, ends, key_at, key_len = ids[order], starts[order], ends[order], key_at[order], key_len[order]
        self.ids, self.arena, self.starts, self.ends = ids, arena, starts, ends
        self.key_at, self.key_len = key_at, key_len

    def __len__(self) -> int:
        return len(self.ids)

    def _row(self, lid: int) -> int:
        i = int(np.searchsorted(self.ids, lid))
        return i if i < len(self.ids) and int(self.ids[i]) == lid else -1

    def __contains__(self, lid) -> bool:
        return self._row(int(lid)) >= 0

    def __iter__(self):
        return iter(self.ids.tolist())

    def rows(self, lids: np.ndarray) -> np.ndarray:
        """Per ledger id of ``lids`` (int64, as the index keys them), its row (-1: not in the index)."""
        lids = np.asarray(lids, np.int64)
        pos = np.searchsorted(self.ids, lids)
        ok = pos < len(self.ids)
        ok[ok] = self.ids[pos[ok]] == lids[ok]
        return np.where(ok, pos, -1)

    def info_at(self, i: int) -> fd.LedgerInfo:
        """The LedgerInfo of row ``i`` (its id from the table, its value parsed)."""
        return fd.parse_ledger_data(int(self.ids[i]), self.arena[self.starts[i]:self.ends[i]].tobytes())

    def get(self, lid: int) -> fd.LedgerInfo | None:
        i = self._row(int(lid))
        return None if i < 0 else self.info_at(i)

    def __getitem__(self, lid: int) -> fd.LedgerInfo:
        info = self.get(lid)
        if info is None:
            raise KeyError(lid)
        return info

    def items(self) -> list[tuple[int, fd.LedgerInfo]]:
        """Every ledger with its LedgerInfo, by id: for small indexes and tests."""
        return [(lid, self[lid]) for lid in self]


def read_ledger_table(db_dir: str | os.PathLike, stack: ExitStack) -> tuple[LedgerTable, list[Problem]]:
    """The ``ledgers`` index as a LedgerTable, its values checked by the jitted LedgerData walk (a value
    it does not take plainly goes through the protobuf library, which names what is wrong)."""
    from bkdisk.rocksdbfiles.kernels import plain_ledger_data
    db = open_db(db_dir, stack)
    ids, arena, lens, key_at, key_len, bad = [], [], [], [], [], []
    width = np.arange(MAX_LEDGER_DATA)
    for keys, values, vlen in db.padded_chunks(fd.LEDGERS_KEY_SIZE, MAX_LEDGER_DATA):
        ok = np.zeros(len(vlen), bool)
        at, n = np.empty(len(vlen), np.int64), np.empty(len(vlen), np.int64)
        plain_ledger_data(values, vlen, ok, at, n)
        for r in np.flatnonzero(~ok).tolist():
            key, value = keys[r].tobytes(), values[r, :vlen[r]].tobytes()
            try:
                fd.parse_ledger(key, value, path=db.path)
                ok[r] = True
            except FormatError as e:
                why = f"key {key.hex()}: {e.expected}, found {e.found}"
                bad.append(Problem("ledgers-bad-entry", db.path, None, why, (key, key)))
        ids.append(keys[ok].view(fd.LEDGERS_KEY_COLUMN).reshape(-1).astype(np.int64))
        arena.append(values[ok][width < vlen[ok, None]])
        lens.append(vlen[ok])
        key_at.append(np.where(at[ok] >= 0, at[ok], NO_KEY).astype(np.uint8))
        key_len.append(n[ok].astype(np.uint8))
    long = [p for p in db.problems if p.kind == "bad-value-size"]
    db.problems[:] = [p for p in db.problems if p.kind != "bad-value-size"]
    for p in long:                # a value longer than the arrays' pass reads: one lookup each
        key = p.key
        assert key is not None, "a bad-value-size problem names its key"
        stored = db.get(key)
        assert stored is not None, "the key was read from this database"
        try:
            fd.parse_ledger(key, stored, path=db.path)
        except FormatError as e:
            bad.append(Problem("ledgers-bad-entry", db.path, None, f"key {key.hex()}: {e.expected}, found {e.found}",
                               (key, key)))
            continue
        ids.append(np.frombuffer(key, fd.LEDGERS_KEY_COLUMN).astype(np.int64))
        arena.append(np.frombuffer(stored, np.uint8))
        lens.append(np.array([len(stored)], np.int64))
        key_at.append(np.full(1, NO_KEY, np.uint8))
        key_len.append(np.zeros(1, np.uint8))

    def cat(parts: list, dt) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dt)
    table = LedgerTable(cat(ids, np.int64), cat(arena, np.uint8), np.cumsum(cat(lens, np.int64)),
                        cat(key_at, np.uint8), cat(key_len, np.uint8))
    return table, db.problems + bad


def read_ledgers(db_dir: str | os.PathLike, stack: ExitStack) -> tuple[dict[int, fd.LedgerInfo], list[Problem]]:
    db = open_db(db_dir, stack)
    out = {i.ledger_id: i for i in _entries(db, fd.parse_ledger, "ledgers-bad-entry")}
    return out, db.problems


def read_ledger_dir(current: str | os.PathLike, rows=None) -> LedgerDirIndex:
    """Both indexes of one ledger dir, every block read and checked; a MANIFEST that cannot be read
    raises FormatError (nothing below it can be trusted). The locations go to ``rows`` (anything with
    ``append`` and ``chunks``, such as a spilling diskio.spill.ChunkedArray; default a list in memory),
    a chunk at a time, with their count per ledger."""
    c = os.fspath(current)
    out = LedgerDirIndex(c, [] if rows is None else rows)
    ids, counts = [], []
    with ExitStack() as stack:
        p1: list[Problem] = []
        locations_db, ledgers_db = os.path.join(c, LOCATIONS_DB), os.path.join(c, LEDGERS_DB)
        gone = _gone_beside_other(locations_db, ledgers_db)
        if gone == locations_db:
            p1.append(_gone_problem(gone))
        for cols in () if gone == locations_db else iter_location_columns(locations_db, stack, p1):
            r = np.empty(len(cols["ledger"]), LOCATION_ROW)
            for k in LOCATION_ROW.names or ():
                r[k] = cols[k]
            out.rows.append(r)
            out.count += len(r)
            u, n = np.unique(r["ledger"], return_counts=True)
            ids.append(u)
            counts.append(n)
        if gone == ledgers_db:
            ledgers, p2 = LedgerTable(np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.int64)), \
                [_gone_problem(gone)]
        else:
            ledgers, p2 = read_ledger_table(ledgers_db, stack)
        out.ledgers = ledgers
        out.problems = p1 + p2
    if ids:      # a ledger cut between chunks is counted in both: summed
        u, inv = np.unique(np.concatenate(ids), return_inverse=True)
        out.ledger_ids, out.ledger_counts = u, np.bincount(inv, weights=np.concatenate(counts)).astype(np.int64)
    return out


def _gone_beside_other(locations_db: str, ledgers_db: str) -> str | None:
    """The one database of a ledger dir whose folder is gone or empty while the other's is not (a
    DbLedgerStorage dir that lost it; both gone, it is no such dir), else None. BookKeeper opens its
    databases with create_if_missing, so its next start makes an empty one there, and the check reads it
    as that. A folder that still holds files (a MANIFEST a CURRENT could name again) or that cannot be
    searched is read, and fails, as any other: what it holds is unknown."""
    def gone(db_dir: str) -> bool:
        try:
            return not os.listdir(db_dir)
        except FileNotFoundError:
            return True
        except OSError:
            return False
    lost = [db for db in (locations_db, ledgers_db) if gone(db)]
    return lost[0] if len(lost) == 1 else None


def _gone_problem(db_dir: str) -> Problem:
    return Problem("db-missing", os.path.join(db_dir, "CURRENT"), None, "cannot read (No such file or directory): "
                   "the database is gone, and BookKeeper's next start makes an empty one here")


def ledger_ids(idx: LedgerDirIndex) -> np.ndarray:
    """The ids the dir's ledgers index holds, as an array."""
    led = idx.ledgers
    return led.ids if isinstance(led, LedgerTable) else np.fromiter(led, np.int64, len(led))


def ledger_infos(idx: LedgerDirIndex, lids: np.ndarray) -> list[fd.LedgerInfo | None]:
    """Per ledger id of ``lids`` (int64, as the index keys them), its LedgerInfo (None: not in the index),
    the ids looked up at once."""
    led = idx.ledgers
    if not isinstance(led, LedgerTable):
        return [led.get(x) for x in lids.tolist()]
    return [led.info_at(r) if r >= 0 else None for r in led.rows(lids).tolist()]


def explicit_lac_infos(idx: LedgerDirIndex) -> list[fd.LedgerInfo]:
    """The LedgerInfo of every ledger whose value holds an explicit-LAC body, the rest never parsed:
    LedgerData's fields are written in number order, so only a value with bytes after its master key
    (explicitLac, then limbo) or one the protobuf library read (NO_KEY) may hold one."""
    led = idx.ledgers
    if not isinstance(led, LedgerTable):
        infos = list(led.values())
    else:
        after_key = (led.ends - led.starts) - (led.key_at.astype(np.int64) + led.key_len)
        infos = [led.info_at(r) for r in np.flatnonzero((led.key_at == NO_KEY) | (after_key > 0)).tolist()]
    return [i for i in infos if i.explicit_lac_body is not None]


KEYS_AT_ONCE = 1 << 15   # master keys compared at once: their bytes' indices, 8 bytes a key byte


def same_master_keys(idx: LedgerDirIndex, lids: np.ndarray, key_of: np.ndarray, keys: list[bytes]) -> np.ndarray:
    """Per ledger id of ``lids`` (int64, as the index keys them), whether the dir's ledgers index is
    known without parsing its value to hold it with master key ``keys[key_of[i]]`` (``key_of[i]`` -1: no
    key, False). False also where the index does not hold it or the protobuf library read its value:
    what is False needs its LedgerInfo to be compared."""
    led = idx.ledgers
    out = np.zeros(len(lids), bool)
    if not isinstance(led, LedgerTable) or not len(lids):
        return out
    rows = led.rows(lids)
    lens = np.fromiter(map(len, keys), np.int64, len(keys))
    starts = np.cumsum(lens) - lens
    given = np.frombuffer(b"".join(keys), np.uint8)
    held = np.flatnonzero((rows >= 0) & (key_of >= 0))
    r, k = rows[held], key_of[held]
    sized = (led.key_at[r] != NO_KEY) & (led.key_len[r] == lens[k])
    held, r, k = held[sized], r[sized], k[sized]
    for width in distinct(lens[k]).tolist():   # (few: a key is a password's digest or empty)
        span = np.arange(width)
        of_width = np.flatnonzero(lens[k] == width)
        for lo in range(0, len(of_width), KEYS_AT_ONCE):   # (the byte indices of a block at a time)
            sel = of_width[lo:lo + KEYS_AT_ONCE]
            ours = led.arena[(led.starts[r[sel]] + led.key_at[r[sel]])[:, None] + span]
            out[held[sel]] = (ours == given[starts[k[sel], None] + span]).all(axis=1)
    return out


def ledgers_without_metadata(idx: LedgerDirIndex) -> dict[int, int]:
    """Ledgers with locations in this dir that its ledgers index does not know: ledger id -> locations."""
    known = ledger_ids(idx)
    unknown = ~members(idx.ledger_ids, distinct(known))
    return dict(zip(idx.ledger_ids[unknown].tolist(), idx.ledger_counts[unknown].tolist()))
