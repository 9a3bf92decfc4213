"""The Spark salvage job: the audit's disk tasks scan every disk (copies with their LAC and cumulative
length, the master keys each disk keeps), the ledgers the given metadata knows are set aside, and
Spark groups the rest into buckets of ledgers (a hash of the ledger id), each ledger of a bucket
inferred by bookie.salvage_inference in its task. The
driver reads back only the per-ledger results, a bounded batch at a time, to write the metadata files.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from bkdisk.audit.errors import AuditError, first_line
from bkdisk.audit.metadata_source import MetadataSource
from bkdisk.audit.rows import AUDITED, TASK_SCHEMA, DiskInput, RunInfo, table_schema
from bkdisk.bookie.layout import discover, from_conf
from bkdisk.bookie.metadata_dir import file_stem
from bkdisk.bookie.salvage_inference import BookieLedger, Copy, Salvaged, salvage_ledger
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import parse_entry
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.errors import BkdiskError, FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.metadata import serialize_metadata
from bkdisk.formats.paths import CURRENT_DIR, entry_log_name

# Each inferred field: its value column(s), then ``<field>_confidence`` and ``<field>_why``.
FIELDS = (("ensemble_size", pa.int32()), ("write_quorum", pa.int32()), ("ack_quorum", pa.int32()),
          ("ensembles", pa.string()), ("digest_type", pa.string()), ("password_found", pa.bool_()),
          ("last_entry_id", pa.int64()), ("length", pa.int64()), ("state", pa.string()))


def _field(name: str) -> str:
    """The name the confidence and why columns take: ``password_found`` is the password's."""
    return "password" if name == "password_found" else name


LEDGER_FIELDS = ([("ledger_scope", pa.int64()), ("ledger_id", pa.int64()), ("ledger", pa.string()),
                  ("metadata_written", pa.bool_()), ("no_metadata_because", pa.string()),
                  ("bookies_with_copies", pa.list_(pa.string())), ("entries_found", pa.int64()),
                  ("copies", pa.int64()), ("master_key", pa.string())]
                 + [c for name, t in FIELDS for c in ((name, t), (f"{_field(name)}_confidence", pa.string()),
                                                       (f"{_field(name)}_why", pa.string()))]
                 + [("lost_entries", pa.list_(pa.int64())), ("dropped_entries", pa.list_(pa.int64())),
                    ("under_replicated", pa.list_(pa.int64()))])
LEDGERS_SCHEMA = pa.schema(LEDGER_FIELDS)
# The task's result: a ledger's row and its serialized metadata (null when none is written).
RESULT_SCHEMA = pa.schema(LEDGER_FIELDS + [("metadata", pa.binary())])
COPY_COLUMNS = ("bookie_id", "entry_id", "digest_ok", "lac", "ledger_length", "size", "entry_format", "ledger_dir",
                "log_id", "offset", "payload_sha256", "indexed")
KEY_COLUMNS = ("bookie_id", "master_key", "explicit_lac", "key_source")
# Where a bookie's key row comes from its index (an .idx header, DbLedgerStorage's ledgers index): the
# bookie holds an index of the ledger, which it reads its copies through.
INDEX_KEY_SOURCES = ("index", "ledgers_index")
KEY = ("ledger_scope", "ledger_id")
# Ledgers go to Spark's Python workers a bucket at a time, a bucket holding about this many copies:
# one call a ledger costs PySpark a round trip of Arrow batches each (milliseconds: hours for 10^6
# ledgers), and a bucket of this size is a few tens of MiB of Python objects in its worker.
BUCKET_COPIES = 50_000
WRITE_BATCH_ROWS = 4096   # results the driver holds at once while writing metadata files


@dataclass(frozen=True)
class SalvageOptions:
    candidates: tuple[bytes, ...] = ()
    ack_quorum: int | None = None
    custom_metadata: tuple[tuple[str, bytes], ...] = ()



def _ensembles_json(s: Salvaged) -> str | None:
    ens, pos = s.ensembles.value, s.positions.value
    if not isinstance(ens, tuple) or not isinstance(pos, tuple):
        return None
    return json.dumps([{"first_entry_id": f, "bookies": list(e), "confidence": list(c)}
                       for (f, e), c in zip(ens, pos)])


def result_row(s: Salvaged, copies: list[Copy]) -> dict:
    """One ledger's row of the ledgers table (the password itself never: only whether it was found)."""
    lid = s.ledger
    row: dict = {"ledger_scope": lid.scope - (1 << 64) if lid.scope >= 1 << 63 else lid.scope,
                 "ledger_id": lid.ledger - (1 << 64) if lid.ledger >= 1 << 63 else lid.ledger,
                 "ledger": file_stem(lid), "metadata_written": s.metadata is not None,
                 "no_metadata_because": s.no_metadata_because,
                 "bookies_with_copies": sorted({c.bookie for c in copies}),
                 "entries_found": len({c.entry for c in copies}), "copies": len(copies),
                 "master_key": None if s.master_key is None else s.master_key.hex(),
                 "lost_entries": s.lost_entries, "dropped_entries": s.dropped_entries,
                 "under_replicated": s.under_replicated,
                 "metadata": None if s.metadata is None else serialize_metadata(s.metadata)}
    values = {"ensembles": _ensembles_json(s), "password_found": s.password.value is not None}
    for name, _t in FIELDS:
        f = getattr(s, _field(name))
        row[name] = values[name] if name in values else f.value
        row[f"{_field(name)}_confidence"], row[f"{_field(name)}_why"] = f.confidence, f.why
    return row


def infer_buckets(options: SalvageOptions, roots: dict[str, str]) -> Callable[[pa.Table, pa.Table], pa.Table]:
    """The function Spark runs on each bucket of ledgers: the copies and the keys their bookies keep of
    every ledger the bucket holds, grouped here by ledger and each ledger inferred in id order.
    ``roots``: bookie id -> the disk any executor may read (HMAC digests are verified there)."""
    reader = CopyReader(roots)

    def infer(copies_t: pa.Table, keys_t: pa.Table) -> pa.Table:
        ledgers: dict[tuple[int, int], tuple[list[Copy], dict[str, tuple[bytes | None, int | None]]]] = {}
        indexed_on: dict[tuple[int, int], set[str]] = {}   # ledger -> the bookies that hold an index of it
        for scope, ledger, b, key, lac, source in zip(*(keys_t[c].to_pylist() for c in (*KEY, *KEY_COLUMNS))):
            merged = ledgers.setdefault((scope, ledger), ([], {}))[1]
            k0, l0 = merged.get(b, (None, None))
            merged[b] = (k0 or (bytes.fromhex(key) if key else None),
                         lac if l0 is None or (lac is not None and lac > l0) else l0)
            if source in INDEX_KEY_SOURCES:
                indexed_on.setdefault((scope, ledger), set()).add(b)
        for scope, ledger, b, e, ok, lac, length, size, fmt, d, log, off, payload, indexed in zip(
                *(copies_t[c].to_pylist() for c in (*KEY, *COPY_COLUMNS))):
            served = indexed is not False and b in indexed_on.get((scope, ledger), ())
            ledgers.setdefault((scope, ledger), ([], {}))[0].append(
                Copy(b, e, ok is not False, ok is True, lac, length, size, fmt or 1,
                     None if log is None else (d, log, off), payload, served))
        rows = []
        for (scope, ledger), (copies, merged) in sorted(ledgers.items()):
            lid = LedgerId(scope & 0xFFFF_FFFF_FFFF_FFFF, ledger & 0xFFFF_FFFF_FFFF_FFFF)
            keys = [BookieLedger(b, k, lac) for b, (k, lac) in sorted(merged.items())]
            s = salvage_ledger(lid, copies, keys, options.candidates, options.ack_quorum, options.custom_metadata,
                               reader.check_hmac)
            rows.append(result_row(s, copies))
        return pa.Table.from_pylist(rows, RESULT_SCHEMA)
    return infer


class CopyReader:
    """A copy's stored bytes, read back from its entry log on a disk this executor may read."""

    def __init__(self, roots: dict[str, str]):
        self.roots = roots
        self.dirs: dict[str, dict[str, str]] = {}   # bookie -> ledger dir name -> its path

    def read(self, c: Copy) -> bytes | None:
        from bkdisk.bookie.inventory import ledger_dir_name
        root = self.roots.get(c.bookie)
        if root is None or c.where is None:
            return None
        if c.bookie not in self.dirs:
            try:
                found = from_conf(root) if os.path.isfile(root) else discover(root)
            except (BkdiskError, OSError):
                found = None
            self.dirs[c.bookie] = {} if found is None else {ledger_dir_name(d): d for d in found.ledger_dirs}
        ledger_dir, log_id, offset = c.where
        d = self.dirs[c.bookie].get(ledger_dir)
        if d is None:
            return None
        try:
            with open(os.path.join(d, CURRENT_DIR, entry_log_name(log_id)), "rb") as f:
                f.seek(offset + SIZE_PREFIX_SIZE)
                data = f.read(c.size)
        except OSError:
            return None
        return data if len(data) == c.size else None

    def check_hmac(self, password: bytes, copies: Sequence[Copy]) -> tuple[int, int]:
        ok = bad = 0
        for c in copies:
            data = self.read(c)
            if data is None:
                continue
            try:
                good = parse_entry(data, digest_type=DigestType.HMAC).digest_ok(DigestType.HMAC, password)
            except FormatError:
                good = False
            ok, bad = ok + good, bad + (not good)
        return ok, bad


@dataclass
class SalvageRun:
    disks: list[dict]
    results_dir: str


def run_salvage(spark, disks: list[DiskInput], scan_files: list[str], source: MetadataSource, work: str,
                run: RunInfo, options: SalvageOptions, *, progress=None, scans_per_host: int | None = None,
                memory=None) -> SalvageRun:
    """Scan ``disks`` with the audit's disk tasks (and take ``scan_files``' rows), leave out the ledgers
    ``source`` knows, infer every other ledger in Spark; the results go to ``work/.scratch/results``."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from bkdisk.audit.job import disk_task, numba_cache_writable, reconcile
    from bkdisk.audit.metadata_tables import known_keys, read_metadata, segments
    from bkdisk.audit.replica_files import remove_unfinished
    from bkdisk.audit.scan_stage import scan_disks

    if not disks and not scan_files:
        raise AuditError("nothing to salvage: give disks (paths, --disks-file) or --scan-files")
    scratch = os.path.join(work, ".scratch")
    replicas_dir = os.path.join(scratch, "replicas")
    os.makedirs(replicas_dir)
    mt = read_metadata(spark, source, scratch)
    task_rows = spark.read.schema(from_arrow_schema(TASK_SCHEMA))
    frames: list = []
    disk_rows: list[dict] = []
    if disks:
        numba_cache_writable()
        task = disk_task(run, source, mt.near_dir, replicas_dir, scans_per_host, memory, space=False)
        disk_rows, folders = scan_disks(spark, disks, task, os.path.join(scratch, "rows"), progress)
        frames.append(task_rows.parquet(*folders))
    if scan_files:
        files = task_rows.parquet(*scan_files)
        frames.append(files)
        disk_rows += [r.asDict() for r in files.filter(F.col("table") == "disks")
                      .select(*[f.name for f in table_schema("disks")]).collect()]
        files.filter(F.col("table") == "replicas").select(*table_schema("replicas").names).write.mode(
            "append").parquet(replicas_dir)
    remove_unfinished(replicas_dir)
    disk_rows = reconcile(disk_rows, (), run)
    rows = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    _partly_read(rows, disk_rows)
    audited = sorted({d["bookie_id"] for d in disk_rows if d["status"] in AUDITED and d["bookie_id"]})
    key = ["ledger_scope", "ledger_id"]
    known = segments(spark, mt).select(*key).unionByName(known_keys(spark, mt).select(*key)).distinct()
    copies = (spark.read.schema(from_arrow_schema(table_schema("replicas"))).parquet(replicas_dir)
              if _has_parquet(replicas_dir) else spark.createDataFrame([], from_arrow_schema(table_schema("replicas"))))
    # a bound from the files' footers, not a pass over the rows: every copy, salvaged or known
    buckets = max(1, -(-copies.count() // BUCKET_COPIES))
    copies = (copies.filter(F.col("bookie_id").isin(audited)).select(*key, *COPY_COLUMNS)
              .unionByName(unreadable_copies(rows, audited, copies.schema)).join(known, key, "left_anti"))
    keys = (rows.filter((F.col("table") == "ledger_keys") & F.col("bookie_id").isin(audited))
            .select(*key, *KEY_COLUMNS).join(known, key, "left_anti"))
    results = os.path.join(scratch, "results")
    # HMAC digests are verified where any executor may read the disk (one bound to a host: not here)
    roots = {d["bookie_id"]: os.path.abspath(d["path"]) for d in disk_rows
             if d["status"] in AUDITED and d["bookie_id"] and d["path"]
             and any(x.path == d["path"] and x.host is None for x in disks)}
    bucket = F.pmod(F.xxhash64(*key), F.lit(buckets)).alias("bucket")
    try:
        copies.select(bucket, *copies.columns).groupBy("bucket").cogroup(
            keys.select(bucket, *keys.columns).groupBy("bucket")).applyInArrow(
            infer_buckets(options, roots), from_arrow_schema(RESULT_SCHEMA)).write.parquet(results)
    except Exception as e:   # noqa: BLE001 - Py4J and PySpark errors: one line, not a JVM stack
        raise AuditError(f"the salvage stage failed: {first_line(e)}") from None
    return SalvageRun(disk_rows, results)




# What a disk's check says of copies its scan cannot have seen: storage it could not read (a ledger dir with
# no current folder, as an unmounted disk leaves it; a file or folder it could not read; an entry log it
# could not list), or entries acknowledged that only its journal holds (after lastMark, not yet in ledger
# storage). Such a disk's copies are not all it holds: salvage counts it as a disk not read.
UNREAD_CODES = {
    "LAYOUT_NO_CURRENT": "some of its storage could not be read",
    "FILE_UNREADABLE": "some of its storage could not be read",
    "LOG_UNLISTED": "some of its storage could not be read",
    "REPLAY_NOT_IN_STORAGE": "its journal holds entries its ledger storage lacks yet (start the bookie once, "
                             "so that its journal's replay writes them, then salvage again)",
}
PARTLY_READ = "partly_read"


def _partly_read(rows, disk_rows: list[dict]) -> None:
    """Each disk read whose check says it holds copies its scan did not see: status PARTLY_READ (not
    AUDITED), the first such finding its error."""
    from pyspark.sql import functions as F
    found = (rows.filter((F.col("table") == "findings") & F.col("code").isin(*UNREAD_CODES))
             .select("bookie_id", "code", "message").limit(10_000).collect())
    first: dict[str, str] = {}
    for r in found:
        first.setdefault(r["bookie_id"], f"{UNREAD_CODES[r['code']]}: {r['code']} {r['message']}")
    for d in disk_rows:
        if d["status"] in AUDITED and d["bookie_id"] in first:
            d["status"], d["error"] = PARTLY_READ, first[d["bookie_id"]]


# What a disk's check says of a copy its own index holds and its entry log cannot give back (the log gone,
# cut short, or holding another entry where the index points): the bookie stored that entry, so it sits in
# the entry's write set, a damaged copy (BookKeeper's read of it fails), not a copy it never had. Without it,
# copies lost with a log cut on one bookie looked like an ensemble change to a bookie no disk shows.
UNREADABLE_COPY_CODES = ("INDEX_LOCATION_MISSING_LOG", "INDEX_LOCATION_OUT_OF_RANGE", "DBINDEX_LOCATION_MISSING_LOG",
                         "DBINDEX_LOCATION_WRONG")


def unreadable_copies(rows, audited: list[str], schema):
    """The copies ``audited`` disks' indexes hold and their logs cannot give back, as damaged copy rows
    (``COPY_COLUMNS``, digest_ok false, indexed)."""
    from pyspark.sql import functions as F
    found = (rows.filter((F.col("table") == "findings") & F.col("code").isin(*UNREADABLE_COPY_CODES)
                         & F.col("bookie_id").isin(audited) & F.col("ledger_id").isNotNull()
                         & F.col("entry_id").isNotNull())
             .select("ledger_scope", "ledger_id", "bookie_id", "entry_id").distinct())
    made = {"digest_ok": F.lit(False), "indexed": F.lit(True)}
    return found.select(*KEY, *[F.col(c) if c in ("bookie_id", "entry_id") else
                                made.get(c, F.lit(None)).cast(schema[c].dataType).alias(c) for c in COPY_COLUMNS])


def _has_parquet(folder: str) -> bool:
    return any(n.endswith(".parquet") and not n.startswith((".", "_")) for n in os.listdir(folder))


def result_batches(results_dir: str, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The per-ledger results, a bounded batch at a time (the driver never holds them all)."""
    for n in sorted(os.listdir(results_dir)):
        if n.endswith(".parquet") and not n.startswith((".", "_")):
            yield from pq.ParquetFile(os.path.join(results_dir, n)).iter_batches(WRITE_BATCH_ROWS, columns=columns)
