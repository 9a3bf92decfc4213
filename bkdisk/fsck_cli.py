"""``bookie-fsck`` / ``bkdisk fsck``: a thin shell over fsck.api with e2fsck's exit codes.

The checker (numpy, numba's scanners) and the metadata service's client (gRPC) load when a check runs
(commandline.lazy): ``--help``, ``--version``, usage errors and a wrong path load click and the light
declarations only.
"""
from __future__ import annotations

import os
import sys

import click

from bkdisk.bookie.layout import BookieDirs, LayoutError, bookie_id_of, discover, from_conf
from bkdisk.commandline.exit_codes import EXIT_CANCELLED, EXIT_OPERATIONAL
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.ledger_options import QNAME_HELP, resolve_ledger
from bkdisk.commandline.memory_options import memory_options
from bkdisk.commandline.output import HELP_OPTIONS
from bkdisk.commandline.progress import ProgressBars
from bkdisk.commandline.runner import console_command, guarded, kept_until_exit, run_click, silenced
from bkdisk.diskio.config import arrays_in_small_pages, collector_eased, freeze_loaded
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.formats.errors import BkdiskError
from bkdisk.fsck_run import FsckRun
from bkdisk.indexfiles.listing_ahead import ListingAhead

fsck_api = lazy_import("bkdisk.fsck.api")
fsck_repair = lazy_import("bkdisk.fsck.repair.repairs")
repair_guards = lazy_import("bkdisk.fsck.repair.guards")
token_source = lazy_import("bkdisk.metaservice.token_source")
fsck_context = lazy_import("bkdisk.fsck.context")
fsck_report = lazy_import("bkdisk.fsck.report")
ledger_presence = lazy_import("bkdisk.fsck.ledger_presence")
bookie_view = lazy_import("bkdisk.metaservice.bookie_view")
metadata_client = lazy_import("bkdisk.metaservice.client")


def _check_usage(root, conf, journal_dirs, ledger_dirs, index_dirs) -> None:
    explicit = journal_dirs or ledger_dirs or index_dirs
    if sum(bool(x) for x in (root, conf, explicit)) != 1:
        raise click.UsageError("give exactly one of ROOT, --conf, or --journal-dir/--ledger-dir")
    if explicit and (not journal_dirs or not ledger_dirs):
        raise click.UsageError("--journal-dir and --ledger-dir go together")


def _dirs(root, conf, journal_dirs, ledger_dirs, index_dirs) -> BookieDirs:
    explicit = journal_dirs or ledger_dirs or index_dirs
    if conf:
        dirs = from_conf(conf)
    elif explicit:
        dirs = BookieDirs([os.path.abspath(d) for d in journal_dirs], [os.path.abspath(d) for d in ledger_dirs],
                          [os.path.abspath(d) for d in index_dirs])
    else:
        return discover(root)
    missing = [d for d in dirs.all_dirs if not os.path.isdir(d)]
    if missing:
        raise LayoutError(f"{missing[0]}: no such directory")
    return dirs


class _NamedAsRun(click.Command):
    """The help's examples name the command as it was run (`bookie-fsck` or `bkdisk fsck`)."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        written = self.help
        self.help = (written or "").replace("bookie-fsck ", f"{ctx.command_path} ")
        try:
            super().format_help_text(ctx, formatter)
        finally:
            self.help = written


@click.command(cls=_NamedAsRun, context_settings=HELP_OPTIONS)
@click.version_option(package_name="bkdisk", prog_name="bookie-fsck")
@click.argument("root", required=False, metavar="[ROOT]")   # a bad path is exit 8, as in inventory and dump
@click.option("--conf", metavar="bk_server.conf",
              help="Take the bookie's dirs from a BookKeeper server config (journalDirectories, "
                   "ledgerDirectories, indexDirectories).")
@click.option("--journal-dir", "journal_dirs", multiple=True, metavar="DIR", help="A journal dir (repeatable).")
@click.option("--ledger-dir", "ledger_dirs", multiple=True, metavar="DIR", help="A ledger dir (repeatable).")
@click.option("--index-dir", "index_dirs", multiple=True, metavar="DIR", help="An index dir (repeatable).")
@click.option("--metadata-dir", metavar="DIR",
              help="Folder of ledger metadata files (<hex ledger id>.bin/.txt): digest types and passwords.")
@click.option("--metadata", "metadata_url", default=None, metavar="grpc://HOST:PORT",
              help="Read ledger metadata from the metadata service instead of a folder "
                   "(its token from env BKDISK_METADATA_TOKEN).")
@click.option("--ledger-id", "ledger_id", default=None, help="Only findings about this ledger (decimal, or hex with "
              "0x), and about whole files and dirs. Not with --repair.")
@click.option("--ledger-scope-id", "ledger_scope_id", default=None, help="Ledger scope id (BP-35), default 0.")
@click.option("--ledger-qualified-name", "ledger_qname", default=None, help=QNAME_HELP)
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as one JSON document (specs/schemas/fsck.schema.json).")
@click.option("--repair", is_flag=True, help="Repair what can be repaired (asks first unless --yes).")
@click.option("-n", "--dry-run", is_flag=True, help="Print the repair plan and change nothing (implies --repair).")
@click.option("-y", "--yes", is_flag=True, help="With --repair: answer yes to every repair. Alone it is an error: "
              "a check never writes unless --repair is given.")
@click.option("--force", is_flag=True, help="Repair even while another process holds files in the dirs.")
@click.option("--backup-dir", metavar="DIR",
              help="Where replaced files are kept (default: <first ledger dir>/fsck-backup/<time>).")
@click.option("--rebuild-dropping-lost-entries", "drop_lost", is_flag=True,
              help="Destructive: rebuild an index even where entries it points at are in no entry log (the "
                   "bookie then answers 'no such entry' for them).")
@click.option("-j", "--jobs", type=click.IntRange(1, 256), default=lambda: min(4, os.cpu_count() or 1),
              show_default="the CPUs, at most 4", help="Threads for scanning the entry logs and journals.")
@click.option("--no-digests", is_flag=True, help="Skip digest verification.")
@click.option("--progress/--no-progress", default=None,
              help="Show each pass and the entry-log scan as they run, on stderr (default: on a terminal).")
@click.option("-v", "--verbose", is_flag=True, help="List every finding.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print only errors and the final count (the exit code says the rest).")
@memory_options
def fsck_command(root, conf, journal_dirs, ledger_dirs, index_dirs, metadata_dir, ledger_id, ledger_scope_id,
                 ledger_qname, as_json, repair, dry_run, yes, force, backup_dir, drop_lost, jobs, no_digests, progress,
                 verbose, quiet, memory, metadata_url=None):
    """Check a bookie's journal, ledger and index dirs; read-only unless --repair.

    ROOT is a folder holding one bookie's dirs, as a bookie's disk or a copy of it: the journal,
    ledger and index dirs are found below it by their 'current' folders and cookies. Instead of
    ROOT give --conf (the dirs a bk_server.conf names) or each dir with --journal-dir/--ledger-dir.
    Stop the bookie before a repair.

    \b
    Examples:
      bookie-fsck /mnt/bookie1                        check, read-only
      bookie-fsck --conf /etc/bookkeeper/bk_server.conf --metadata-dir ./metadata
      bookie-fsck /mnt/bookie1 -n                     print the repair plan, change nothing
      bookie-fsck /mnt/bookie1 --repair               repair, asking before each action
      bookie-fsck /mnt/bookie1 --repair -y            repair without asking
      bookie-fsck /mnt/bookie1 --json > report.json   one JSON document
      bookie-fsck /mnt/bookie1 --ledger-id 0x1f -v    only what concerns ledger 0x1f

    Exit codes (as e2fsck): 0 no errors, 1 errors corrected, 4 errors left uncorrected,
    8 operational error, 16 usage error, 32 cancelled.
    """
    _check_usage(root, conf, journal_dirs, ledger_dirs, index_dirs)
    if yes and not (repair or dry_run):
        raise click.UsageError("-y answers a repair's questions: use --repair -y to repair, or leave -y out to "
                               "check (a check never writes)")
    if drop_lost and not (repair or dry_run):
        raise click.UsageError("--rebuild-dropping-lost-entries says how a repair rebuilds an index: give it with "
                               "--repair (or -n to see the plan)")
    if quiet and verbose:
        raise click.UsageError("-q and -v exclude each other")
    if metadata_url and metadata_dir:
        raise click.UsageError("--metadata and --metadata-dir exclude each other")
    ledger = resolve_ledger(ledger_id, ledger_scope_id, ledger_qname)
    if ledger is not None and (repair or dry_run):
        raise click.UsageError("a repair covers the whole bookie: leave out --ledger-id/--ledger-qualified-name")
    try:
        code = _run(FsckRun(
            root=root, conf=conf, journal_dirs=journal_dirs, ledger_dirs=ledger_dirs, index_dirs=index_dirs,
            metadata_dir=metadata_dir, metadata_url=metadata_url, jobs=jobs, no_digests=no_digests, memory=memory,
            as_json=as_json, progress=progress, verbose=verbose, quiet=quiet, ledger=ledger,
            repair=repair or dry_run, dry_run=dry_run, yes=yes, force=force, backup_dir=backup_dir,
            drop_lost=drop_lost))
    except KeyboardInterrupt:
        click.echo("bookie-fsck: cancelled", err=True)
        code = EXIT_CANCELLED
    except click.UsageError:
        raise
    except (LayoutError, BkdiskError) as e:
        click.echo(f"bookie-fsck: {e}", err=True)
        code = EXIT_OPERATIONAL
    except OSError as e:   # (without a file name: the output, a full disk under it)
        if e.filename is None:
            silenced(sys.stdout)
        click.echo(f"bookie-fsck: {e.filename if e.filename is not None else 'the output'}: {e.strerror}", err=True)
        code = EXIT_OPERATIONAL
    sys.exit(code)


def _service_metadata(url: str, bookie: str | None):
    """The service's ledgers as this bookie's check needs them: one streaming bulk read keeping the
    ledgers that place entries on ``bookie``; any other ledger read when a pass asks for it."""
    return bookie_view.bookie_view(metadata_client.service_target(url), bookie, retries=2,
                                   token=token_source.env_token())


@collector_eased()
def _run(run: FsckRun) -> int:
    # The dirs first: a wrong path is reported before the checker (numba) is loaded.
    dirs = _dirs(run.root, run.conf, run.journal_dirs, run.ledger_dirs, run.index_dirs)
    service_md = _service_metadata(run.metadata_url, bookie_id_of(dirs)) if run.metadata_url else None
    progress = sys.stderr.isatty() and not run.as_json if run.progress is None else run.progress
    memory = run.memory or MemoryLimit()
    jobs = run.jobs
    held: list[int] = []
    if run.repair and not run.dry_run:
        try:
            held = repair_guards.hold_repair_lock(
                dirs.all_dirs, warn=lambda s: print(f"bookie-fsck: warning: {s}", file=sys.stderr))
        except repair_guards.RepairRefused as e:
            print(f"bookie-fsck: {e}", file=sys.stderr)
            return EXIT_OPERATIONAL
    try:
        return _check_and_repair(run, dirs, service_md, progress, memory, jobs)
    finally:
        for fd in held:
            os.close(fd)


def _check_and_repair(run: FsckRun, dirs, service_md, progress: bool, memory: MemoryLimit, jobs: int) -> int:
    # The index listed by another process while this one loads the checker (numba and the kernels).
    ahead = None
    if jobs > 1 and dirs.storage_kind == "index-files":   # (a --tmp-dir inside the bookie is refused here)
        ahead = ListingAhead.start(dirs.effective_index_dirs, SpillFolder(memory, dirs.all_dirs).root)
    try:
        check_bookie = fsck_api.check_bookie   # (the checker is loaded once the dirs are found)
        freeze_loaded()
        arrays_in_small_pages()
        with ProgressBars(progress) as bar:
            report = check_bookie(dirs, fsck_context.CheckOptions(
                metadata_dir=run.metadata_dir, metadata=service_md, verify_digests=not run.no_digests, jobs=jobs,
                progress=bar, memory=memory, index_listing=ahead))
    finally:
        if ahead is not None:
            ahead.close()   # (taken by the walk by now, unless the check stopped before it)
    try:
        return _report_and_repair(report, run)
    except BrokenPipeError:   # the reader went away (``| head``): the rest goes nowhere, the check's code stands
        silenced(sys.stdout)
        return report.exit_code
    finally:
        report.close()   # what the check spilled: no plan or repair reads its scans after this
        kept_until_exit(report)


def _report_and_repair(report, run: FsckRun) -> int:
    render_json, render_text = fsck_report.render_json, fsck_report.render_text
    as_json, verbose, quiet, ledger = run.as_json, run.verbose, run.quiet, run.ledger
    if ledger is not None:
        fsck_report.limit_to_ledger(report, ledger)
        known = any(f.ledger is not None for f in report.findings)   # (those left are about it)
        unknown = None if known else ledger_presence.unknown_ledger_line(report.checked(), ledger)
        if unknown is not None:   # (on stderr: --json's document stays whole)
            print(f"bookie-fsck: {unknown}", file=sys.stderr)
    if not run.repair or not (report.errors or any(f.problem.repairable for f in report.findings)):
        if as_json:
            render_json(report, sys.stdout)
        else:
            render_text(report, sys.stdout, verbose=verbose, quiet=quiet)
        return report.exit_code
    plan = fsck_repair.plan_repairs(report, drop_lost_entries=run.drop_lost)
    out = sys.stderr if as_json else sys.stdout
    if not as_json:
        render_text(report, out, verbose=verbose, quiet=quiet)
    print("\nRepair plan:" if plan.actions else "\nNo repairable findings.", file=out)
    for line in plan.lines():
        print(f"  {line}", file=out)

    def stop(exit_code: int) -> int:
        """No repair ran: the report (with the plan) still goes out as JSON when asked."""
        if as_json:
            render_json(fsck_repair.RepairRun(report, plan, exit_code=exit_code).to_json(), sys.stdout)
        return exit_code

    if run.dry_run or not plan.todo:
        return stop(report.exit_code)
    confirm = None
    if not run.yes:
        if not sys.stdin.isatty():
            print("bookie-fsck: repairs need --yes or an interactive terminal", file=sys.stderr)
            return stop(EXIT_OPERATIONAL)
        confirm = lambda a: click.confirm(f"{a.line()}?", default=False)  # noqa: E731
    try:
        done = fsck_repair.apply_repairs(report, plan, confirm=confirm, backup_dir=run.backup_dir, force=run.force,
                                         log=lambda s: print(s, file=out))
    except repair_guards.RepairRefused as e:
        print(f"bookie-fsck: {e}", file=sys.stderr)
        return stop(EXIT_OPERATIONAL)
    if as_json:
        render_json(done.to_json(), sys.stdout)
    else:
        fsck_report.render_repair(done, out, verbose=verbose, quiet=quiet)
    return done.exit_code


def main(argv: list[str] | None = None) -> None:
    run_click(fsck_command, "bookie-fsck", argv)


def console() -> None:
    """The ``bookie-fsck`` command: ``main`` with its reads guarded (commandline.runner.guarded)."""
    console_command(guarded, main, "bookie-fsck")
