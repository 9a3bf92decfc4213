"""The short payload hash per entry that the scrub state keeps of each deep-checked entry log, so that
the copies of a log walked light still take part in the divergence check with their last known hash.

A short hash is the first 8 bytes of the payload's SHA-256 (the divergence check compares the first
``SHORT_HEX`` hex digits of every copy's ``payload_sha256``: audit/tables.py). Per disk and log one
Parquet file, ``<state>/hashes/<disk>/<log key, hex>.parquet`` (``<disk>``: a BLAKE2b of the disk's
key), its rows in the log's offset order. A disk's task writes the files of the logs it deep-read
into the run's scratch folder; a log walked light reads its file a replica batch at a time (the
row groups of the batch's offsets); the state's writer moves the new files into the new state and
links the unchanged ones from the last good state (``carry``), so the state is still replaced whole.
"""
from __future__ import annotations

import datetime
import hashlib
import os
import shutil
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bkdisk.diskio.atomic import fsync_dir
from bkdisk.entrylogs.walk import SPARSE_RECORD_BYTES

SHORT_HEX = 16          # hex digits of a short hash: 64 bits
HASHES_DIR = "hashes"
ROW_GROUP = 1 << 16
HASH_SCHEMA = pa.schema([("offset", pa.int64()), ("ledger_scope", pa.int64()), ("ledger_id", pa.int64()),
                         ("entry_id", pa.int64()), ("hash", pa.binary(8))])


def disk_folder(disk: str) -> str:
    """A disk's folder name under ``hashes/`` (its key is a path)."""
    return hashlib.blake2b(disk.encode(), digest_size=8).hexdigest()


def log_file(root: str, disk: str, key: int) -> str:
    return os.path.join(root, HASHES_DIR, disk_folder(disk), f"{key:x}.parquet")


def short_hashes(rows) -> tuple[np.ndarray, pa.Array]:
    """The rows of a deep-read log part (bookie.inventory.LogRows) that have a payload hash, and their
    short hashes (the SHA-256's first 8 bytes)."""
    present = np.flatnonzero(rows.hash_row >= 0)
    first8 = np.ascontiguousarray(rows.payload_sha256[rows.hash_row[present], :8])
    return present, pa.FixedSizeBinaryArray.from_buffers(pa.binary(8), len(present),
                                                         [None, pa.py_buffer(first8.tobytes())])


class HashWriter:
    """A disk's task: the short hashes of the logs it deep-reads, each log's file written as its
    parts come (one log open at a time)."""

    def __init__(self, root: str, disk: str):
        self.root, self.disk = root, disk
        self._key: int | None = None
        self._writer: pq.ParquetWriter | None = None
        self._tmp = ""

    def add(self, key: int, rows) -> None:
        if key != self._key:
            self.close()
            self._key = key
            self._tmp = log_file(self.root, self.disk, key) + ".tmp"
            os.makedirs(os.path.dirname(self._tmp), exist_ok=True)
            self._writer = pq.ParquetWriter(self._tmp, HASH_SCHEMA, write_page_checksum=True)
        if rows.payload_sha256 is None or rows.hash_row is None:
            return
        at, h = short_hashes(rows)
        e = rows.entries[at]
        assert self._writer is not None
        self._writer.write_table(pa.table({
            "offset": e["offset"].astype(np.int64), "ledger_scope": e["scope"].astype(np.uint64).view(np.int64),
            "ledger_id": e["ledger"].astype(np.uint64).view(np.int64), "entry_id": e["entry"].astype(np.int64),
            "hash": h}, schema=HASH_SCHEMA), row_group_size=ROW_GROUP)

    def empty(self, key: int) -> None:
        """A file for log ``key`` when none was written (a log without entries): a log whose file is
        missing from the state is one whose record was lost."""
        f = log_file(self.root, self.disk, key)
        if not os.path.exists(f):
            os.makedirs(os.path.dirname(f), exist_ok=True)
            pq.write_table(HASH_SCHEMA.empty_table(), f + ".tmp", write_page_checksum=True)
            os.replace(f + ".tmp", f)

    def close(self) -> None:
        """The open log's file, complete, under its name."""
        if self._writer is not None:
            self._writer.close()
            assert self._key is not None
            os.replace(self._tmp, log_file(self.root, self.disk, self._key))
        self._writer, self._key = None, None


def record_offsets(root: str | None, disk: str, key: int, size: int) -> np.ndarray | None:
    """The offsets of a log's records as its last deep check read them (sorted), for a light walk to
    ask for their header pages ahead; None when the state has no file of the log or its records are
    not sparse (every page holds a header: the kernel's read-ahead serves the walk as well)."""
    if root is None:
        return None
    try:
        pf = pq.ParquetFile(log_file(root, disk, key))
        if pf.metadata.num_rows == 0 or pf.metadata.num_rows * SPARSE_RECORD_BYTES > size:
            return None
        return np.sort(pf.read(columns=["offset"])["offset"].to_numpy())
    except (OSError, pa.ArrowException):   # only advice: the walk reads the log without it
        return None


def _rows_between(pf: pq.ParquetFile, low: int, high: int) -> pa.Table:
    """The rows of the row groups whose offsets may fall in [low, high] (their statistics say; a group
    without them is read): a part's few groups, not a log's millions of rows for each of its parts."""
    at = pf.schema_arrow.get_field_index("offset")
    groups = []
    for g in range(pf.metadata.num_row_groups):
        st = pf.metadata.row_group(g).column(at).statistics
        if st is None or not st.has_min_max or (st.max >= low and st.min <= high):
            groups.append(g)
    return pf.read_row_groups(groups)


def damaged_files(root: str | None, disk: str, keys) -> set[int]:
    """The logs of ``keys`` (each deep-checked before) whose payload hashes in the state at ``root``
    cannot be used: no file (a run writes one for every log it reads), or one that does not read whole
    (page checksums verified where it has them) or holds other columns."""
    if root is None:
        return set()
    bad = set()
    for k in keys:
        f = log_file(root, disk, k)
        try:
            pf = pq.ParquetFile(f, page_checksum_verification=True)
            if not pf.schema_arrow.equals(HASH_SCHEMA):
                bad.add(k)
                continue
            for g in range(pf.metadata.num_row_groups):
                pf.read_row_group(g)
        except (OSError, ValueError, pa.ArrowException):   # (a damaged footer's names: UnicodeDecodeError)
            bad.add(k)
    return bad


def light_column(root: str | None, disk: str, key: int, rows) -> pa.Array:
    """A light log part's ``payload_sha256``: each copy's short hash (SHORT_HEX hex digits) from the
    log's last deep check, null where the state has none (never checked, no file, another entry)."""
    n = len(rows)
    f = None if root is None else log_file(root, disk, key)
    if n == 0 or f is None or not os.path.exists(f):
        return pa.nulls(n, pa.string())
    off = rows.entries["offset"].astype(np.int64)
    t = _rows_between(pq.ParquetFile(f), int(off.min()), int(off.max()))
    if t.num_rows == 0:
        return pa.nulls(n, pa.string())
    have = t["offset"].to_numpy()
    order = np.argsort(have, kind="stable")
    have = have[order]
    at = np.minimum(np.searchsorted(have, off), len(have) - 1)
    idx = order[at]
    e = rows.entries
    same = ((have[at] == off) & (t["ledger_id"].to_numpy()[idx] == e["ledger"].astype(np.uint64).view(np.int64))
            & (t["ledger_scope"].to_numpy()[idx] == e["scope"].astype(np.uint64).view(np.int64))
            & (t["entry_id"].to_numpy()[idx] == e["entry"].astype(np.int64)))
    text = [v.hex() if ok else None for v, ok in zip(t["hash"].take(pa.array(idx)).to_pylist(), same.tolist())]
    return pa.array(text, pa.string())


def carry(new_root: str, old_root: str | None, staged_root: str | None, new: Mapping, old: Mapping,
          now: datetime.datetime, moved: Mapping[str, str] | None = None) -> None:
    """Fill the new state folder's ``hashes/``: each log's file from this run (``staged_root``) when
    it was deep-read now, else the last good state's (hard-linked: the old folder is removed after)
    when the log's row is unchanged (same disk, identity and last deep check; a disk given by another
    path than the last run's: under its old key, ``moved``); none otherwise."""
    folders = set()
    for disk, d in new.items():
        was_key = (moved or {}).get(disk, disk)
        prev = old.get(was_key)
        for key, s in d.logs.items():
            dst = log_file(new_root, disk, key)
            staged = None if staged_root is None else log_file(staged_root, disk, key)
            if s.last_deep == now:
                if staged is not None and os.path.exists(staged):
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.move(staged, dst)
                    with open(dst, "rb") as f:
                        os.fsync(f.fileno())
                    folders.add(os.path.dirname(dst))
                continue
            was = None if prev is None or prev.identity != d.identity else prev.logs.get(key)
            src = None if old_root is None else log_file(old_root, was_key, key)
            if was is None or was.identity != s.identity or was.last_deep != s.last_deep or src is None \
                    or not os.path.exists(src):
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:   # a file system without hard links
                shutil.copyfile(src, dst)
            folders.add(os.path.dirname(dst))
    for folder in sorted(folders) + ([os.path.join(new_root, HASHES_DIR)] if folders else []):
        fsync_dir(folder)
