"""One RocksDB database directory, read-only: the live SSTs of the MANIFEST and the WAL memtable merged
into one view (newest sequence number wins, deletions hide older values), with every problem found
along the way returned as data."""
from __future__ import annotations

import heapq
import os
import re
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np

from bkdisk.diskio.mapped import DiskError, map_file
from bkdisk.formats import rocksdb as rf
from bkdisk.formats.errors import FormatError
from bkdisk.rocksdbfiles.block import ChecksumMismatch, seek
from bkdisk.rocksdbfiles.manifest import Version, read_manifest
from bkdisk.rocksdbfiles.problem import Problem
from bkdisk.rocksdbfiles.sst import Record, SstFile, user_key_of
from bkdisk.rocksdbfiles.wal import WalReplay, replay_wal

_WAL_NAME = re.compile(r"^(\d+)\.log$")
V = rf.ValueType


@dataclass
class Database:
    path: str
    version: Version
    tables: list[tuple[int, int, SstFile]] = field(default_factory=list)   # (level, number, table)
    wals: list[WalReplay] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    memtable: dict[bytes, Record] = field(default_factory=dict)             # newest WAL record per key
    range_tombstones: list[tuple[bytes, bytes, int]] = field(default_factory=list)

    # --- lookups ---------------------------------------------------------------------------
    def _covered(self, key: bytes, seq: int) -> bool:
        return any(b <= key < e and s > seq for b, e, s in self.range_tombstones)

    def get_record(self, key: bytes) -> Record | None:
        """The newest record of ``key`` across memtable and tables (a deletion included)."""
        best = self.memtable.get(key)
        for _level, _n, t in self.tables:
            try:
                r = t.get(key)
            except FormatError:
                continue       # the table's damage is reported by verify()/items()
            if r is not None and (best is None or r.sequence > best.sequence):
                best = r
        return best

    def get(self, key: bytes) -> bytes | None:
        r = self.get_record(key)
        if r is None or r.vtype not in (V.VALUE, V.VALUE_PREFERRED_SEQNO) or self._covered(key, r.sequence):
            return None
        return r.value

    # --- iteration -------------------------------------------------------------------------
    def _table_records(self, t: SstFile) -> Iterator[Record]:
        for i in range(len(t.index_handles)):
            try:
                block = list(t._records(b := t.data_block(i), b.entries()))
            except FormatError as e:
                self._block_problem(t, i, e)
                continue
            yield from block

    def _block_problem(self, t: SstFile, i: int, e: FormatError) -> None:
        kind = "sst-checksum" if isinstance(e, ChecksumMismatch) else "sst-unreadable"
        p = Problem(kind, t.path, t.index_handles[i].offset, str(e), t.block_key_range(i))
        if p not in self.problems:
            self.problems.append(p)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """(user key, value) of every live key in key order."""
        mem = sorted(self.memtable.values(), key=lambda r: r.user_key)
        streams = [iter(mem)] + [self._table_records(t) for _l, _n, t in self.tables]
        last = None
        for r in heapq.merge(*streams, key=lambda r: (r.user_key, -r.sequence)):
            if r.user_key == last:
                continue          # an older version of a key already decided
            last = r.user_key
            if r.vtype in (V.VALUE, V.VALUE_PREFERRED_SEQNO) and not self._covered(r.user_key, r.sequence):
                yield r.user_key, r.value

    def _table_records_from(self, t: SstFile, start: bytes) -> Iterator[Record]:
        """``_table_records`` from the first key >= ``start`` (a seek through the table's index)."""
        target = start + bytes(rf.INTERNAL_KEY_FOOTER_SIZE)
        for i in range(bisect_left(t.index_keys, start), len(t.index_handles)):
            try:
                b = t.data_block(i)
                block = list(t._records(b, seek(b, target, user_key_of)))
            except FormatError as e:
                self._block_problem(t, i, e)
                continue
            yield from block

    def items_with_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """``items()`` of the keys starting with ``prefix`` (one ledger's locations), each table read
        from a seek to ``prefix`` and only as far as the prefix goes: not the whole database."""
        mem = sorted((r for k, r in self.memtable.items() if k.startswith(prefix)), key=lambda r: r.user_key)
        streams = [iter(mem)] + [self._table_records_from(t, prefix) for _l, _n, t in self.tables]
        last = None
        for r in heapq.merge(*streams, key=lambda r: (r.user_key, -r.sequence)):
            if not r.user_key.startswith(prefix):
                break             # every stream is in key order: nothing after this has the prefix
            if r.user_key == last:
                continue
            last = r.user_key
            if r.vtype in (V.VALUE, V.VALUE_PREFERRED_SEQNO) and not self._covered(r.user_key, r.sequence):
                yield r.user_key, r.value

    def fixed_chunks(self, key_size: int, value_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``items()`` for databases whose keys and values all have one size (DbLedgerStorage's), as
        chunks of arrays (keys (n, key_size), values (n, value_size)) in key order, in bounded memory
        (rocksdbfiles/stream.py); problems are added when the iteration ends."""
        from bkdisk.rocksdbfiles.stream import iter_fixed
        return ((k, v) for k, v, _n in iter_fixed(self, key_size, value_size))

    def padded_chunks(self, key_size: int, max_value: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``fixed_chunks`` for values of at most ``max_value`` bytes: (keys, values zero-padded to
        ``max_value``, value lengths); a longer live value is a ``bad-value-size`` problem (read it with
        ``get``)."""
        from bkdisk.rocksdbfiles.stream import iter_fixed
        return iter_fixed(self, key_size, max_value, padded=True)

    def fixed_items(self, key_size: int, value_size: int) -> tuple[np.ndarray, np.ndarray]:
        """``fixed_chunks`` joined: (keys (n, key_size), values (n, value_size)) in key order."""
        parts = list(self.fixed_chunks(key_size, value_size))
        if not parts:
            return np.zeros((0, key_size), np.uint8), np.zeros((0, value_size), np.uint8)
        return np.concatenate([k for k, _v in parts]), np.concatenate([v for _k, v in parts])

    def verify(self) -> list[Problem]:
        """Read every block of every live table, the data blocks and those the metaindex names
        (checksums verified); the problems found so far. A damaged filter block costs RocksDB's reads
        nothing (a filter it cannot read lets every key through) but is damage all the same."""
        for _l, _n, t in self.tables:
            for _ in self._table_records(t):
                pass
            for e in t.verify_meta_blocks():
                kind = "sst-checksum" if isinstance(e, ChecksumMismatch) else "sst-unreadable"
                self.problems.append(Problem(kind, t.path, e.offset, str(e)))
        return self.problems


def _wal_numbers(d: str) -> list[int]:
    """The numbers of the folder's WAL files: RocksDB lists the folder to find them when it opens."""
    try:
        names = os.listdir(d)
    except OSError as e:
        raise DiskError(d, f"cannot list ({e.strerror})", e.errno) from None
    return sorted(int(m.group(1)) for n in names if (m := _WAL_NAME.match(n)))


def open_db(db_dir: str | os.PathLike, stack: ExitStack) -> Database:
    """Open the database in ``db_dir``; files stay mapped until ``stack`` closes.

    A MANIFEST that cannot be read raises FormatError; damage below it (a missing or damaged SST, a
    torn WAL) is recorded in ``problems`` and the rest is still read.
    """
    d = os.fspath(db_dir)
    v = read_manifest(d)
    db = Database(d, v)
    if v.tail is not None:
        db.problems.append(Problem("manifest-torn-tail", v.manifest, v.tail.offset,
                                   f"{v.tail.reason}; {v.tail.lost_bytes} bytes after the last whole edit",
                                   lost_bytes=v.tail.lost_bytes))
    for f in sorted(v.files.values(), key=lambda f: (f.level, -f.largest_seq)):
        p = os.path.join(d, f.name)
        if not os.path.exists(p):
            db.problems.append(Problem("sst-missing", v.manifest, None,
                                       f"the MANIFEST names {f.name} (level {f.level}, {f.size} bytes), absent",
                                       (f.smallest[:-8], f.largest[:-8])))
            continue
        try:
            data = stack.enter_context(map_file(p))
            if len(data) != f.size:
                db.problems.append(Problem("sst-size", p, None, f"the MANIFEST says {f.size} bytes, the file has "
                                           f"{len(data)}", (f.smallest[:-8], f.largest[:-8])))
            t = SstFile(p, data.data)
        except (FormatError, DiskError) as e:
            kind = "sst-checksum" if isinstance(e, ChecksumMismatch) else "sst-unreadable"
            db.problems.append(Problem(kind, p, getattr(e, "offset", None), str(e),
                                       (f.smallest[:-8], f.largest[:-8])))
            continue
        db.tables.append((f.level, f.number, t))
        try:
            db.range_tombstones += t.range_deletions()
        except FormatError as e:
            db.problems.append(Problem("sst-unreadable", p, e.offset, str(e)))
    live_logs = min(v.log_number, v.prev_log_number) if v.prev_log_number else v.log_number
    for number in _wal_numbers(d):
        if number < live_logs:
            continue          # flushed into tables already: RocksDB would not replay it
        p = os.path.join(d, f"{number:06d}.log")
        try:
            with map_file(p) as data:
                w = replay_wal(data, path=p, number=number)
        except DiskError as e:
            db.problems.append(Problem("wal-unreadable", p, None, e.what))
            continue
        db.wals.append(w)
        if w.tail is not None:
            lost = len(w.tail.partial_payload)
            db.problems.append(Problem("wal-torn-tail", p, w.tail.offset,
                                       f"{w.tail.reason}; {w.tail.lost_bytes} bytes not replayed"
                                       + (f" (a record begun, {lost} bytes of it)" if lost else ""),
                                       lost_bytes=w.tail.lost_bytes))
        if w.bad_batch is not None:
            db.problems.append(Problem("wal-bad-batch", p, w.bad_batch.offset, str(w.bad_batch)))
        for b in w.batches:
            for r in b.records:
                if r.vtype == V.RANGE_DELETION:
                    db.range_tombstones.append((r.user_key, r.value, r.sequence))
                elif r.user_key not in db.memtable or r.sequence >= db.memtable[r.user_key].sequence:
                    db.memtable[r.user_key] = r
    return db
