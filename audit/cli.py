"""The audit's command lines: ``bkdisk audit`` (also the spark-submit application, audit/spark_app.py)
and ``bkdisk scan-disk``. Spark, the job and the report load when an audit runs (commandline.lazy)."""
from __future__ import annotations

import datetime
import os
import shutil
import sys

import click

from bkdisk.audit.arrow_no_pandas import arrow_without_pandas
from bkdisk.audit.errors import AuditUsageError
from bkdisk.audit.output_places import disk_folders, refuse_inside_disks, refuse_nested
from bkdisk.audit.rows import TASK_SCHEMA, DiskInput, RunInfo, batch_table, iter_disk
from bkdisk.audit.scrub_options import scrub_options, scrub_run
from bkdisk.bookie.layout import bookie_id_of, discover, from_conf
from bkdisk.commandline.exit_codes import EXIT_OK, EXIT_PROBLEMS
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.memory_options import memory_options
from bkdisk.commandline.output_files import OutputRefused, refuse_not_utf8, refuse_output_file
from bkdisk.commandline.progress import progress_line
from bkdisk.commandline.runner import one_line_errors
from bkdisk.diskio import run_owned
from bkdisk.diskio.spill import MemoryLimit
from bkdisk.formats.errors import BkdiskError

pa = lazy_import("pyarrow")
pc = lazy_import("pyarrow.compute")
pq = lazy_import("pyarrow.parquet")
job = lazy_import("bkdisk.audit.job")
metadata_source = lazy_import("bkdisk.audit.metadata_source")
bookie_md = lazy_import("bkdisk.bookie.metadata_dir")
report = lazy_import("bkdisk.audit.report")
# pyspark is the optional extra 'audit' (pip install bkdisk[audit]): a host without it still runs scan-disk.

MARKER = ".bkdisk-audit"


def read_disks_file(path: str) -> list[DiskInput]:
    """One disk per line: ``path``, ``bookie_id<TAB>path`` or ``bookie_id<TAB>path<TAB>host`` (the
    disk is read only on that host: its task prefers it, and a task that lands elsewhere reports the
    disk not audited); blank lines and ``#`` comments skipped."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise AuditUsageError(f"{path}: cannot read the disks file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise AuditUsageError(f"{path}: expected a disks file of UTF-8 text, found byte {e.object[e.start]:#04x} at "
                              f"offset {e.start}") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split("\t")]
        if len(parts) > 3 or not parts[min(1, len(parts) - 1)] or (len(parts) == 3 and not parts[2]):
            raise AuditUsageError(f"{path}: line {n}: expected 'path', 'bookie_id<TAB>path' or "
                                  f"'bookie_id<TAB>path<TAB>host', found {line!r}")
        if len(parts) == 1:
            out.append(DiskInput(parts[0]))
        else:
            out.append(DiskInput(parts[1], parts[0] or None, parts[2] if len(parts) == 3 else None))
    return out


REPORT_FILES = ("summary.json", "report.html")


def prepare_out(out: str) -> None:
    """The output folder is new, empty, or a previous audit's (whose tables and reports are removed)."""
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, MARKER)):
        raise AuditUsageError(f"{out}: exists and is not a previous audit's output; choose another --out")
    try:
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, MARKER), "w").close()
        # A previous audit's tables and reports go now: a run that fails leaves none of them to be
        # taken for its own.
        # (and the scratch folder of a previous run killed before it could remove it)
        scratch = [n for n in os.listdir(out) if n.startswith(".scratch-")]
        for name in [*job.ALL_TABLES, *REPORT_FILES, *scratch]:
            p = os.path.join(out, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            elif os.path.lexists(p):
                os.unlink(p)
    except OSError as e:
        raise AuditUsageError(f"{out}: cannot write the output folder ({e.strerror})") from None


def check_scan_file(path: str) -> None:
    """A ``bkdisk scan-disk`` file: every column of the task rows, and one disk's row (checked before
    Spark starts, which would read a foreign file's missing columns as nulls)."""
    if not os.path.isfile(path):
        raise AuditUsageError(f"{path}: no such scan-disk file")
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        wrong = [f.name for f in TASK_SCHEMA
                 if schema.get_field_index(f.name) < 0 or not schema.field(f.name).type.equals(f.type)]
        if wrong:
            raise AuditUsageError(f"{path}: not a bkdisk scan-disk file: expected its column(s) "
                                  f"{', '.join(wrong[:4])}{' ...' if len(wrong) > 4 else ''}")
        # (a big disk's file holds millions of replica rows: counted a row group at a time, as columns)
        disks = sum(pc.sum(pc.equal(pf.read_row_group(g, columns=["table"])["table"], "disks")).as_py() or 0
                    for g in range(pf.num_row_groups))
    except (OSError, pa.ArrowException) as e:
        raise AuditUsageError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
    if disks != 1:
        raise AuditUsageError(f"{path}: expected the rows of one disk (one disks row), found {disks}")


def distinct_disks(disks: list[DiskInput]) -> list[DiskInput]:
    """Each disk once (by its real path): a disk given twice is scanned once, its copies counted once."""
    seen: dict[str, DiskInput] = {}
    for d in disks:
        key = os.path.realpath(d.path)
        first = seen.setdefault(key, d)
        if first is not d and first.bookie_id != d.bookie_id and None not in (first.bookie_id, d.bookie_id):
            raise AuditUsageError(f"{d.path}: given twice, as bookie {first.bookie_id} and as {d.bookie_id}")
    # One bookie named twice another way (its root, and a bk_server.conf naming its dirs): its copies
    # would be counted twice. A disk bound to another host is looked at there.
    held: dict[str, str] = {}
    for d in seen.values():
        if d.host is not None:
            continue
        for folder in disk_folders(d.path)[0 if os.path.isfile(d.path) else 1:]:
            other = held.setdefault(os.path.realpath(folder), d.path)
            if other != d.path:
                raise AuditUsageError(f"{d.path}: names {folder}, a dir of the disk given as {other} too; "
                                      f"give each bookie once")
    return list(seen.values())


def _conf_pairs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        k, eq, val = v.partition("=")
        if not eq or not k:
            raise click.BadParameter(f"expected key=value, found {v!r}", param_hint="--conf")
        out[k] = val
    return out


def _disk_progress(done: int, scanning: int, total: int) -> None:
    progress_line(f"bkdisk audit: disks scanned {done}/{total}, {scanning} being scanned ", done == total)


REPORTED_CONF = ("spark.master", "spark.speculation", "spark.task.cpus", "spark.executor.cores",
                 "spark.sql.shuffle.partitions", "spark.executorEnv.NUMBA_CACHE_DIR")


def spark_settings(spark, scans_per_host: int | None) -> dict[str, str | int | None]:
    """The settings the audit ran with, as Spark holds them (for summary.json)."""
    conf = spark.sparkContext.getConf()
    out: dict[str, str | int | None] = {k: conf.get(k, None) for k in REPORTED_CONF}
    out["spark.sql.shuffle.partitions"] = spark.conf.get("spark.sql.shuffle.partitions")
    out["scans_per_host"] = scans_per_host
    return out


def run_audit_command(disks: list[DiskInput], scan_files: list[str], metadata_dir: str, out: str,
                      master: str | None, conf: dict[str, str], run_id: str | None, quiet: bool = False,
                      scans_per_host: int | None = None, memory=None, scrub=None,
                      scan_interval: datetime.timedelta | None = None) -> int:
    """Run the whole audit and its reports; returns the exit code (0 healthy, 4 problems).
    ``scrub``: the --state run (audit/scrub_run.ScrubRun), None for the deep audit of every byte;
    ``scan_interval``: without it, the interval of the scan-disk --state runs of ``scan_files``."""
    if not disks and not scan_files:
        raise AuditUsageError("nothing to audit: give disks (paths, --disks-file) or --scan-files")
    disks = distinct_disks(disks)
    for f in scan_files:
        check_scan_file(f)
    source = metadata_source.open_source(metadata_dir)   # a folder, or grpc://HOST:PORT for the metadata service
    source.check()   # fail before starting Spark when the metadata cannot be read at all (its tasks read it)
    prepare_out(out)
    run = RunInfo.new(run_id)
    started = datetime.datetime.now(datetime.UTC)
    echo = (lambda s: None) if quiet else (lambda s: click.echo(s, err=True))
    echo(f"bkdisk audit: run {run.run_id}: {len(disks)} disks, {len(scan_files)} scan files; starting Spark")
    defaults = {"spark.sql.shuffle.partitions": job.default_shuffle_partitions(len(disks) + len(scan_files))}
    with job.command_session(master, conf, defaults, "the audit") as spark:
        job.run_audit(spark, disks, scan_files, source, out, run, progress=None if quiet else _disk_progress,
                      scans_per_host=scans_per_host, memory=memory, scrub=scrub)
        settings = spark_settings(spark, scans_per_host)
    summary = report.summarize(out, run.run_id, source.describe(), started=started,
                               scrub_interval=scrub.schedule.interval if scrub is not None else scan_interval)
    summary["spark"] = settings
    js, page = report.write_reports(out, summary)
    report.terminal_summary(summary, echo)
    echo(f"bkdisk audit: tables in {out}/<table>/ (Parquet); {js}; report: {page}")
    return EXIT_OK if summary["healthy"] else EXIT_PROBLEMS


@click.command("audit")
@click.argument("disks", nargs=-1, metavar="DISK...")
@click.option("--disks-file", default=None, metavar="FILE",
              help="Disks, one per line: path, bookie_id<TAB>path, or bookie_id<TAB>path<TAB>host (read only there).")
@click.option("--scan-files", multiple=True, metavar="FILE.parquet",
              help="Rows written by `bkdisk scan-disk` on a bookie host (repeatable; mixes with disks).")
@click.option("--metadata-dir", default=None, metavar="DIR",
              help="Folder of ledger metadata files (<hex ledger id>.bin/.txt), one per ledger.")
@click.option("--metadata", "metadata_url", default=None, metavar="grpc://HOST:PORT",
              help="Read ledger metadata from the metadata service instead (`bkdisk metadata serve`; "
                   "its token from env BKDISK_METADATA_TOKEN).")
@click.option("--out", required=True, metavar="DIR", help="Output folder: one Parquet folder per table, reports.")
@click.option("--master", default=None, help="Spark master (default local[*]; under spark-submit, its own).")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
@click.option("--cpus-per-scan", type=click.IntRange(min=1), default=None,
              help="spark.task.cpus: at most (executor cores / N) disks are scanned at once per executor.")
@click.option("--scans-per-host", type=click.IntRange(min=1), default=None,
              help="At most N disks read at once on one host, over all its executors (a lock file per slot).")
@click.option("--run-id", default=None, help="Id carried by every row (default: random).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
@scrub_options
@memory_options
@one_line_errors
def audit(disks: tuple[str, ...], disks_file: str | None, scan_files: tuple[str, ...], metadata_dir: str | None,
          metadata_url: str | None, out: str, master: str | None, conf: tuple[str, ...], cpus_per_scan: int | None,
          scans_per_host: int | None,
          run_id: str | None, quiet: bool, state: str | None, deep_interval, deep_all: bool, deep_max_load, as_of,
          memory: MemoryLimit) -> None:
    """Audit every bookie disk of a cluster with Spark against the ledger metadata.

    Exit 0 when every disk was audited and no fault table has a row, 4 when problems were found,
    8 when the audit could not run.

    \b
    Examples:
      bkdisk audit /mnt/bk1 /mnt/bk2 /mnt/bk3 --metadata-dir ./metadata --out ./audit-out
      bkdisk audit --disks-file disks.tsv --metadata-dir ./metadata --out ./audit-out --master local[4]
      bkdisk audit /mnt/bk1 /mnt/bk2 --metadata grpc://127.0.0.1:4183 --out ./audit-out
    """
    source = metadata_url if metadata_dir is None else metadata_dir
    if source is None or (metadata_dir is not None and metadata_url is not None):
        raise click.UsageError("give the ledger metadata: --metadata-dir DIR or --metadata grpc://HOST:PORT (one)")
    if metadata_url is not None and not metadata_url.startswith("grpc://"):
        raise click.UsageError(f"--metadata takes grpc://HOST:PORT, not {metadata_url!r}")
    given = [DiskInput(d) for d in disks] + (read_disks_file(disks_file) if disks_file else [])
    settings = _conf_pairs(conf)
    if cpus_per_scan:
        settings["spark.task.cpus"] = str(cpus_per_scan)
    # Without --state, --deep-interval may name the interval of the scan-disk --state runs whose files
    # are audited (for the report's wording; default 7d).
    shown = deep_interval if state is None and scan_files else None
    if state is None:   # (usage: scrub options without --state)
        scrub_run(state, None if shown else deep_interval, deep_all, as_of, deep_max_load)
    refuse_nested(out, "--out", state, "--state")
    refuse_inside_disks({"--out": out, "--state": state}, [d.path for d in given if d.host is None])
    scrub = scrub_run(state, None if shown else deep_interval, deep_all, as_of, deep_max_load)
    sys.exit(run_audit_command(given, list(scan_files), source, out, master, settings, run_id,
                               quiet, scans_per_host, memory, scrub, shown))


def _bookie_metadata(folder: str, root: str, bookie_id: str | None):
    """The folder as the disk's bookie needs it (streamed once: a folder of millions of ledgers is
    not held); a file that cannot be read fails the command, exit 8."""
    if bookie_id is None:
        try:
            bookie_id = bookie_id_of(from_conf(root) if os.path.isfile(root) else discover(root))
        except (BkdiskError, OSError):
            bookie_id = None   # the scan says why the disk cannot be read
    view, errors = bookie_md.bookie_metadata_dir(folder, bookie_id)
    if errors:
        raise errors[0]
    return view


@click.command("scan-disk")
@click.argument("root", metavar="ROOT")
@click.option("--out", required=True, metavar="FILE.parquet", help="The Parquet file to write (replaced when done).")
@click.option("--metadata-dir", default=None, metavar="DIR",
              help="Ledger metadata: digest types and passwords (HMAC ledgers need it to verify).")
@click.option("--bookie-id", default=None, help="The bookie id, when the disk's cookie cannot be read.")
@click.option("--run-id", default=None, help="Id carried by every row (default: random).")
@scrub_options
@memory_options
@one_line_errors
def scan_disk_command(root: str, out: str, metadata_dir: str | None, bookie_id: str | None,
                      run_id: str | None, state: str | None, deep_interval, deep_all: bool, deep_max_load, as_of,
                      memory: MemoryLimit) -> None:
    """Scan one bookie disk (root or bk_server.conf) into the rows an audit task produces.

    Run it on each bookie host when Spark cannot reach the disks, then give the files to
    `bkdisk audit --scan-files`. With --state, the disk's nightly scrub: payloads read only in the
    entry logs due, its state in DIR. Exit 0 when the disk is clean, 4 when fsck found errors or the
    disk could not be read (the file then says so), 8 when the metadata or the state could not be
    read or the file could not be written.
    """
    arrow_without_pandas()   # a bookie host's scan: pandas' import would be a good part of a small disk's
    if state is None:   # (usage: scrub options without --state)
        scrub_run(state, deep_interval, deep_all, as_of, deep_max_load)
    if os.path.isdir(out):
        raise AuditUsageError(f"{out}: is a folder; expected the Parquet file to write (--out FILE.parquet)")
    refuse_nested(out, "--out", state, "--state")
    refuse_inside_disks({"--out": out, "--state": state}, [root])
    try:
        refuse_not_utf8({"ROOT": root, "--out": out, "--state": state, "--bookie-id": bookie_id, "--run-id": run_id})
        refuse_output_file(out, "--out", [])
    except OutputRefused as e:
        raise AuditUsageError(str(e)) from None
    scrub = scrub_run(state, deep_interval, deep_all, as_of, deep_max_load)
    # None, not {}: an empty mapping is metadata read that holds no ledger (every ledger an orphan, garbage)
    md = _bookie_metadata(metadata_dir, root, bookie_id) if metadata_dir else None
    staging = scrub.stage_here() if scrub is not None else None
    try:
        _scan_to_file(root, out, md, bookie_id, run_id, memory, metadata_dir, scrub, staging)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _unverified(b, light_possible: bool):
    """The copies of a replicas batch whose digest was not verified. With a scrub state a copy in a log
    walked light has no digest type and is not counted (its payload was not read, by plan); without
    one, a copy with no digest type is unverified as any other (an HMAC ledger's without its password)."""
    missing = pc.is_null(b.column("digest_ok"))
    return pc.and_(missing, pc.is_valid(b.column("digest_type"))) if light_possible else missing


def _scan_to_file(root: str, out: str, md, bookie_id: str | None, run_id: str | None, memory: MemoryLimit,
                  metadata_dir: str | None, scrub, staging: str | None) -> None:
    on_disk = scrub.for_disk_here(root, staging) if scrub is not None else None
    folder, name = os.path.split(os.path.abspath(out))
    run_owned.remove_stale(folder, f".{name}.tmp-")   # what a scan-disk killed before its rename left
    tmp = os.path.join(folder, run_owned.own_prefix(f".{name}.tmp-") + "parquet")
    try:
        writer = pq.ParquetWriter(tmp, TASK_SCHEMA)
    except OSError as e:
        raise AuditUsageError(f"{out}: cannot write ({e.strerror})") from None
    # The batches go to the file as they come (one entry log's rows at a time), not held until the end.
    last, unverified, done = None, 0, False
    try:
        for b in iter_disk(DiskInput(root, bookie_id), md, RunInfo.new(run_id), memory=memory, preload=False,
                           scrub=on_disk):
            writer.write_batch(b)
            table = batch_table(b)
            if table == "disks":   # (the last batch; a batch of rows is not held past its write)
                last = b
            elif table == "replicas":
                unverified += pc.sum(_unverified(b, light_possible=on_disk is not None)).as_py() or 0
        writer.close()
        done = True
    except OSError as e:
        raise AuditUsageError(f"{out}: cannot write ({e.strerror})") from None
    finally:
        if not done:
            writer.close()
            os.unlink(tmp)
    if last is None:
        os.unlink(tmp)
        raise AuditUsageError(f"{root}: the scan ended without the disk's row")
    try:
        os.replace(tmp, out)
    except OSError as e:   # (a folder put there meanwhile, a parent gone read-only)
        os.unlink(tmp)
        raise AuditUsageError(f"{out}: cannot write ({e.strerror})") from None
    disk = last.to_pylist()[0]   # the disks row comes last
    if scrub is not None:   # the disk's new state once its file is written (a scan that failed: the last good one)
        scrub.commit([disk], [root])
        if disk["logs_total"] is not None:
            click.echo(f"{root}: scrub: {disk['logs_deep_checked']} of {disk['logs_total']} entry logs deep-checked "
                       f"-> {scrub.state_dir}; every log deep-checked within the interval: "
                       + ("yes" if disk["all_verified_within_interval"] else f"no ({disk['lagging_logs']})"), err=True)
    why = f" ({disk['error']})" if disk["error"] else ""
    click.echo(f"{root}: bookie {disk['bookie_id'] or '?'}: {disk['status']}{why}, {disk['entries'] or 0} entries "
               f"-> {out}", err=True)
    if unverified:
        click.echo(f"{root}: {unverified} copies not verified (a DUMMY entry carries no digest"
                   + ("" if metadata_dir else "; an HMAC ledger's needs its password: give --metadata-dir")
                   + "); the audit counts them intact and its divergence check compares their payloads", err=True)
    sys.exit(EXIT_OK if disk["status"] == "ok" else EXIT_PROBLEMS)
