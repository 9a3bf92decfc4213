"""A bookie's entries as columns: one batch per entry log, for JSON Lines, Parquet and the Spark audit.

Each batch holds the scanner's arrays as they come (no per-entry Python objects); the row schema,
``INVENTORY_FIELDS``, is the one `bkdisk inventory --jsonl` prints, `--parquet` writes and the
audit's replica rows start from. Damage the scan met comes back as data (``LogRows.warnings``).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from bkdisk.bookie.layout import BookieDirs, bookie_id_of
from bkdisk.bookie.plan_forks import PlanFork, SharedPlan
from bkdisk.digests.kernels import DIGEST_BAD, DIGEST_OK, DIGEST_UNKNOWN
from bkdisk.digests.payload_hashes import PayloadHashes
from bkdisk.digests.plan import SOURCE_NAMES, DigestPlan
from bkdisk.diskio.jsonl import CHOICE, DIGEST, INT, INT_OR_NULL, UINT, RowTemplate, Slot
from bkdisk.diskio.mapped import DiskError
from bkdisk.diskio.scan_sink import Room, ScanSink, parts
from bkdisk.diskio.spill import DEFAULT_MEMORY_MIB, SpillFolder
from bkdisk.entrylogs.reader import Damage
from bkdisk.entrylogs.scan import DEFAULT_WINDOW, EntryLogScanArrays, scan_entry_log
from bkdisk.entrylogs.scan_parts import ChunkedLogScan, entry_count
from bkdisk.formats.digests import DigestType
from bkdisk.formats.errors import FormatError
from bkdisk.formats.paths import CURRENT_DIR, parse_entry_log_name

_DIGEST_NAMES = tuple([None] + [DigestType(c).name for c in range(1, max(DigestType) + 1)])
_SOURCES = tuple(SOURCE_NAMES.get(c) for c in range(max(SOURCE_NAMES) + 1))
_DIGEST_OK = tuple(True if c == DIGEST_OK else False if c == DIGEST_BAD else None
                   for c in range(max(DIGEST_OK, DIGEST_BAD) + 1))

# A DUMMY entry carries no digest: nothing about its bytes was verified, whatever the scan's status says.
UNVERIFIABLE_TYPES = (int(DigestType.DUMMY),)


def verified_status(digests: np.ndarray) -> np.ndarray:
    """The digest status of each row as the rows say it: DIGEST_OK only where a digest was checked;
    a DUMMY entry's is DIGEST_UNKNOWN (``digest_ok`` null, counted unverifiable)."""
    st = digests["status"]
    dummy = np.isin(digests["type"], UNVERIFIABLE_TYPES)
    return np.where(dummy, DIGEST_UNKNOWN, st).astype(st.dtype) if dummy.any() else st


# The row, in order: (key, how it is written); constants per entry log are bookie_id, ledger_dir, log_id.
CONSTANT_FIELDS = ("bookie_id", "ledger_dir", "log_id")
JSONL_ROWS = 1 << 16   # rows encoded at once
# Of the memory limit: the rows of the logs in flight held in memory (the rest spilled), with a spill folder.
ROWS_SHARE = 0.25
# Rows of a log handed to the caller at once, with a spill folder: a Parquet row group's.
PART_ROWS = 1 << 18
SLOTS = (Slot("offset", INT), Slot("scope", UINT), Slot("ledger", UINT), Slot("entry", INT), Slot("format", INT),
         Slot("size", INT), Slot("lac", INT), Slot("length", INT), Slot("payload_len", INT_OR_NULL),
         Slot("digest_type", CHOICE, _DIGEST_NAMES), Slot("digest_source", CHOICE, _SOURCES),
         Slot("digest_ok", CHOICE, _DIGEST_OK))
HASH_SLOT = Slot("payload_sha256", DIGEST)
INVENTORY_FIELDS = CONSTANT_FIELDS + tuple(s.key for s in SLOTS)


@dataclass
class LogRows:
    """The entries of one entry log, as columns."""

    bookie_id: str | None
    ledger_dir: str
    log_id: int
    path: str
    entries: np.ndarray                 # entrylogs.arrays.ENTRY_DTYPE
    digests: np.ndarray | None          # digests.verify.DIGEST_DTYPE; None for a scan made without digests
    payload_sha256: np.ndarray | None   # (n, 32) uint8 when asked for; rows without a payload are all -1 in hash_row
    hash_row: np.ndarray | None
    warnings: list[str] = field(default_factory=list)
    problems: int = 0                   # framing damage met (each also in warnings)
    first: bool = True                  # the log's first rows: its warnings and problems come with them

    def __len__(self) -> int:
        return len(self.entries)

    def only(self, scope: int, ledger: int) -> LogRows:
        """The rows of one ledger (BP-35: a scope and a ledger id)."""
        keep = (self.entries["scope"] == scope) & (self.entries["ledger"] == ledger)
        rows = None if self.hash_row is None else self.hash_row[keep]
        digests = None if self.digests is None else self.digests[keep]
        return LogRows(self.bookie_id, self.ledger_dir, self.log_id, self.path, self.entries[keep],
                       digests, self.payload_sha256, rows, self.warnings, self.problems, self.first)

    def checked_digests(self) -> np.ndarray:
        """The digest rows; the rows an inventory lists come from a scan that checked digests."""
        assert self.digests is not None, f"{self.path}: scanned without checking digests"
        return self.digests

    def columns(self) -> dict[str, np.ndarray]:
        e, d = self.entries, self.checked_digests()
        return {"offset": e["offset"], "scope": e["scope"], "ledger": e["ledger"], "entry": e["entry"],
                "format": e["format"], "size": e["size"], "lac": e["lac"], "length": e["length"],
                "payload_len": d["payload_len"], "digest_type": d["type"], "digest_source": d["source"],
                "digest_ok": verified_status(d)}

    def jsonl(self) -> bytes:
        """The rows as JSON Lines, exactly as json.dumps writes each row (keys in INVENTORY_FIELDS order)."""
        return b"".join(self.jsonl_parts())

    def jsonl_parts(self, rows: int = JSONL_ROWS) -> Iterator[bytes]:
        """``jsonl()`` in parts of ``rows`` rows: the text of a whole log of small entries is several
        times its entries' arrays (hundreds of MiB for a 512 MiB log of 500-byte entries)."""
        for part in self.jsonl_views(rows):
            yield part.tobytes()

    def write_jsonl(self, out, rows: int = JSONL_ROWS) -> None:
        """``jsonl()`` written to the binary stream ``out`` a part at a time, from one reused buffer."""
        for part in self.jsonl_views(rows):
            out.write(part)

    def jsonl_views(self, rows: int = JSONL_ROWS) -> Iterator[np.ndarray]:
        """``jsonl_parts`` as uint8 views of one buffer: each is overwritten by the next."""
        with_hash = self.payload_sha256 is not None
        consts = {"bookie_id": self.bookie_id, "ledger_dir": self.ledger_dir, "log_id": self.log_id}
        order = INVENTORY_FIELDS + ((HASH_SLOT.key,) if with_hash else ())
        template = RowTemplate(consts, SLOTS + ((HASH_SLOT,) if with_hash else ()), order)
        cols = self.columns()
        for lo in range(0, len(self), rows):
            part = {k: v[lo:lo + rows] for k, v in cols.items()}
            hash_rows = None if self.hash_row is None else self.hash_row[lo:lo + rows]
            yield template.encode_view(part, self.payload_sha256, hash_rows)

    def part(self, lo: int, hi: int) -> LogRows:
        """Rows [lo, hi), as views of these rows' arrays."""
        return LogRows(self.bookie_id, self.ledger_dir, self.log_id, self.path, self.entries[lo:hi],
                       None if self.digests is None else self.digests[lo:hi], self.payload_sha256,
                       None if self.hash_row is None else self.hash_row[lo:hi], self.warnings, self.problems,
                       self.first)

    def arrow(self, *, coded: bool = False, room=None):
        """The rows as a pyarrow RecordBatch with the same names and JSON's nulls.

        With ``coded``, the string columns (bookie_id, ledger_dir, digest_type, digest_source) are
        dictionary arrays over their few values: a Parquet writer stores those as its dictionary
        pages and indices as they are, without hashing each row's text. With ``room`` (an
        arrow_columns.ColumnRoom) the numeric columns are built in its arrays, valid until the next
        batch is built in it."""
        import pyarrow as pa

        from bkdisk.bookie import arrow_columns as ac
        n = len(self)
        e = self.entries
        d = self.checked_digests()
        plen = d["payload_len"]
        arrays = [
            ac.constant(self.bookie_id, n, coded, room, "bookie_id"),
            ac.constant(self.ledger_dir, n, coded, room, "ledger_dir"),
            ac.filled(self.log_id, n, room, "log_id"),
            *(ac.numeric(e[s.key], None, room, s.key) for s in SLOTS[:8]),
            ac.numeric(plen, plen >= 0, room, "payload_len"),
            ac.decoded(d["type"], _DIGEST_NAMES, coded, room, "digest_type"),
            ac.decoded(d["source"], _SOURCES, coded, room, "digest_source"),
        ]
        ok = verified_status(d)
        arrays.append(ac.booleans(ok == DIGEST_OK, (ok == DIGEST_OK) | (ok == DIGEST_BAD)))
        names = list(INVENTORY_FIELDS)
        if self.payload_sha256 is not None and self.hash_row is not None:
            arrays.append(ac.hex_column(self.payload_sha256, self.hash_row))
            names.append(HASH_SLOT.key)
        return pa.RecordBatch.from_arrays(arrays, names=names)


def entry_logs(ledger_dir: str) -> tuple[list[tuple[int, str]], str | None]:
    """(log id, path) of every ``<hex>.log`` in ``<ledger_dir>/current`` by id, and why listing failed."""
    cur = os.path.join(ledger_dir, CURRENT_DIR)
    try:
        names = os.listdir(cur)
    except OSError as e:
        return [], f"{cur}: cannot list ({e.strerror})"
    logs = [(parse_entry_log_name(n), os.path.join(cur, n)) for n in names]
    return sorted((i, p) for i, p in logs if i is not None), None


def _hash_array(hashes: PayloadHashes | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    if hashes is None:
        return None, None
    return hashes.raw, np.where(hashes.present, np.arange(len(hashes), dtype=np.int64), -1)


def scan_bookie(dirs: BookieDirs, plan: DigestPlan, *, payload_hash: str | None = None,
                window: int = DEFAULT_WINDOW, meanwhile: Callable[[], object] | None = None,
                jobs: int | None = None, memory_bytes: int = DEFAULT_MEMORY_MIB << 20,
                spill: SpillFolder | None = None, rows: int = PART_ROWS) -> Iterator[LogRows | str]:
    """Every entry log of one bookie as a LogRows, in ledger-dir then log-id order; a str says what
    could not be read: a dir that could not be listed, or an entry log that could not be opened or
    read (the logs after it are still scanned), in that log's place.

    Up to ``jobs`` logs (default: the CPUs, at most SIDE_BY_SIDE) are scanned at once on helper
    threads, ahead of the caller, which handles (encodes, writes) the rows of the one before; each
    with a fork of ``plan``, committed in log order (bookie.plan_forks), so the rows and the plan
    are those of scanning the logs one after another (once a log has to be scanned again at its
    commit, the rest go one at a time). A log joins the scans under way only while
    the rows of the logs in flight and held by the caller, as estimated from their sizes, fit
    within ``memory_bytes`` less what the command needs besides; one log is always scanned. A
    caller that stops early (a closed pipe, Ctrl-C) waits for the logs scanned ahead to finish.
    With ``spill``, each scan writes its per-entry arrays into a sink as it scans (diskio.scan_sink:
    held within ROWS_SHARE of ``memory_bytes``, the rest spilled to ``spill``), and a log comes as
    LogRows of ``rows`` rows at a time: no log's rows are ever held whole, however many it has.
    ``meanwhile`` runs on the caller's thread once the first scans are under way (what the caller
    will need for the rows, imported while they run)."""
    import functools
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor
    bid = bookie_id_of(dirs)
    items: list[str | tuple[str, int, str]] = []
    for ld in dirs.ledger_dirs:
        found, failure = entry_logs(ld)
        if failure:
            items.append(failure)
        items += [(ledger_dir_name(ld), log_id, path) for log_id, path in found]
    logs = [item for item in items if not isinstance(item, str)]
    width = max(1, jobs if jobs is not None else min(SIDE_BY_SIDE, os.cpu_count() or 1))
    row_bytes = ROW_BYTES + (HASH_ROW_BYTES if payload_hash else 0)
    room = Room(int(memory_bytes * ROWS_SHARE)) if spill is not None else None
    # (with a sink, what a log's rows hold beyond the share is its scan's table and the part the caller has)
    rows_room = _RowsRoom(memory_bytes - OTHER_MEMORY - (room.limit if room is not None else 0), row_bytes,
                          most=None if room is None else 2 * (ScanSink.part_bytes + rows * row_bytes))
    shared = SharedPlan(plan)

    def scan(path: str, fork: PlanFork, alone: bool = False) -> EntryLogScanArrays:
        # side by side, each scan walks and checks on its own thread: a second thread each costs GIL hand-offs
        sink = None if room is None or spill is None else ScanSink(room, spill)
        try:
            return scan_entry_log(path, window=window, digests=fork.plan, payload_hash=payload_hash,
                                  digest_facts=True, pipeline=None if alone else False, sink=sink)
        except BaseException:
            if sink is not None:
                sink.close()
            raise

    with ThreadPoolExecutor(width, thread_name_prefix="inventory-scan") as helpers:
        flight: deque = deque()   # (log, its size, its rows' estimate, its fork, its scan's future), in log order
        nxt = 0

        def start_more() -> None:
            nonlocal nxt
            # Once a log had to be scanned again (its ledgers still being sniffed by the log before),
            # the rest go one at a time: forks taken after every commit meet no such conflict.
            while nxt < len(logs) and len(flight) < (1 if shared.rescans else width):
                size = _size(logs[nxt][2])
                taken = rows_room.take(size, anyway=not flight)
                if taken is None:
                    return
                fork = shared.fork()
                alone = width == 1 or shared.rescans > 0 or nxt + 1 == len(logs) and not flight
                flight.append((logs[nxt], size, taken, fork, helpers.submit(scan, logs[nxt][2], fork, alone)))
                nxt += 1

        start_more()
        if meanwhile is not None and flight:
            meanwhile()
        held = 0   # the estimate of the rows the caller holds
        for item in items:
            if isinstance(item, str):
                yield item
                continue
            rows_room.give(held)
            (ld_name, log_id, path), size, held, fork, future = flight.popleft()
            try:
                result: EntryLogScanArrays | BaseException = future.result()
            except (DiskError, FormatError) as e:
                result = e
            first = result
            result = shared.commit(fork, result, functools.partial(scan, path, alone=True))
            if result is not first and isinstance(first, ChunkedLogScan):
                first.close()   # (scanned again)
            start_more()
            shared.forget_before(min((f[3].commits for f in flight), default=shared.commits))
            if isinstance(result, BaseException):
                if not isinstance(result, (DiskError, FormatError)):
                    raise result
                yield str(result)
                continue
            rows_room.learned(size, entry_count(result))
            if not isinstance(result, ChunkedLogScan):
                yield log_rows(bid, ld_name, log_id, result)
                continue
            try:
                for lo, hi in parts(max(1, result.count()), rows):   # (an empty log: one empty part)
                    yield log_rows(bid, ld_name, log_id, result.part(lo, min(hi, result.count())), first=lo == 0)
            finally:
                result.close()


# Logs scanned at once at most (more helper threads than cores only trade the GIL).
SIDE_BY_SIDE = 2
# Bytes a scanned entry's rows hold: its ENTRY_DTYPE and DIGEST_DTYPE rows and digest facts, twice
# (the scan's columns double as they fill); and its payload hash and hash row.
ROW_BYTES = 2 * (53 + 11 + 1)
HASH_ROW_BYTES = 2 * (32 + 8)
# What the command holds besides the scans' rows: the interpreter and libraries, each scan's
# mapped window, the output's buffers.
OTHER_MEMORY = 320 << 20
# A log's bytes per entry until one is scanned (fewer than most logs': more rows estimated).
FIRST_RECORD_BYTES = 256


class _RowsRoom:
    """The bytes the rows of the logs in flight or held may take, and the estimate of a log's."""

    def __init__(self, room: int, row_bytes: int, most: int | None = None):
        self.room, self.row_bytes, self.used, self.most = room, row_bytes, 0, most
        self.seen_bytes, self.seen_rows = FIRST_RECORD_BYTES, 1

    def take(self, size: int, anyway: bool) -> int | None:
        """Room for a log of ``size`` bytes (its estimate, to give back), or None when it does not fit;
        ``most``: the bytes a log's rows hold at most, whatever its size."""
        need = size * self.seen_rows // self.seen_bytes * self.row_bytes
        need = need if self.most is None else min(need, self.most)
        if not anyway and self.used + need > self.room:
            return None
        self.used += need
        return need

    def give(self, taken: int) -> None:
        self.used -= taken

    def learned(self, size: int, rows: int) -> None:
        """A log of ``size`` bytes held ``rows`` entries: later estimates follow the logs seen so far."""
        self.seen_bytes, self.seen_rows = self.seen_bytes + size, self.seen_rows + rows


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0   # the scan says why it cannot read it


def ledger_dir_name(ledger_dir: str) -> str:
    """What the rows call a ledger dir (``ledger_dir``): its folder name."""
    return os.path.basename(os.path.normpath(ledger_dir))


def log_rows(bookie_id: str | None, ledger_dir: str, log_id: int, s: EntryLogScanArrays, first: bool = True) -> LogRows:
    """The rows of one scanned entry log (a scan made here or by fsck's pass 4, which the audit reuses);
    ``first``: they are its first rows (the log's warnings and problems come with them, not with later parts)."""
    digests, rows = _hash_array(s.payload_hashes)
    return LogRows(bookie_id, ledger_dir, log_id, s.path, s.entries, s.digests, digests, rows,
                   scan_warnings(s) + _map_claims(s) if first else [], len(s.problems) if first else 0, first)


def _map_claims(s: EntryLogScanArrays) -> list[str]:
    """A ledgers map that parses yet is true of no entries: more bytes for its ledgers than the log holds
    before it, or fewer than none for one (a damaged size; bookie-fsck: LEDGERS_MAP_MISMATCH)."""
    from bkdisk.entrylogs.map_check import impossible_claims
    return [f"{s.path}: the ledgers map {claim}" for claim in impossible_claims(s)]


def scan_warnings(s: EntryLogScanArrays) -> list[str]:
    """What a log's rows say of the damage its scan met (a spilled scan's per-entry arrays stay unread)."""
    warnings = [str(err) for err in (s.header_error, s.map_error) if err is not None]
    return warnings + [f"{s.path}: offset {int(p['offset'])}: framing broken "
                       f"({Damage(int(p['reason'])).name.lower()}), resumed at {int(p['resumed_at'])}"
                       for p in s.problems]
