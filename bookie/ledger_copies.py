"""One ledger's stored copies on one bookie disk, found through the disk's own index (the ``.idx``
file, or DbLedgerStorage's ``locations`` database) the way a bookie serves a read; a scan of the
disk's entry logs only when that index is damaged.

A disk yields the ledger's locations in entry-id order, a window of index slots (or a seek into
RocksDB) at a time, so that no list of every entry of the ledger is held; the bytes of an entry are
read from its log only when asked for (``CopyReader.record``).
"""
from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np

from bkdisk.bookie.layout import BookieDirs, LayoutError, bookie_id_of, discover
from bkdisk.diskio.mapped import DiskError, map_window, open_regular, read_range
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.formats import index as fi
from bkdisk.formats.codec import read_value
from bkdisk.formats.dbledger import LEDGERS_KEY, LOCATIONS_KEY, parse_ledger, parse_location
from bkdisk.formats.entrylog import ENTRY_SIZE, MAX_ENTRY_SIZE, MIN_SANE_ENTRY_SIZE
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId, to_signed64
from bkdisk.formats.paths import CURRENT_DIR, entry_log_name, index_relpath, parse_entry_log_name
from bkdisk.rocksdbfiles.db import open_db

SLOT_WINDOW = 1 << 16       # index slots mapped at once (512 KiB of a .idx)
# Location: (entry id, entry log path, position of the entry just past its size prefix)
Location = tuple[int, str, int]


class NotABookie(LayoutError):
    """A disk given holds no bookie's ledger storage."""


@dataclass
class Disk:
    """A bookie disk as read-ledger reads it: its dirs, its bookie id and how its index is kept."""

    root: str
    dirs: BookieDirs
    bookie_id: str
    kind: str       # 'index-files' or 'rocksdb' (BookieDirs.storage_kind)


def open_disk(root: str, bookie_id: str | None = None) -> Disk:
    """The one bookie under ``root``; NotABookie when no ledger storage is there."""
    try:
        dirs = discover(root)
    except LayoutError as e:
        raise NotABookie(f"{root}: not a bookie disk ({e})") from None
    kind = dirs.storage_kind
    if kind == "empty" and not _entry_logs(dirs):
        raise NotABookie(f"{root}: not a bookie disk (no .idx index, no DbLedgerStorage database, no entry log)")
    return Disk(root, dirs, bookie_id or bookie_id_of(dirs) or os.path.basename(os.path.normpath(root)), kind)


def _entry_logs(dirs: BookieDirs) -> list[str]:
    out = []
    for d in dirs.ledger_dirs:
        cur = os.path.join(d, CURRENT_DIR)
        try:
            names = os.listdir(cur) if os.path.isdir(cur) else []
        except OSError:   # (listed again where its logs are read, which says why)
            names = []
        out += [os.path.join(cur, n) for n in sorted(names) if parse_entry_log_name(n) is not None]
    return out


class IndexDamaged(Exception):
    """The disk's index of the ledger cannot be read: its locations come from a scan instead."""


def locations(disk: Disk, lid: LedgerId, stack: ExitStack, first: int = 0,
              last: int | None = None) -> tuple[Iterator[Location], str | None]:
    """The ledger's locations on ``disk`` in entry-id order (those of the ids ``first``..``last`` at
    least: an index's slots are read over that range only), and why they come from a scan (None when
    they come from the index). The index is opened here, so that its damage is known before any
    location is taken from it."""
    try:
        it = _index_locations(disk, lid, stack, first, last) if disk.kind == "index-files" else \
            _db_locations(disk, lid, stack) if disk.kind == "rocksdb" else iter(())
        return it, None
    except IndexDamaged as e:
        return iter(scanned_locations(disk, lid)), str(e)


def master_key(disk: Disk, lid: LedgerId) -> bytes | None:
    """The ledger's master key as ``disk`` keeps it beside its index (the ``.idx`` header, or the
    entry of DbLedgerStorage's ``ledgers`` database); None when it keeps none or that cannot be read.
    (The journals' key records are not read: that is a scan of every journal.)"""
    try:
        if disk.kind == "index-files":
            path = _index_path(disk, lid)
            return None if path is None else fi.parse_header(read_range(path, 0, fi.HEADER_SIZE), path=path).master_key
        if disk.kind == "rocksdb" and lid.scope == 0:
            key = LEDGERS_KEY.build(to_signed64(lid.ledger))
            for d in disk.dirs.effective_index_dirs:
                db_dir = os.path.join(d, CURRENT_DIR, "ledgers")
                if os.path.isdir(db_dir):
                    with ExitStack() as stack:
                        value = open_db(db_dir, stack).get(key)
                    if value is not None:
                        return parse_ledger(key, value, path=db_dir).master_key
    except (FormatError, DiskError, OSError):
        return None
    return None


def _index_path(disk: Disk, lid: LedgerId) -> str | None:
    """The ledger's ``.idx`` file; None when no index dir holds it, OSError when a dir that may hold it
    cannot be searched (its index is then not known to be absent)."""
    rel = index_relpath(lid)
    denied = None
    for d in disk.dirs.effective_index_dirs:
        p = os.path.join(d, CURRENT_DIR, rel)
        try:
            os.stat(p)
            return p
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            denied = denied or e
    if denied is not None:
        raise denied
    return None


def _log_path(dirs: list[str], log_id: int) -> str | None:
    for d in dirs:
        p = os.path.join(d, CURRENT_DIR, entry_log_name(log_id))
        if os.path.exists(p):
            return p
    return None


def _index_locations(disk: Disk, lid: LedgerId, stack: ExitStack, first: int = 0,
                     last: int | None = None) -> Iterator[Location]:
    for d in disk.dirs.effective_index_dirs:   # (a dir not listable may hold the ledger's index)
        cur = os.path.join(d, CURRENT_DIR)
        if not os.path.isdir(cur):
            raise IndexDamaged(f"{cur}: expected a folder of index files, found "
                               f"{'a file' if os.path.lexists(cur) and os.path.exists(cur) else 'none to read'}")
        # (searched, not listed: the index and the logs are opened by name, as BookKeeper opens them)
        if not os.access(cur, os.X_OK):
            raise IndexDamaged(f"{cur}: expected a folder of index files this user can search, found it closed "
                               "(permission denied)")
    try:
        path = _index_path(disk, lid)
    except OSError as e:
        raise IndexDamaged(f"{e.filename}: cannot tell whether it is there ({e.strerror})") from None
    if path is None:
        return iter(())     # the bookie does not hold the ledger
    try:
        head = read_range(path, 0, fi.HEADER_SIZE)
        fi.parse_header(head, path=path)
        size = os.path.getsize(path)
    except (FormatError, DiskError, OSError) as e:
        raise IndexDamaged(f"{path}: {e}") from None
    stray = (size - fi.HEADER_SIZE) % fi.SLOT_DTYPE.itemsize
    if stray:   # cut short (fsck's INDEX_TRUNCATED): the slots after the cut are lost, not absent
        raise IndexDamaged(f"{path}: offset {size - stray}: expected whole {fi.SLOT_DTYPE.itemsize}-byte location "
                           f"slots, found {stray} stray bytes at the end")
    n = (size - fi.HEADER_SIZE) // fi.SLOT_DTYPE.itemsize
    return _slots(disk, path, max(0, first), n if last is None else min(n, last + 1))


def _slots(disk: Disk, path: str, lo: int, hi: int) -> Iterator[Location]:
    """The locations of slots ``lo``..``hi`` - 1; the holes of a sparse file (an index of a few ids far
    apart, or one grown by damage to terabytes) are skipped, not read."""
    width = fi.SLOT_DTYPE.itemsize
    logs: dict[int, str | None] = {}
    start = lo
    while start < hi:
        data = _next_data(path, fi.HEADER_SIZE + start * width)
        if data is None:
            return
        start = max(start, (data - fi.HEADER_SIZE) // width)
        if start >= hi:
            return
        count = min(SLOT_WINDOW, hi - start)
        with map_window(path, fi.HEADER_SIZE + start * width, count * width) as view:
            slots = view[:count * width].view(fi.SLOT_DTYPE).astype(np.uint64)
        present = np.flatnonzero(slots)
        for i, loc in zip(present.tolist(), slots[present].tolist()):
            log_id, pos = fi.unpack_location(loc)
            if log_id not in logs:
                logs[log_id] = _log_path(disk.dirs.ledger_dirs, log_id)
            yield start + i, logs[log_id] or entry_log_name(log_id), pos
        start += count


def _next_data(path: str, offset: int) -> int | None:
    """Where the file's next bytes that are not a hole start, at ``offset`` or after (None: none)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return offset   # (the read that follows says why)
    try:
        return os.lseek(fd, offset, os.SEEK_DATA)
    except OSError as e:
        return None if e.errno == errno.ENXIO else offset   # (ENXIO: only holes from there)
    finally:
        os.close(fd)


def _db_locations(disk: Disk, lid: LedgerId, stack: ExitStack) -> Iterator[Location]:
    import heapq
    prefix = LOCATIONS_KEY.build(dict(ledger_id=to_signed64(lid.ledger), entry_id=0))[:8]
    streams = []
    for d in disk.dirs.effective_index_dirs:
        db_dir = os.path.join(d, CURRENT_DIR, "locations")
        if not os.path.isdir(db_dir):   # (gone, or not a folder: the dir's locations are not known, not none)
            raise IndexDamaged(f"{db_dir}: expected DbLedgerStorage's locations database, found none")
        try:
            db = open_db(db_dir, stack)
        except (FormatError, DiskError) as e:
            raise IndexDamaged(f"{db_dir}: {e}") from None
        for _item in db.items_with_prefix(prefix):   # its blocks read once ahead: their damage is known first
            pass
        # (a MANIFEST cut short may have lost the edits naming the newest tables: any key may be unseen)
        hit = [p for p in db.problems if p.kind == "manifest-torn-tail" or
               (p.kind.startswith("sst") and (p.key_range is None or _overlaps(p.key_range, prefix)))]
        if hit:
            raise IndexDamaged(f"{hit[0].path}: {hit[0].detail}")
        streams.append(_db_stream(db, prefix, [d] + [x for x in disk.dirs.ledger_dirs if x != d]))
    return heapq.merge(*streams)


def _overlaps(key_range: tuple[bytes | None, bytes | None], prefix: bytes) -> bool:
    lo, hi = key_range
    return (lo is None or lo[:8] <= prefix) and (hi is None or prefix <= hi[:8])


def _db_stream(db, prefix: bytes, dirs: list[str]) -> Iterator[Location]:
    logs: dict[int, str | None] = {}
    for key, value in db.items_with_prefix(prefix):
        try:
            loc = parse_location(key, value, path=db.path)
        except FormatError:
            continue        # fsck names a malformed location; read-ledger reads what it can
        if loc.log_id not in logs:
            logs[loc.log_id] = _log_path(dirs, loc.log_id)
        yield loc.entry_id, logs[loc.log_id] or entry_log_name(loc.log_id), loc.offset


def scanned_locations(disk: Disk, lid: LedgerId) -> list[Location]:
    """The ledger's entries found by scanning every entry log of the disk (its index is damaged):
    only this ledger's locations are kept, one log's scan at a time."""
    found: list[Location] = []
    for path in _entry_logs(disk.dirs):
        try:
            e = scan_entry_log(path).entries
        except (FormatError, DiskError):
            continue
        mine = e[(e["ledger"] == lid.ledger) & (e["scope"] == lid.scope) & (e["entry"] >= 0)]
        pos = (mine["offset"] + ENTRY_SIZE.sizeof()).tolist()
        found += [(eid, path, p) for eid, p in zip(mine["entry"].tolist(), pos)]
    found.sort(key=lambda t: t[0])
    return found


class CopyReader:
    """Reads stored entries at their locations, with one open file per entry log (closed by ``close``)."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self.unreadable: dict[str, str] = {}   # log -> why it could not be opened (its copies read as absent)

    def record(self, path: str, pos: int) -> bytes | None:
        """The entry stored at ``pos`` of the log ``path`` (just past its size prefix); None when the
        log is absent or the size there is not a sane entry's."""
        fd = self._fds.get(path)
        if fd is None:   # a regular file only: a FIFO in a log's place would block the open
            if path in self.unreadable:
                return None
            try:
                fd = self._fds[path] = open_regular(path)[0]
            except DiskError as e:
                self.unreadable[path] = e.what
                return None
        try:
            prefix = ENTRY_SIZE.sizeof()
            if pos < prefix:
                return None
            raw = os.pread(fd, prefix, pos - prefix)
            if len(raw) < prefix:
                return None
            size = read_value(ENTRY_SIZE, raw, 0)
            if not MIN_SANE_ENTRY_SIZE <= size <= MAX_ENTRY_SIZE:
                return None
            data = os.pread(fd, size, pos)
            return data if len(data) == size else None
        except OSError:
            return None

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
