"""The per-disk rows of the audit: one bookie disk checked in-process by the fsck library, whose one
read of each entry log also gives the replicas (as the inventory's rows), as Arrow tables ``disks``,
``findings`` and ``replicas`` tagged with the run.

A task's output (and a ``bkdisk scan-disk`` file) is one Arrow schema, ``TASK_SCHEMA``: a ``table``
column names the table of each row, and the other columns are the union of the tables'
columns (null where a table has no such column). specs/audit.md documents every column.

Ledger ids are stored as BookKeeper's Java code holds them: two signed 64-bit longs, ``ledger_scope``
(the most significant half, 0 before BP-35) and ``ledger_id`` (the least significant half).
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from bkdisk.audit.disk_space import space_rows
from bkdisk.audit.ledger_keys import key_batches
from bkdisk.audit.placement import this_host, wrong_host
from bkdisk.audit.scrub_columns import SCRUB_DISK_FIELDS
from bkdisk.bookie.layout import bookie_id_of, discover, from_conf
from bkdisk.diskio import fault_guard
from bkdisk.diskio.config import collector_eased, free_heap_returned
from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.ids import to_signed64

# The checker (fsck, the scanners: numba) and the space accounting load inside the functions that run a
# scan: `bkdisk audit --help`, `scan-disk --help` and a Spark driver that plans tasks import this without them.

RUN_FIELDS = [("tool_version", pa.string()), ("run_id", pa.string()), ("host", pa.string()),
              ("bookie_id", pa.string())]
DISK_FIELDS = [("path", pa.string()), ("storage_class", pa.string()), ("index_read", pa.bool_()),
               ("status", pa.string()), ("bytes", pa.int64()), ("entries", pa.int64()),
               ("scan_seconds", pa.float64()), ("fsck_exit_code", pa.int32()), ("error", pa.string())] \
    + SCRUB_DISK_FIELDS
FINDING_FIELDS = [("code", pa.string()), ("severity", pa.string()), ("pass_no", pa.int32()), ("path", pa.string()),
                  ("offset", pa.int64()), ("ledger_scope", pa.int64()), ("ledger_id", pa.int64()),
                  ("entry_id", pa.int64()), ("message", pa.string()), ("found_at", pa.timestamp("us", tz="UTC"))]
FINDINGS_BATCH = 1 << 16   # findings made into a batch at once
REPLICA_FIELDS = [("ledger_scope", pa.int64()), ("ledger_id", pa.int64()), ("entry_id", pa.int64()),
                  ("payload_sha256", pa.string()), ("digest_ok", pa.bool_()), ("digest_type", pa.string()),
                  ("size", pa.int64()), ("payload_len", pa.int64()), ("ledger_dir", pa.string()),
                  ("log_id", pa.int64()), ("offset", pa.int64()), ("indexed", pa.bool_()), ("lac", pa.int64()),
                  ("ledger_length", pa.int64()), ("entry_format", pa.int32())]
# What a disk keeps of a ledger beside its entries (audit/ledger_keys.py): salvage's master keys.
LEDGER_KEY_FIELDS = [("ledger_scope", pa.int64()), ("ledger_id", pa.int64()), ("master_key", pa.string()),
                     ("explicit_lac", pa.int64()), ("key_source", pa.string())]
# bkdisk space's rows of kind log, ledger and topic (bookie/space.py), under the same names and values.
SPACE_FIELDS = [("kind", pa.string()), ("ledger_dir", pa.string()), ("log_id", pa.int64()), ("size", pa.int64()),
                ("live_bytes", pa.int64()), ("garbage_bytes", pa.int64()), ("usage", pa.float64()),
                ("action", pa.string()), ("ledgers", pa.int64()), ("live_ledgers", pa.int64()),
                ("oldest_live_ledger", pa.string()), ("oldest_live_topic", pa.string()), ("source", pa.string()),
                ("ledger", pa.string()), ("state", pa.string()), ("metadata_state", pa.string()),
                ("topic", pa.string()), ("bytes", pa.int64()), ("pinned_logs", pa.int64()),
                ("sole_logs", pa.int64()), ("frees_bytes", pa.int64())]
TABLE_FIELDS = {"disks": DISK_FIELDS, "findings": FINDING_FIELDS, "replicas": REPLICA_FIELDS, "space": SPACE_FIELDS,
                "ledger_keys": LEDGER_KEY_FIELDS}
AUDIT_TABLES = ("disks", "findings", "replicas", "space")   # what the audit's tables take from a disk's rows
# The statuses of a disk whose scan finished: its copies count (fsck's errors are findings, not doubt).
AUDITED = ("ok", "errors")


def _union() -> pa.Schema:
    seen: dict[str, pa.DataType] = {"table": pa.string()}
    for name, t in RUN_FIELDS + DISK_FIELDS + FINDING_FIELDS + REPLICA_FIELDS + SPACE_FIELDS + LEDGER_KEY_FIELDS:
        if seen.setdefault(name, t) != t:
            raise TypeError(f"column {name} has two types")
    return pa.schema(list(seen.items()))


TASK_SCHEMA = _union()

# What a disk's storage is, as BookKeeper names the class. Replicas always come from the entry logs;
# a DbLedgerStorage disk's RocksDB index is checked by fsck when its index passes ran.
STORAGE_CLASS = {"index-files": "InterleavedLedgerStorage/SortedLedgerStorage", "rocksdb": "DbLedgerStorage",
                 "empty": "none found"}
INDEX_PASSES = (2, 3, 5)


def storage_class(kind: str, index_read: bool) -> str:
    name = STORAGE_CLASS.get(kind, kind)
    if kind != "rocksdb":
        return name
    return name + (" (replicas from its entry logs; RocksDB index checked by fsck)" if index_read
                   else " (replicas from its entry logs; RocksDB index not read)")


def table_schema(table: str) -> pa.Schema:
    return pa.schema(RUN_FIELDS + TABLE_FIELDS[table])


@dataclass(frozen=True)
class RunInfo:
    """What every row carries: the tool's version, the run and the host that scanned the disk."""

    run_id: str
    tool_version: str
    host: str

    @classmethod
    def new(cls, run_id: str | None = None) -> RunInfo:
        return cls(run_id or uuid.uuid4().hex[:16], tool_version(), socket.gethostname())

    def on_this_host(self) -> RunInfo:
        """The run as a task records it: on the host Spark ran the task on (audit/placement.py)."""
        return RunInfo(self.run_id, self.tool_version, this_host())


def tool_version() -> str:
    # importlib.metadata (tens of milliseconds) loads when a run starts, not for a command's --help.
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("bkdisk")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class DiskInput:
    """One disk to audit: a bookie root or a bk_server.conf, the bookie id the operator gave, and
    the host it is local to (its task runs there, and reads it nowhere else; None: any host)."""

    path: str
    bookie_id: str | None = None
    host: str | None = None


def signed(a: np.ndarray) -> np.ndarray:
    """Unsigned 64-bit ids as Java's signed longs (the same bits)."""
    return np.ascontiguousarray(a, dtype=np.uint64).view(np.int64)


def to_signed(v: int | None) -> int | None:
    return None if v is None else to_signed64(v)


def task_batch(table: str, run: RunInfo, bookie_id: str | None, cols: dict[str, pa.Array | list], n: int
               ) -> pa.RecordBatch:
    """A batch in TASK_SCHEMA for ``n`` rows of ``table``; absent columns are null."""
    arrays = []
    consts = {"table": table, "tool_version": run.tool_version, "run_id": run.run_id, "host": run.host,
              "bookie_id": bookie_id}
    for f in TASK_SCHEMA:
        if f.name in consts:
            arrays.append(pa.repeat(pa.scalar(consts[f.name], f.type), n))
        elif f.name in cols:
            arrays.append(pa.array(cols[f.name], f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=TASK_SCHEMA)


def batch_table(batch: pa.RecordBatch) -> str | None:
    """The table of a batch in TASK_SCHEMA (every batch a task makes holds one table); None when empty."""
    return batch.column("table")[0].as_py() if batch.num_rows else None


def split_tables(batches: list[pa.RecordBatch] | pa.Table, names: Iterable[str] = AUDIT_TABLES
                 ) -> dict[str, pa.Table]:
    """The per-disk tables ``names`` (each in its own schema) from rows in TASK_SCHEMA."""
    t = batches if isinstance(batches, pa.Table) else pa.Table.from_batches(batches, TASK_SCHEMA)
    out = {}
    for name in names:
        sub = t.filter(pc.equal(t["table"], name))
        out[name] = sub.select([f.name for f in table_schema(name)]).cast(table_schema(name))
    return out


# Ledger metadata for a disk's checks: a mapping, or a function of the disk's bookie id giving one (the audit's
# tasks: the ledgers placing entries on that bookie, others looked up); None: none given (pass 7 skipped).
Metadata = Mapping | Callable[[str], Mapping] | None


def scan_disk(disk: DiskInput, metadata: Metadata, run: RunInfo, memory=None) -> list[pa.RecordBatch]:
    """All of ``iter_disk`` at once (small disks, tests, ``bkdisk scan-disk``)."""
    return list(iter_disk(disk, metadata, run, memory=memory))


def iter_disk(disk: DiskInput, metadata: Metadata, run: RunInfo, *, guard: bool = True,
              memory=None, preload: bool = True, scrub=None, space: bool = True) -> Iterator[pa.RecordBatch]:
    """Check one disk with the fsck library and list its replicas from fsck's entry-log scans (with
    payload SHA-256), each entry log's in batches of at most ``replica_batch_rows(memory)`` rows; the
    disks row comes last.

    Never raises for a bad disk: a disk whose dirs cannot be found is one ``unreadable`` disks row;
    any other failure ends with a ``not_audited`` row carrying the error (the job then ignores the
    replicas that disk yielded before failing). ``memory``: the check's diskio.spill.MemoryLimit
    (--memory-limit, --tmp-dir; default 1 GiB and the system's temporary folder). The dirs and the
    cookie are read here; the scan, which reads through memory maps, runs in a forked child
    (``guard``, diskio/fault_guard.py), so that a read that faults (SIGBUS: an I/O error under a map,
    a file cut short) or a scan that dies any other way ends the disk with a ``not_audited`` row
    naming the file and the bytes being read, instead of killing the task, and with it the whole job.
    ``preload``: load the checker here before forking, for the children of a process that scans
    disk after disk (an audit task); a process that scans one disk leaves it to its child, and holds
    only the rows it passes on. ``space``: the disk's rows of ``bkdisk space`` (a row a ledger) too.
    """
    t0 = time.perf_counter()

    def disk_row(status: str, bookie_id: str | None, error: str | None, **kw) -> pa.RecordBatch:
        cols = {"path": [disk.path], "status": [status], "error": [error],
                "scan_seconds": [round(time.perf_counter() - t0, 3)]}
        cols.update({k: [v] for k, v in kw.items()})
        return task_batch("disks", run, bookie_id, cols, 1)

    elsewhere = wrong_host(disk.host)
    if elsewhere:   # another host's disk: its path here is another disk, or nothing
        yield disk_row("not_audited", disk.bookie_id, elsewhere)
        return
    try:
        dirs = from_conf(disk.path) if os.path.isfile(disk.path) else discover(disk.path)
    except (BkdiskError, OSError) as e:
        yield disk_row("unreadable", disk.bookie_id, str(e).splitlines()[0])
        return
    found = bookie_id_of(dirs)
    if disk.bookie_id and found and disk.bookie_id != found:   # the wrong disk, or the wrong name for it
        yield disk_row("not_audited", disk.bookie_id, f"given as bookie {disk.bookie_id}, its cookie says {found}")
        return
    bid = disk.bookie_id or found
    if bid is None:   # its copies could be counted for no bookie: said, never dropped silently
        yield disk_row("not_audited", None, "no bookie id: no cookie could be read; name the bookie "
                       "(bookie_id<TAB>path in --disks-file, or scan-disk --bookie-id)")
        return

    def scan() -> Iterator[pa.RecordBatch]:
        try:
            yield from _scan(dirs, bid, metadata, run, disk_row, memory, scrub, space)
        except Exception as e:   # noqa: BLE001 - a task reports its disk as not audited instead of failing the job
            yield disk_row("not_audited", bid, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")

    if not guard:
        yield from scan()
        return
    if preload:
        load_scanners()

    def produce(sink) -> None:   # in the child
        with collector_eased(), ipc.new_stream(sink, TASK_SCHEMA) as w:
            for b in scan():
                w.write_batch(b)

    last = None   # the disk's row, passed on once the child's end is known: one row a disk
    with fault_guard.child_stream(produce) as (src, outcome):
        try:
            for b in ipc.open_stream(src):
                if batch_table(b) == "disks":
                    last = b
                else:
                    yield b
        except (pa.ArrowInvalid, OSError):   # the stream stops mid-batch when the child died writing it
            pass
        death = outcome()
    if death is not None:   # even after its row was written: the disk is not counted as audited
        yield disk_row("not_audited", bid, death)
    elif last is not None:
        yield last
    else:
        yield disk_row("not_audited", bid, "the scan ended without the disk's row")


def load_scanners() -> None:
    """Import the checker and load a first kernel in this process (once): every guarded scan's forked
    child inherits them (numba, its runtime and code generator) instead of loading them for each disk."""
    import bkdisk.bookie.inventory  # noqa: F401 - imported here, before the fork, for the children
    import bkdisk.fsck.api  # noqa: F401
    from bkdisk.diskio.kernels import last_nonzero
    last_nonzero(np.zeros(8, np.uint8))   # numba's first load of a cached kernel: its runtime


def replica_batch_rows(memory=None) -> int:
    """Replica rows per batch: a batch in TASK_SCHEMA (its null columns allocated too) is built in the
    scan's process, and read and written again by the one that waits for it (scan-disk's Parquet
    writer, an audit task's), while the check's kept scans are held: a batch gets a bounded share of
    the limit, whatever the size of an entry log."""
    from bkdisk.diskio.spill import MemoryLimit
    rows = (memory or MemoryLimit()).share(REPLICA_BATCH_SHARE) // REPLICA_ROW_BYTES
    return int(min(MAX_REPLICA_BATCH_ROWS, max(1, rows)))


def _replica_row_bytes() -> int:
    """Bytes of one replica row in TASK_SCHEMA, about: every column's width (a null column's buffer
    too), a string's offset and the text of a replica's strings (the payload hash's 64 hex digits,
    a short name for the others)."""
    named = {"table"} | {name for name, _t in RUN_FIELDS + REPLICA_FIELDS}
    n = 0
    for f in TASK_SCHEMA:
        if pa.types.is_string(f.type):
            n += 4 + (0 if f.name not in named else 64 if f.name == "payload_sha256" else 16)
        else:
            n += max(1, f.type.bit_width // 8)
    return n + len(TASK_SCHEMA) // 8 + 1   # validity bits


REPLICA_ROW_BYTES = _replica_row_bytes()
REPLICA_BATCH_SHARE = 1 / 32            # of --memory-limit: one batch of replica rows
MAX_REPLICA_BATCH_ROWS = 1 << 17


def replica_logs(ctx, bid: str, rows: int) -> Iterator:
    """The entry logs fsck scanned (with payload hashes), as inventory rows in ledger-dir then log-id
    order, each log in parts of at most ``rows`` rows. A log that could not be read fails the disk's
    audit, as when the inventory scans it: its copies must not be counted as intact or as missing (an
    unlistable dir is a finding already)."""
    from bkdisk.bookie.inventory import ledger_dir_name, log_rows
    from bkdisk.entrylogs.scan_parts import log_scan_parts
    scans = ctx.log_scans
    names = [ledger_dir_name(d) for d in ctx.dirs.ledger_dirs]
    for lf in sorted(ctx.log_files, key=lambda f: (f.dir_index, f.log_id)):
        scan = scans[lf.path]
        if isinstance(scan, Exception):
            raise scan
        for part in log_scan_parts(scan, rows):
            yield log_rows(bid, names[lf.dir_index], lf.log_id, part)


def _scan(dirs, bid: str, metadata: Metadata, run: RunInfo, disk_row, memory=None, scrub=None, space=True) -> Iterator:
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions

    if callable(metadata):
        metadata = metadata(bid)
    # One read of each entry log gives the replicas (fsck's, hashing payloads; --state: the logs not due light)
    light, hints = (scrub.begin(dirs, bid), scrub.header_offsets) if scrub else (frozenset(), None)
    opts = CheckOptions(metadata=metadata, payload_hash="sha256", entry_lengths=True, light_logs=light,
                        light_hints=hints)
    opts.memory = memory if memory is not None else opts.memory
    report = check_bookie(dirs, opts)
    try:
        yield from _disk_rows(report, dirs, bid, metadata, run, disk_row, replica_batch_rows(opts.memory), scrub, space)
    finally:
        report.close()


def finding_batches(fs: list, run: RunInfo, bid: str, found_at=None) -> Iterator[pa.RecordBatch]:
    """A disk's findings as batches of FINDINGS_BATCH rows (a million findings' columns at once: gigabytes)."""
    for lo in range(0, len(fs), FINDINGS_BATCH):
        part = fs[lo:lo + FINDINGS_BATCH]
        yield task_batch("findings", run, bid, {
            "code": [f.code for f in part], "severity": [f.severity.value for f in part],
            "pass_no": [f.pass_no for f in part], "path": [f.path for f in part],
            "offset": [f.offset for f in part],
            "ledger_scope": [to_signed(f.scope or 0) if f.ledger is not None else None for f in part],
            "ledger_id": [to_signed(f.ledger) for f in part], "entry_id": [f.entry for f in part],
            "message": [f.message for f in part], "found_at": [found_at] * len(part)}, len(part))


def _disk_rows(report, dirs, bid: str, metadata: Mapping | None, run: RunInfo, disk_row, batch_rows: int, scrub=None,
               space_wanted=True) -> Iterator[pa.RecordBatch]:
    from bkdisk.audit.not_indexed import NotIndexed
    fs = report.findings
    yield from finding_batches(fs, run, bid, scrub and scrub.now)
    yield from scrub.carried_batches(run, bid) if scrub else ()   # the findings of logs not deep-read this run
    # The index was read when fsck's index passes ran (for DbLedgerStorage: over its RocksDB databases).
    index_read = dirs.storage_kind != "empty" and not any(p.skipped for p in report.passes
                                                          if p.number in INDEX_PASSES)
    gaps = NotIndexed(fs)   # a copy the bookie's index does not hold is not served
    entries = 0
    for rows in replica_logs(report.context, bid, batch_rows):
        if len(rows) == 0:
            continue
        inv = scrub.replica_columns(rows) if scrub else rows.arrow()   # (--state: a light log's from the state)
        e = rows.entries
        entries += len(rows)
        yield task_batch("replicas", run, bid, {
            "ledger_scope": signed(e["scope"]), "ledger_id": signed(e["ledger"]), "entry_id": e["entry"],
            "payload_sha256": inv["payload_sha256"], "digest_ok": inv["digest_ok"],
            "digest_type": inv["digest_type"], "size": e["size"].astype(np.int64),
            "payload_len": inv["payload_len"].cast(pa.int64()), "ledger_dir": inv["ledger_dir"],
            "log_id": inv["log_id"], "offset": e["offset"],
            "indexed": gaps.indexed(e["scope"], e["ledger"], e["entry"]) if index_read else pa.nulls(len(rows)),
            "lac": e["lac"], "ledger_length": e["length"], "entry_format": e["format"].astype(np.int32)},
            len(rows))
    # Of the findings, what the disk's row and the scrub need is kept; the rest goes before keys and accounting.
    exit_code, deep = report.exit_code, scrub.deep_found(fs) if scrub else []
    del fs, gaps
    report.findings = []
    for cols in key_batches(report.context):
        yield task_batch("ledger_keys", run, bid, cols, len(cols["ledger_id"]))
    if space_wanted:   # (what the batches before freed, given back: the accounting's peak would stand on it)
        free_heap_returned()
        pa.default_memory_pool().release_unused()
    space, space_error = space_rows(dirs, bid, metadata, report.context) if space_wanted else ([], None)
    for part in space:
        yield task_batch("space", run, bid, {f: [r.get(f) for r in part] for f, _t in SPACE_FIELDS}, len(part))
    st = report.stats
    status = "ok" if exit_code == 0 and not (scrub and scrub.carries_errors()) else "errors"
    yield disk_row(status, bid, space_error, storage_class=storage_class(dirs.storage_kind, index_read),
                   index_read=index_read,
                   bytes=int(st.get("entry_log_bytes", 0)) + int(st.get("journal_bytes", 0)),
                   entries=entries, fsck_exit_code=exit_code,
                   **(scrub.finish(deep, report.context.log_scans) if scrub else {}))
