"""``bkdisk salvage``: ledger metadata rebuilt from a cluster's bookie disks, on Spark as the audit
runs (audit/salvage_job.py), written into a temporary folder beside ``--out`` and renamed there when
whole; ``--import`` then creates each salvaged ledger through the metadata service, never
overwriting one that exists."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import tempfile

import click

from bkdisk.audit.cli import AuditUsageError, _conf_pairs, check_scan_file, distinct_disks, read_disks_file
from bkdisk.audit.output_places import refuse_inside_disks
from bkdisk.audit.rows import AUDITED, DiskInput, RunInfo
from bkdisk.bookie.layout import bookie_id_of, discover, from_conf, instance_ids_of
from bkdisk.bookie.password_candidates import read_candidates
from bkdisk.commandline.exit_codes import EXIT_OK, EXIT_PROBLEMS
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.memory_options import memory_options
from bkdisk.commandline.progress import progress_line
from bkdisk.commandline.runner import one_line_errors
from bkdisk.commandline.token_option import checked_token_option
from bkdisk.diskio import run_owned
from bkdisk.diskio.spill import MemoryLimit
from bkdisk.formats.errors import BkdiskError
from bkdisk.metaservice import token_source

job = lazy_import("bkdisk.audit.job")
salvage_job = lazy_import("bkdisk.audit.salvage_job")
salvage_output = lazy_import("bkdisk.audit.salvage_output")
metadata_source = lazy_import("bkdisk.audit.metadata_source")
metadata_client = lazy_import("bkdisk.metaservice.client")
folder_import = lazy_import("bkdisk.metaservice.folder_import")
metadata_dir = lazy_import("bkdisk.bookie.metadata_dir")


def _custom_pairs(values: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    out = []
    for v in values:
        k, eq, val = v.partition("=")
        if not eq or not k:
            raise click.BadParameter(f"expected key=value, found {v!r}", param_hint="--custom-metadata")
        out.append((k, val.encode("utf-8")))
    return tuple(out)


def work_folder(out: str) -> str:
    """A new folder beside ``out`` (same file system: renamed to ``out`` when whole). ``out`` must
    not exist, or be an empty folder."""
    if os.path.lexists(out) and not os.path.isdir(out):
        raise AuditUsageError(f"{out}: exists and is not a folder; choose a new --out")
    if os.path.isdir(out) and os.listdir(out):
        raise AuditUsageError(f"{out}: exists and is not empty; choose a new --out")
    parent = os.path.dirname(out)
    prefix = f".{os.path.basename(out)}.salvage-"
    run_owned.remove_stale(parent, prefix)   # the work folders of salvages killed before their rename
    try:
        work = tempfile.mkdtemp(prefix=run_owned.own_prefix(prefix), dir=parent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(work, 0o777 & ~umask)   # a folder as any other the user makes (mkdtemp's is private)
        return work
    except OSError as e:
        raise AuditUsageError(f"{out}: cannot write the output folder's parent {parent} ({e.strerror})") from None


def check_disks(disks: list[DiskInput]) -> None:
    """Each disk this host can see is a bookie's (its dirs found), checked before Spark starts: a
    ledger salvaged without a disk given by mistake would lack its copies. A disk bound to another host
    is checked by its task there (its row says so)."""
    seen: dict[str | None, str] = {}   # instance id (None: none recorded) -> the first dir whose cookie records it
    for d in disks:
        if d.host is not None:
            continue
        try:
            dirs = from_conf(d.path) if os.path.isfile(d.path) else discover(d.path)
        except (BkdiskError, OSError) as e:
            raise AuditUsageError(f"not a bookie disk: {str(e).splitlines()[0]}") from None
        # A disk given under another bookie's name would not be read (its task says so after the whole
        # Spark run) and, unread, withholds every ledger's metadata: said now.
        named = bookie_id_of(dirs)
        if d.bookie_id is not None and named is not None and named != d.bookie_id:
            raise AuditUsageError(f"{d.path}: given as bookie {d.bookie_id}, but its cookie names {named}; "
                                  "expected each disk under its own bookie's id")
        # One cluster's disks only: ledgers of two clusters share ids, and their copies would make one ledger.
        for folder, iid in instance_ids_of(dirs, with_none=True).items():
            seen.setdefault(iid, folder)
        if len(seen) > 1:
            (a, da), (b, db) = list(seen.items())[:2]
            said = {k: "no instance id" if k is None else f"instance id {k}" for k in (a, b)}
            raise AuditUsageError(f"disks of two clusters: the cookie of {da} records {said[a]}, that of "
                                  f"{db} {said[b]}; salvage one cluster's disks at a time")


def _disk_progress(done: int, scanning: int, total: int) -> None:
    progress_line(f"bkdisk salvage: disks scanned {done}/{total}, {scanning} being scanned ", done == total)


def import_salvaged(out: str, url: str, token: str | None) -> dict:
    """Create each ledger of ``out/metadata`` through the service, in batches (CreateMany), create-only:
    one that exists there is left as it is and named."""
    c = metadata_client.MetadataClient(metadata_client.service_target(url), token=token)
    folder = os.path.join(out, "metadata")
    try:
        got = folder_import.import_folder(c, folder, "skip")
    except BkdiskError as e:
        raise BkdiskError(f"{url}: {e} (the files stay in {folder})") from e.__cause__
    finally:
        c.close()
    return {"service": url, "created": got.count("imported"),
            "existing_left_as_they_are": [metadata_dir.file_stem(lid) for lid in got.ledgers("skipped")]}


def run_salvage_command(disks: list[DiskInput], scan_files: list[str], metadata: str | None, out: str,
                        options, master: str | None, conf: dict[str, str], run_id: str | None, quiet: bool,
                        scans_per_host: int | None, memory, import_url: str | None, token: str | None,
                        expect_bookies: int | None = None) -> int:
    if not disks and not scan_files:
        raise AuditUsageError("nothing to salvage: give disks (paths, --disks-file) or --scan-files")
    disks = distinct_disks(disks)
    check_disks(disks)
    for path in scan_files:
        check_scan_file(path)
    out = os.path.abspath(out)
    refuse_inside_disks({"--out": out, "--tmp-dir": None if memory is None else memory.tmp_dir},
                        [d.path for d in disks if d.host is None])
    source = None
    if metadata is not None:
        source = (metadata_source.MetadataServiceSource(metadata, token=token) if metadata.startswith("grpc://")
                  else metadata_source.open_source(metadata))
        source.check()
    work = work_folder(out)
    run = RunInfo.new(run_id)
    echo = (lambda s: None) if quiet else (lambda s: click.echo(s, err=True))
    started = datetime.datetime.now(datetime.UTC)
    try:
        if source is None:   # no metadata: every ledger found is salvaged
            empty = os.path.join(work, ".scratch", "no-metadata")
            os.makedirs(empty)
            source = metadata_source.MetadataDirSource(empty)
        echo(f"bkdisk salvage: run {run.run_id}: {len(disks)} disks, {len(scan_files)} scan files; starting Spark")
        defaults = {"spark.sql.shuffle.partitions": job.default_shuffle_partitions(len(disks) + len(scan_files))}
        with job.command_session(master, conf, defaults, "the salvage", app="bkdisk-salvage") as spark:
            result = salvage_job.run_salvage(spark, disks, scan_files, source, work, run, options,
                                             progress=None if quiet else _disk_progress,
                                             scans_per_host=scans_per_host, memory=memory)
        bookies_read = sorted({d["bookie_id"] for d in result.disks if d["status"] in AUDITED and d["bookie_id"]})
        unread = [d for d in result.disks if d["status"] not in AUDITED]   # their copies are not counted
        withheld = None
        if unread:   # (a ledger with copies there would be written closed short, or placed without that bookie)
            d = unread[0]
            withheld = (f"{len(unread)} of the disks given not read ({d['path']}: {d['error'] or d['status']}): a "
                        "ledger with copies there could be closed short or placed on the others only")
        elif expect_bookies is not None and len(bookies_read) < expect_bookies:
            withheld = (f"disks of {len(bookies_read)} bookies read, --expect-bookies {expect_bookies}: a ledger "
                        "whose other bookies' disks were not read could be closed short or placed on these only")
        elif expect_bookies is not None and len(bookies_read) > expect_bookies:
            withheld = (f"disks of {len(bookies_read)} bookies read, --expect-bookies {expect_bookies}: disks of "
                        "another cluster among them would join its ledgers to this one's of the same ids")
        elif (missing := salvage_output.placed_on_a_missing_bookie(result.results_dir)) is not None:
            withheld = (f"ledger {missing} was written to a bookie whose disk was not read (an ensemble position "
                        "no disk read shows): a ledger placed on the disks read alone could lack it too (give "
                        "every bookie's disk)")
        if withheld is not None:
            echo(f"bkdisk salvage: no metadata written: {withheld}")
        counts = salvage_output.write_outputs(result.results_dir, work, withheld)
        shutil.rmtree(os.path.join(work, ".scratch"))
        # Lost: no intact copy at or before the last entry, or copies left after it (recovery stops short).
        lost = counts["entries_lost"] + counts["entries_dropped"]
        code = EXIT_OK if counts["no_metadata"] == 0 and lost == 0 and not unread else EXIT_PROBLEMS
        summary = dict(counts, disks_not_read=len(unread), bookies_read=bookies_read, bookies_expected=expect_bookies,
                       run_id=run.run_id, started=started.isoformat(),
                       exit_code=code, metadata_given=None if metadata is None else source.describe(),
                       disks=[{k: d[k] for k in ("bookie_id", "path", "status", "error")} for d in result.disks])
        salvage_output.write_summary(work, summary)
        salvage_output.write_report(work, summary)
        if os.path.isdir(out):
            os.rmdir(out)   # (checked empty before the run)
        os.rename(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    echo(f"bkdisk salvage: {counts['ledgers_found']} ledgers found without metadata, {counts['metadata_written']} "
         f"metadata files written, {counts['no_metadata']} without (see {out}/ledgers), {counts['entries_lost']} "
         f"entries lost, {counts['entries_dropped']} left out after a last entry, {len(unread)} disks not read; "
         f"{out}/summary.json, {out}/report.html")
    if import_url is not None and withheld is not None:
        echo(f"bkdisk salvage: nothing imported through {import_url}: no metadata was written")
    elif import_url is not None:
        done = import_salvaged(out, import_url, token)
        with open(os.path.join(out, "import.json.tmp"), "w", encoding="utf-8") as f:
            json.dump(done, f, indent=2)
        os.replace(os.path.join(out, "import.json.tmp"), os.path.join(out, "import.json"))
        echo(f"bkdisk salvage: {done['created']} ledgers created through {import_url}; "
             f"{len(done['existing_left_as_they_are'])} existed there and were left as they are")
    return code


@click.command("salvage")
@click.argument("disks", nargs=-1, metavar="DISK...")
@click.option("--disks-file", default=None, metavar="FILE",
              help="Disks, one per line: path, bookie_id<TAB>path, or bookie_id<TAB>path<TAB>host (read only there).")
@click.option("--scan-files", multiple=True, metavar="FILE.parquet",
              help="Rows written by `bkdisk scan-disk` on a bookie host (repeatable; mixes with disks).")
@click.option("--out", required=True, metavar="DIR", help="New output folder: metadata/, ledgers/, summary.json.")
@click.option("--metadata-dir", default=None, metavar="DIR",
              help="Metadata that survived: its ledgers are left out (default: every ledger found is salvaged).")
@click.option("--metadata", "metadata_url", default=None, metavar="grpc://HOST:PORT",
              help="The same, read from the metadata service.")
@click.option("--password-candidates", default=None, metavar="FILE",
              help="Passwords to try against the master keys, one a line (the empty password is always tried).")
@click.option("--ack-quorum", type=click.IntRange(min=1), default=None,
              help="The ack quorum to write (not on disk; default: the write quorum, marked assumed).")
@click.option("--custom-metadata", multiple=True, metavar="KEY=VALUE",
              help="Custom metadata for every salvaged ledger (repeatable; not on disk).")
@click.option("--master", default=None, help="Spark master (default local[*]; under spark-submit, its own).")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
@click.option("--scans-per-host", type=click.IntRange(min=1), default=None,
              help="At most N disks read at once on one host, over all its executors.")
@click.option("--import", "import_url", default=None, metavar="grpc://HOST:PORT",
              help="Then create each salvaged ledger through the metadata service (never overwriting one).")
@click.option("--token", default=None, callback=checked_token_option,
              help=f"The metadata service's token, for --metadata grpc:// and --import (env {token_source.TOKEN_ENV}).")
@click.option("--expect-bookies", type=click.IntRange(min=1), default=None, metavar="N",
              help="The cluster's number of bookies: no metadata is written unless disks of N bookies were read "
                   "(a bookie left out does not always show in the others' copies).")
@click.option("--run-id", default=None, help="Id of the run (default: random).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
@memory_options
@one_line_errors
def salvage(disks: tuple[str, ...], disks_file: str | None, scan_files: tuple[str, ...], out: str,
            metadata_dir: str | None, metadata_url: str | None, password_candidates: str | None,
            ack_quorum: int | None, custom_metadata: tuple[str, ...], master: str | None, conf: tuple[str, ...],
            scans_per_host: int | None, import_url: str | None, token: str | None, expect_bookies: int | None,
            run_id: str | None, quiet: bool, memory: MemoryLimit) -> None:
    """Rebuild ledger metadata from a cluster's bookie disks, for every ledger found there that the
    given metadata (if any) does not hold.

    Exit 0 when every ledger found got a metadata file and no entry is lost, 4 when some did not or
    entries are lost, 8 when the salvage could not run.

    \b
    Examples:
      bkdisk salvage /mnt/bk1 /mnt/bk2 /mnt/bk3 --password-candidates pw.txt --out ./salvaged
      bkdisk salvage --disks-file disks.tsv --metadata grpc://127.0.0.1:4183 --out ./salvaged \\
          --import grpc://127.0.0.1:4183
    """
    if metadata_dir is not None and metadata_url is not None:
        raise click.UsageError("give the surviving metadata once: --metadata-dir DIR or --metadata grpc://HOST:PORT")
    for name, url in (("--metadata", metadata_url), ("--import", import_url)):
        if url is not None and not url.startswith("grpc://"):
            raise click.UsageError(f"{name} takes grpc://HOST:PORT, not {url!r}")
    if token is None and (metadata_url is not None or import_url is not None):
        token = token_source.env_token()   # read only where a service is used, as the thin clients do
    candidates = tuple(read_candidates(password_candidates)) if password_candidates else ()
    options = salvage_job.SalvageOptions(candidates, ack_quorum, _custom_pairs(custom_metadata))
    given = [DiskInput(d) for d in disks] + (read_disks_file(disks_file) if disks_file else [])
    sys.exit(run_salvage_command(given, list(scan_files), metadata_dir if metadata_url is None else metadata_url,
                                 out, options, master, _conf_pairs(conf), run_id, quiet, scans_per_host, memory,
                                 import_url, token, expect_bookies))
