"""The Spark audit job: one task per disk scanning it in-process, the per-disk rows as DataFrames,
the cluster tables joined in Spark, and every table written as Parquet under the output folder.

A task writes its disk's replicas itself, as that disk's file of ``OUT/replicas``
(audit/replica_files.py); its findings and its disk's row go to Spark as rows. Only small things
reach the driver: the disks table (one row per disk) and the fault tables' summaries for the
reports. Replicas are read by Spark from their files, never collected to the driver.
"""
from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from bkdisk.audit import jvm_archive, spark_logging
from bkdisk.audit.arrow_no_pandas import arrow_without_pandas
from bkdisk.audit.errors import AuditError, first_line
from bkdisk.audit.metadata_source import MetadataSource
from bkdisk.audit.placement import LOCALITY_CONF, wrong_host
from bkdisk.audit.replica_files import remove_unfinished, replica_file, write_replicas
from bkdisk.audit.rows import AUDITED, TASK_SCHEMA, DiskInput, RunInfo, iter_disk, table_schema
from bkdisk.audit.spark_logging import DRIVER_JAVA_OPTIONS, start_gateway, with_log_settings
from bkdisk.diskio.config import private_folder
from bkdisk.formats.errors import BkdiskError

# pyspark, the optional extra 'audit', loads in the functions that drive Spark: the rows, the reports
# and scan-disk run where it is not installed. metadata_tables, scan_stage and tables import this
# module, so it imports them in the functions that use them.

FAULT_TABLES = ("under_replicated", "corrupt_copies", "divergent", "orphans", "missing_ledgers")
# Counts behind the report's replication histogram (every expected entry, healthy ones included).
EXTRA_TABLES = ("replication_histogram",)
ALL_TABLES = ("disks", "findings", "replicas") + FAULT_TABLES + EXTRA_TABLES + ("space",)

# Settings the audit depends on; --conf may override the rest, never these two.
FIXED_CONF = {"spark.speculation": "false",            # a disk is never scanned by two tasks at once
              "spark.sql.execution.arrow.pyspark.enabled": "true"}
DEFAULT_CONF = {"spark.ui.showConsoleProgress": "false", "spark.sql.adaptive.enabled": "true",
                "spark.sql.session.timeZone": "UTC",
                # The rows passed to Spark (findings, disks, scan-disk files' rows) are cached once
                # and read by every table: without column compression building the cache costs the
                # JVM less CPU (it spills to disk when memory is short: MEMORY_AND_DISK).
                "spark.sql.inMemoryColumnarStorage.compressed": "false"}
LOCAL_CONF = {"spark.ui.enabled": "false"}   # a laptop run needs no web UI (nor its port)
# The driver JVM lives minutes, not days: most of its CPU went to the JIT's optimizing compiler and
# to parallel GC threads, taken from the scan tasks on a small host (a light run's JVM: 60-67 s of CPU
# with the defaults, 36-39 s with these), and the classes it loads are mapped from the archive
# `bkdisk warm-up` wrote (audit/jvm_archive.py). --conf spark.driver.extraJavaOptions=... replaces them.
# C1 alone reserves 48 MB for compiled code, which a session that plans many queries (a notebook's, a
# test run's) fills: the JVM stops compiling, and a task that needs room for a generated class dies of
# a VirtualMachineError ("Out of space in CodeCache"), which ends Spark. 240 MB is what a JVM with both
# compilers reserves; it is address space, taken only as code is compiled.
DRIVER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"


def project_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spark_session(master: str | None, conf: dict[str, str], app: str = "bkdisk-audit",
                  defaults: dict[str, str] | None = None):
    """A session for the audit. ``master`` None: the one spark-submit gave, else ``local[*]``.
    Settings, weakest first: the audit's defaults (and ``defaults``), spark-submit's own ``--conf``,
    ``conf`` (the audit's ``--conf``), then FIXED_CONF."""
    from pyspark.sql import SparkSession
    b = SparkSession.builder.appName(app)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    if master is not None:
        b = b.master(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = session_settings(master, conf, defaults, _submitted_keys())
    start_gateway(settings, master, app)
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def command_session(master: str | None, conf: dict[str, str], defaults: dict[str, str], what: str,
                    app: str = "bkdisk-audit") -> Iterator:
    """The session a command drives (``spark_session``), for its ``with`` block: Ctrl-C ends it quietly
    (spark_logging.quiet_interrupts), Spark that does not start and a Py4J or PySpark error in the block
    are one line (AuditError: "``what`` failed: ..."), and the session is stopped after the block unless
    it was the caller's (tests, notebooks)."""
    from pyspark.sql import SparkSession
    ours = SparkSession.getActiveSession() is None
    with spark_logging.quiet_interrupts():
        try:
            spark = spark_session(master, conf, app=app, defaults=defaults)
        except Exception as e:   # noqa: BLE001 - a bad --conf or master: one line, not a JVM stack
            raise AuditError(f"Spark did not start: {first_line(e)}") from None
        spark_logging.take_interrupts()   # (the SparkContext installed its own handler)
        try:
            yield spark
        except BkdiskError:
            raise
        except Exception as e:   # noqa: BLE001 - Py4J and PySpark errors: one line
            raise AuditError(f"{what} failed: {first_line(e)}") from None
        finally:
            if ours:
                spark_logging.stop(spark)


def session_settings(master: str | None, conf: dict[str, str], defaults: dict[str, str] | None,
                     submitted: set[str]) -> dict[str, str]:
    """The settings ``spark_session`` gives Spark (``submitted``: the keys spark-submit was given)."""
    local = LOCAL_CONF if (master or "").startswith("local") else {}
    jvm = f"{DRIVER_JVM_OPTIONS} {jvm_archive.use_options()}".strip()
    settings = dict(DEFAULT_CONF, **{DRIVER_JAVA_OPTIONS: jvm}, **LOCALITY_CONF, **local, **(defaults or {}))
    # Executors import this package from where the driver has it unless the venv shipped it.
    settings["spark.executorEnv.PYTHONPATH"] = project_root()
    settings = {k: v for k, v in settings.items() if k not in submitted}
    settings.update(conf)
    settings.update(FIXED_CONF)
    if DRIVER_JAVA_OPTIONS not in submitted:
        settings = with_log_settings(settings)
    return settings


def _submitted_keys() -> set[str]:
    """The settings spark-submit was given (a builder's options would override them), none otherwise."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return set()
    from pyspark import SparkConf, SparkContext
    SparkContext._ensure_initialized()
    return {k for k, _v in SparkConf().getAll()}


def _writable(d: str) -> bool:
    try:
        os.makedirs(d, exist_ok=True)
    except OSError:
        return False
    return os.access(d, os.W_OK)


def numba_cache_writable() -> str | None:
    """Executors may run from a read-only install: make numba's cache folder writable before the
    first kernel loads. A writable BKDISK_NUMBA_CACHE_DIR or NUMBA_CACHE_DIR is kept; with neither,
    numba caches beside the package when it can; else ``<tmp>/bkdisk-numba-<uid>`` (set as
    BKDISK_NUMBA_CACHE_DIR, which diskio/config.py applies). Returns the folder chosen, None for numba's."""
    given = [os.environ[k] for k in ("BKDISK_NUMBA_CACHE_DIR", "NUMBA_CACHE_DIR") if os.environ.get(k)]
    if given and _writable(given[0]):
        os.environ["BKDISK_NUMBA_CACHE_DIR"] = given[0]
        return given[0]
    spec = importlib.util.find_spec("bkdisk.entrylogs")   # (a folder numba caches kernels beside)
    if not given and spec is not None and spec.origin and os.access(os.path.dirname(spec.origin), os.W_OK):
        return None
    d = private_folder(os.path.join(tempfile.gettempdir(), f"bkdisk-numba-{os.getuid()}"))
    if d is not None:   # (else someone else's folder: not loaded from; the kernels compile, said once)
        os.environ["BKDISK_NUMBA_CACHE_DIR"] = d
    return d


def slots_dir() -> str:
    """Where a host's scan slots live: one lock file per slot, shared by every executor and audit
    of the host's user (``$BKDISK_SCAN_SLOTS_DIR`` to choose)."""
    return os.environ.get("BKDISK_SCAN_SLOTS_DIR") or os.path.join(tempfile.gettempdir(),
                                                                   f"bkdisk-scan-slots-{os.getuid()}")


def try_scan_slot(limit: int, folder: str | None = None) -> int | None:
    """Take one of the host's ``limit`` scan slots without waiting: an open file descriptor holding
    an exclusive ``flock`` on ``slot-<i>`` (released by ``os.close``, or by the kernel when the
    process dies), or None when all are taken."""
    folder = folder or slots_dir()
    os.makedirs(folder, exist_ok=True)
    for i in range(limit):
        fd = os.open(os.path.join(folder, f"slot-{i}"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            os.close(fd)
    return None


def scan_slot(limit: int, folder: str | None = None, poll: float = 0.2) -> int:
    """Wait for one of the host's ``limit`` scan slots (``try_scan_slot``)."""
    while True:
        fd = try_scan_slot(limit, folder)
        if fd is not None:
            return fd
        time.sleep(poll)


def disk_task(run: RunInfo, source: MetadataSource, near_dir: str, replicas_dir: str,
              scans_per_host: int | None = None, memory=None, scrub=None, space: bool = True
              ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each task runs over its partition of the disks frame (one disk per partition):
    the disk's replicas go into its file under ``replicas_dir``, its other rows to Spark. fsck's
    checks get the ledgers that place entries on the disk's bookie (``near_dir``, the metadata
    stage's) and look any other up in ``source``. A disk that names a host is read only there.
    With ``scans_per_host``, a task waits for a host-wide scan slot before it reads its disk, so
    at most that many disks are read at once on a host whatever the executors and cores there.
    ``memory`` (diskio.spill.MemoryLimit): each disk's check stays under it, spilling to its tmp dir.
    ``scrub`` (audit/scrub_run.TaskScrub, --state): each disk's plan, light and deep logs, new state rows.
    ``space``: the disk's rows of ``bkdisk space`` (a row a ledger) go with its other rows."""
    from bkdisk.audit.metadata_tables import bookie_metadata

    def metadata_for(bookie: str):
        return bookie_metadata(near_dir, bookie, source)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        numba_cache_writable()
        arrow_without_pandas()   # else each disk's forked scan loads pandas anew at its first conversion
        here = run.on_this_host()
        for b in batches:
            for d in b.to_pylist():
                slot = scan_slot(scans_per_host) if scans_per_host and not wrong_host(d["host"]) else None
                try:
                    on_disk = scrub.for_disk(d["path"], d["index"]) if scrub is not None else None
                    rows = iter_disk(DiskInput(d["path"], d["bookie_id"], d["host"]), metadata_for, here,
                                     memory=memory, scrub=on_disk, space=space)
                    yield from write_replicas(rows, replica_file(replicas_dir, d["index"]))
                finally:
                    if slot is not None:
                        os.close(slot)
    return task


@dataclass
class AuditResult:
    out: str
    run: RunInfo
    disks: list[dict]
    counts: dict[str, int]


def run_audit(spark, disks: list[DiskInput], scan_files: list[str], source: MetadataSource, out: str,
              run: RunInfo, *, progress: Callable[[int, int, int], None] | None = None,
              scans_per_host: int | None = None, memory=None, scrub=None) -> AuditResult:
    """Read the metadata (a stage of its own), scan ``disks`` as Spark tasks (each on its host when
    it names one), add the rows of ``scan_files``, join, write every table.
    ``scans_per_host`` bounds the disks read at once on one host, ``memory`` each disk's check
    (``disk_task``). ``scrub`` (audit/scrub_run.ScrubRun): the run keeps the scrub state, written
    once every table is."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from bkdisk.audit import tables
    from bkdisk.audit.metadata_tables import known_keys, read_metadata, segments
    from bkdisk.audit.scan_stage import scan_disks

    if not disks and not scan_files:
        raise AuditError("nothing to audit: give disks (paths, --disks-file) or --scan-files")
    out = os.path.abspath(out)   # the executors write into it: not relative to their working folders
    scratch = os.path.join(out, f".scratch-{run.run_id}")   # the stages' files; removed at the end
    shutil.rmtree(scratch, ignore_errors=True)
    replicas_dir = os.path.join(out, "replicas")
    shutil.rmtree(replicas_dir, ignore_errors=True)
    os.makedirs(replicas_dir)
    try:
        mt = read_metadata(spark, source, scratch)
        frames: list = []
        disk_rows: list[dict] = []
        if disks:
            numba_cache_writable()
            on_tasks = scrub.prepare(spark, scratch) if scrub is not None else None
            task = disk_task(run, source, mt.near_dir, replicas_dir, scans_per_host, memory, on_tasks)
            disk_rows, folders = scan_disks(spark, disks, task, os.path.join(scratch, "rows"), progress)
            if on_tasks is not None:   # (the tasks wrote their rows: the state's copies on the executors go)
                on_tasks.known.destroy()
            frames.append(spark.read.schema(from_arrow_schema(TASK_SCHEMA)).parquet(*folders))
        if scan_files:
            files = spark.read.schema(from_arrow_schema(TASK_SCHEMA)).parquet(*scan_files)
            frames.append(files)
            disk_rows += [r.asDict() for r in files.filter(F.col("table") == "disks")
                          .select(*[f.name for f in table_schema("disks")]).collect()]
        rows = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
        disk_rows = reconcile(disk_rows, mt.bookies, run)
        audited = sorted({d["bookie_id"] for d in disk_rows if d["status"] in AUDITED and d["bookie_id"]})
        not_audited = sorted({d["bookie_id"] for d in disk_rows if d["status"] not in AUDITED and d["bookie_id"]}
                             - set(audited))
        frames_out = {name: rows.filter(F.col("table") == name).select(*[f.name for f in table_schema(name)])
                      for name in ("findings", "replicas", "space")}
        frames_out["disks"] = spark.createDataFrame(disk_rows, from_arrow_schema(table_schema("disks")))
        frames_out["space"] = frames_out["space"].filter(F.col("bookie_id").isin(audited))   # as the replicas
        if scan_files:   # their replicas join the tasks' files (a disk not audited: none of its rows)
            frames_out["replicas"].filter(F.col("bookie_id").isin(audited)).sortWithinPartitions(
                *tables.ORDER["replicas"]).write.mode("append").parquet(replicas_dir)
        remove_unfinished(replicas_dir)   # what a task's process killed outright left half-written
        if not any(n.endswith(".parquet") and not n.startswith((".", "_")) for n in os.listdir(replicas_dir)):
            # no copies anywhere: the table still has its columns
            pq.write_table(table_schema("replicas").empty_table(), os.path.join(replicas_dir, "empty.parquet"))
        # Only disks that finished their scan count: a task publishes no file for a disk that did not, and
        # a scan-disk file's rows of such a disk are dropped.
        replicas = spark.read.schema(from_arrow_schema(table_schema("replicas"))).parquet(replicas_dir).filter(
            F.col("bookie_id").isin(audited))
        faults = tables.fault_tables(segments(spark, mt), replicas, audited, not_audited, known_keys(spark, mt))
        # The table that builds the frames the others share goes first, the ones those wait for last.
        kept = {n: (lambda f=f: f) for n, f in frames_out.items() if n != "replicas"}
        write_tables(spark, {"under_replicated": faults.pop("under_replicated"), "divergent": faults.pop("divergent"),
                             "orphans": faults.pop("orphans"), **kept, **faults}, out)
        counts = {name: _parquet_rows(os.path.join(out, name)) for name in ALL_TABLES}
        tables.release(spark)
        if scrub is not None:   # the run succeeded: its state replaces the last good one
            scrub.commit(disk_rows, [d.path for d in disks])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return AuditResult(out, run, disk_rows, counts)


# Tables written at once: a table is a few small Spark jobs and the calls into the JVM that build its
# plan, mostly the driver's time, which several threads overlap.
TABLE_WRITERS = 4


def write_tables(spark, builders: dict[str, Callable], out: str, writers: int = TABLE_WRITERS) -> None:
    """Build each frame and write it as ``out/<name>``, one sorted file each (the tables other than the
    replicas are small), ``writers`` at once, in the order given. The first failure cancels the other
    writes and is raised."""
    from bkdisk.audit import tables
    todo = list(builders)
    failed: list[BaseException] = []
    lock = threading.Lock()
    group = f"bkdisk-tables-{os.getpid()}-{id(builders)}"   # this call's jobs, cancelled together

    def worker() -> None:
        spark.sparkContext.setJobGroup(group, "the audit's tables")
        while not failed:
            with lock:
                if not todo:
                    return
                name = todo.pop(0)
            try:
                builders[name]().repartition(1).sortWithinPartitions(*tables.ORDER[name]).write.mode(
                    "overwrite").parquet(os.path.join(out, name))
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
                failed.append(e)
                spark.sparkContext.cancelJobGroup(group)
    # Daemon threads: a write still running after Ctrl-C never holds the process at its exit.
    threads = [threading.Thread(target=worker, name=f"table-writer-{i}", daemon=True)
               for i in range(max(1, min(writers, len(todo))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]


def _parquet_rows(folder: str) -> int:
    return pq.ParquetDataset(folder).read(columns=[]).num_rows


def default_shuffle_partitions(inputs: int) -> str:
    """Shuffle partitions when --conf does not say: a few per input disk (Spark's 200 is for big joins)."""
    return str(min(200, max(4, 2 * inputs)))


def reconcile(disk_rows: list[dict], named: tuple[str, ...] | set[str], run: RunInfo) -> list[dict]:
    """Disks expected (given, and every bookie metadata names) against disks reported: a bookie
    with no readable disk row gets one ``not_audited`` row, never silence."""
    have = {d["bookie_id"] for d in disk_rows if d["bookie_id"]}
    out = list(disk_rows)
    for b in sorted(set(named) - have):
        row: dict[str, object] = {name: None for name in table_schema("disks").names}
        row.update(tool_version=run.tool_version, run_id=run.run_id, host=None, bookie_id=b, status="not_audited",
                   error="metadata names this bookie; no disk of it was given")
        out.append(row)
    return sorted(out, key=lambda d: (d["bookie_id"] or "", d["path"] or ""))


def read_tables(out: str) -> dict[str, pa.Table]:
    """The tables an audit wrote (for reports and tests)."""
    return {name: pq.read_table(os.path.join(out, name)) for name in ALL_TABLES}

