"""The embedded metadata store: one SQLite file in WAL mode, every mutation one transaction."""
from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from bkdisk.diskio.atomic import private_file
from bkdisk.metaservice.store import (
    SCOPE0_MAX_LEDGER,
    BadVersion,
    Change,
    LedgerExists,
    LedgerNotFound,
    MetadataStore,
    StoreError,
    Versioned,
    check_ids,
    scoped_ledger_candidate,
)

# SQLite integers are signed 64-bit; ids are unsigned 64-bit. Storing id - 2^63 keeps every id
# representable and keeps SQL's ORDER BY equal to unsigned order.
_BIAS = 1 << 63

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledgers (
  scope INTEGER NOT NULL, ledger INTEGER NOT NULL, version INTEGER NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY (scope, ledger)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, scope INTEGER NOT NULL, ledger INTEGER NOT NULL,
  change TEXT NOT NULL, version INTEGER NOT NULL, data BLOB);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES ('next_ledger_id', 0), ('pruned_through', 0);
"""
_ID_ATTEMPTS = 64
_IN_LIST = 400         # (scope, ledger) pairs a query asks for: 800 parameters, below the 999 of SQLite before 3.32


def _k(v: int) -> int:
    return v - _BIAS


def _v(k: int) -> int:
    return k + _BIAS


class SqliteStore(MetadataStore):
    """Durable on local disk with no server: WAL journal, synchronous=FULL, so a write is on disk
    when the call returns, and a process killed at any point leaves the last committed state."""

    def __init__(self, path: str | Path, retain_changes: int = 100_000):
        super().__init__()
        self.path = str(path)
        self.retain_changes = retain_changes
        self._lock = threading.Lock()
        try:
            if not os.path.exists(self.path):   # (its journals take its mode: the owner's alone, passwords)
                private_file(self.path).close()
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                       timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"{self.path}: cannot open the SQLite store: {exc}") from None
        self._head = self._query_head()

    # --- transactions ---
    def _tx(self, fn):
        """Run ``fn(cursor)`` in one IMMEDIATE transaction; roll back on any exception."""
        with self._lock:
            try:
                cur = self._db.cursor()
                cur.execute("BEGIN IMMEDIATE")
                out = fn(cur)
                cur.execute("COMMIT")
            except BaseException as exc:
                try:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                except sqlite3.ProgrammingError:   # a closed connection has nothing to roll back
                    pass
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"{self.path}: SQLite: {exc}") from None
                raise
            changed = self._query_head()
            grew = changed != self._head
            self._head = changed
        if grew:
            self._notify()
        return out

    def _query_head(self) -> int:
        row = self._db.execute("SELECT max(seq) FROM changes").fetchone()
        if row[0] is not None:
            return row[0]
        return self._db.execute("SELECT value FROM counters WHERE name='pruned_through'").fetchone()[0]

    def _log(self, cur: sqlite3.Cursor, scope: int, ledger: int, change: str, version: int,
             data: bytes | None) -> None:
        cur.execute("INSERT INTO changes (scope, ledger, change, version, data) VALUES (?,?,?,?,?)",
                    (_k(scope), _k(ledger), change, version, data))
        seq = cur.lastrowid
        if seq is not None:
            self._prune(cur, seq, seq)

    def _prune(self, cur: sqlite3.Cursor, first: int, last: int) -> None:
        """After changes ``first``..``last`` were logged: at each thousandth sequence among them past
        ``retain_changes``, the log is cut to the newest ``retain_changes``."""
        seq = last - last % 1000
        if seq >= first and seq > self.retain_changes:
            cut = seq - self.retain_changes
            cur.execute("DELETE FROM changes WHERE seq <= ?", (cut,))
            cur.execute("UPDATE counters SET value=max(value, ?) WHERE name='pruned_through'", (cut,))

    @staticmethod
    def _get(cur: sqlite3.Cursor, scope: int, ledger: int) -> tuple[int, bytes] | None:
        return cur.execute("SELECT version, data FROM ledgers WHERE scope=? AND ledger=?",
                           (_k(scope), _k(ledger))).fetchone()

    # --- ledgers ---
    def create(self, scope: int, ledger: int | None, data: bytes) -> Versioned:
        check_ids(scope, ledger)

        def run(cur: sqlite3.Cursor) -> Versioned:
            lid = ledger if ledger is not None else self._generate(cur, scope)
            if self._get(cur, scope, lid) is not None:
                raise LedgerExists(f"ledger {lid} of scope {scope} already exists")
            cur.execute("INSERT INTO ledgers VALUES (?,?,0,?)", (_k(scope), _k(lid), data))
            self._log(cur, scope, lid, "CREATED", 0, data)
            return Versioned(scope, lid, 0, data)
        return self._tx(run)

    def create_many(self, creates: list[tuple[int, int, bytes]]) -> list[Versioned | StoreError]:
        """``create`` of each named ledger, all in ONE transaction (one commit, one fsync, for the
        batch): each item still has its own outcome, LedgerExists for a ledger that exists (a later
        item of the same id included). A transaction that fails applies none of them, and every
        item gets its error. The batch's ledgers already stored are found with one query, and the
        others inserted (ledger rows, then their changes) with one executemany each: statements a
        batch, not three a ledger."""
        out: list[Versioned | StoreError | None] = [None] * len(creates)
        todo: list[int] = []
        for i, (scope, ledger, _data) in enumerate(creates):
            try:
                check_ids(scope, ledger)
                todo.append(i)
            except StoreError as exc:
                out[i] = exc

        def run(cur: sqlite3.Cursor) -> None:
            taken = self._stored(cur, [creates[i][:2] for i in todo])
            rows = []
            for i in todo:
                scope, lid, data = creates[i]
                if (scope, lid) in taken:
                    out[i] = LedgerExists(f"ledger {lid} of scope {scope} already exists")
                    continue
                taken.add((scope, lid))         # a later item of the same id exists by then
                rows.append((_k(scope), _k(lid), data))
                out[i] = Versioned(scope, lid, 0, data)
            if not rows:
                return
            cur.executemany("INSERT INTO ledgers VALUES (?,?,0,?)", rows)
            first = self._next_seq(cur)
            cur.executemany("INSERT INTO changes (scope, ledger, change, version, data) "
                            "VALUES (?,?,'CREATED',0,?)", rows)
            self._prune(cur, first, first + len(rows) - 1)
        if todo:
            try:
                self._tx(run)
            except StoreError as exc:
                for i in todo:
                    out[i] = exc
        return [x for x in out if x is not None]    # (every item was set above)

    @staticmethod
    def _stored(cur: sqlite3.Cursor, keys: list[tuple[int, int]]) -> set[tuple[int, int]]:
        """Which of ``keys`` (scope, ledger) are stored: one query per _IN_LIST of them."""
        found: set[tuple[int, int]] = set()
        for at in range(0, len(keys), _IN_LIST):
            part = keys[at:at + _IN_LIST]
            marks = ",".join("(?,?)" for _ in part)
            args = [x for scope, lid in part for x in (_k(scope), _k(lid))]
            # (CROSS JOIN: the key list drives, each key a primary-key search, never a table scan)
            found.update((_v(s), _v(lg)) for s, lg in cur.execute(
                f"SELECT l.scope, l.ledger FROM (VALUES {marks}) AS k CROSS JOIN ledgers AS l "
                "ON l.scope = k.column1 AND l.ledger = k.column2", args))
        return found

    @staticmethod
    def _next_seq(cur: sqlite3.Cursor) -> int:
        """The sequence the next change gets: AUTOINCREMENT's, never one used before."""
        row = cur.execute("SELECT seq FROM sqlite_sequence WHERE name='changes'").fetchone()
        return 1 if row is None else row[0] + 1

    def _generate(self, cur: sqlite3.Cursor, scope: int) -> int:
        if scope != 0:
            for _ in range(_ID_ATTEMPTS):
                lid = scoped_ledger_candidate()
                if self._get(cur, scope, lid) is None:
                    return lid
            raise StoreError(f"no free random ledger id in scope {scope} after {_ID_ATTEMPTS} tries")
        # Scope 0 counts up from 0 and never hands out an id twice, like BookKeeper's ZooKeeper
        # sequential generators; ids taken by explicit creates are skipped.
        (lid,) = cur.execute("SELECT value FROM counters WHERE name='next_ledger_id'").fetchone()
        while lid <= SCOPE0_MAX_LEDGER and self._get(cur, 0, lid) is not None:
            lid += 1
        if lid > SCOPE0_MAX_LEDGER:
            raise StoreError("scope 0 ledger ids are exhausted")
        cur.execute("UPDATE counters SET value=? WHERE name='next_ledger_id'", (lid + 1,))
        return lid

    def read(self, scope: int, ledger: int, consistent: bool = False) -> Versioned:
        check_ids(scope, ledger)
        with self._lock:
            row = self._get(self._db.cursor(), scope, ledger)
        if row is None:
            raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist")
        return Versioned(scope, ledger, row[0], bytes(row[1]))

    def read_with_head(self, scope: int, ledger: int) -> tuple[Versioned | None, int]:
        check_ids(scope, ledger)
        with self._lock:   # writers commit and move the head under this lock
            row = self._get(self._db.cursor(), scope, ledger)
            head = self._head
        return (None if row is None else Versioned(scope, ledger, row[0], bytes(row[1]))), head

    def write(self, scope: int, ledger: int, data: bytes, expected_version: int) -> Versioned:
        check_ids(scope, ledger)

        def run(cur: sqlite3.Cursor) -> Versioned:
            row = self._get(cur, scope, ledger)
            if row is None:
                raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist")
            if row[0] != expected_version:
                raise BadVersion(f"ledger {ledger} of scope {scope} is at version {row[0]}, "
                                 f"not {expected_version}")
            version = row[0] + 1
            cur.execute("UPDATE ledgers SET version=?, data=? WHERE scope=? AND ledger=?",
                        (version, data, _k(scope), _k(ledger)))
            self._log(cur, scope, ledger, "UPDATED", version, data)
            return Versioned(scope, ledger, version, data)
        return self._tx(run)

    def remove(self, scope: int, ledger: int, expected_version: int | None) -> None:
        check_ids(scope, ledger)

        def run(cur: sqlite3.Cursor) -> None:
            row = self._get(cur, scope, ledger)
            if row is None:
                raise LedgerNotFound(f"ledger {ledger} of scope {scope} does not exist")
            if expected_version is not None and row[0] != expected_version:
                raise BadVersion(f"ledger {ledger} of scope {scope} is at version {row[0]}, "
                                 f"not {expected_version}")
            cur.execute("DELETE FROM ledgers WHERE scope=? AND ledger=?", (_k(scope), _k(ledger)))
            self._log(cur, scope, ledger, "DELETED", row[0], None)
        self._tx(run)

    def ledger_ids(self, scope: int, after: int | None, limit: int) -> list[int]:
        check_ids(scope, None)
        # Without a lower bound, ">= _k(0)" (the smallest key) lists from the first id.
        op, low = (">", _k(after)) if after is not None else (">=", _k(0))
        with self._lock:
            rows = self._db.execute(f"SELECT ledger FROM ledgers WHERE scope=? AND ledger{op}? "
                                    "ORDER BY ledger LIMIT ?", (_k(scope), low, limit)).fetchall()
        return [_v(r[0]) for r in rows]

    def scan(self, start: tuple[int, int] | None, end: tuple[int, int] | None,
             batch: int) -> Iterator[list[Versioned]]:
        # Keyset pages on the primary key; the lock is held for one page's query only.
        low, op = (start or (0, 0)), ">="
        high = "" if end is None else " AND (scope, ledger) < (?, ?)"
        tail = () if end is None else (_k(end[0]), _k(end[1]))
        while True:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT scope, ledger, version, data FROM ledgers WHERE (scope, ledger) {op} (?, ?)"
                    f"{high} ORDER BY scope, ledger LIMIT ?",
                    (_k(low[0]), _k(low[1]), *tail, batch)).fetchall()
            if not rows:
                return
            yield [Versioned(_v(s), _v(lg), ver, bytes(d)) for s, lg, ver, d in rows]
            if len(rows) < batch:
                return
            low, op = (_v(rows[-1][0]), _v(rows[-1][1])), ">"

    def scopes(self) -> list[int]:
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT scope FROM ledgers ORDER BY scope").fetchall()
        return [_v(r[0]) for r in rows]

    # --- change log ---
    def head_sequence(self) -> int:
        return self._head

    def changes_since(self, sequence: int, limit: int = 1000) -> list[Change]:
        with self._lock:
            (pruned,) = self._db.execute(
                "SELECT value FROM counters WHERE name='pruned_through'").fetchone()
            if sequence < pruned:
                raise BadVersion(f"changes up to sequence {pruned} were pruned; cannot resume "
                                 f"after {sequence}")
            rows = self._db.execute("SELECT seq, scope, ledger, change, version, data FROM changes "
                                    "WHERE seq > ? ORDER BY seq LIMIT ?", (sequence, limit)).fetchall()
        return [Change(s, _v(sc), _v(lg), ch, ver, None if d is None else bytes(d))
                for s, sc, lg, ch, ver, d in rows]

    def integrity_check(self) -> str:
        """SQLite's own consistency check ('ok' when the file is sound)."""
        with self._lock:
            return self._db.execute("PRAGMA integrity_check").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
