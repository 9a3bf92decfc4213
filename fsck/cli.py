"""``bookie-fsck`` / ``bkdisk fsck``: a thin shell over fsck.api with e2fsck's exit codes."""
from __future__ import annotations

import os
import sys

import click

from bookie.layout import BookieDirs, LayoutError, discover, from_conf
from formats.errors import BkdiskError
from fsck.api import EXIT_CANCELLED, EXIT_OPERATIONAL, RepairRefused, apply_repairs, check_bookie, plan_repairs
from fsck.context import CheckOptions
from fsck.exit_codes import run_click
from fsck.report import render_json, render_repair, render_text


def _dirs(root, conf, journal_dirs, ledger_dirs, index_dirs) -> BookieDirs:
    explicit = journal_dirs or ledger_dirs or index_dirs
    if sum(bool(x) for x in (root, conf, explicit)) != 1:
        raise click.UsageError("give exactly one of ROOT, --conf, or --journal-dir/--ledger-dir")
    if conf:
        dirs = from_conf(conf)
    elif explicit:
        if not journal_dirs or not ledger_dirs:
            raise click.UsageError("--journal-dir and --ledger-dir go together")
        dirs = BookieDirs([os.path.abspath(d) for d in journal_dirs], [os.path.abspath(d) for d in ledger_dirs],
                          [os.path.abspath(d) for d in index_dirs])
    else:
        return discover(root)
    missing = [d for d in dirs.all_dirs if not os.path.isdir(d)]
    if missing:
        raise LayoutError(f"{missing[0]}: no such directory")
    return dirs


class _Progress:
    """A rich progress bar on a terminal; silent otherwise."""

    def __init__(self, enabled: bool):
        self.bar = None
        self.tasks: dict[str, int] = {}
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)

    def __call__(self, what: str, done: int, total: int) -> None:
        if self.bar is None:
            return
        if what not in self.tasks:
            self.tasks[what] = self.bar.add_task(what, total=total)
        self.bar.update(self.tasks[what], completed=done, total=total)

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("root", required=False, type=click.Path(file_okay=False))
@click.option("--conf", type=click.Path(dir_okay=False), help="bk_server.conf giving the dirs.")
@click.option("--journal-dir", "journal_dirs", multiple=True, help="A journal dir (repeatable).")
@click.option("--ledger-dir", "ledger_dirs", multiple=True, help="A ledger dir (repeatable).")
@click.option("--index-dir", "index_dirs", multiple=True, help="An index dir (repeatable).")
@click.option("--metadata-dir", type=click.Path(file_okay=False), help="Folder of ledger metadata, one file per ledger.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--repair", is_flag=True, help="Repair what can be repaired (asks first unless --yes).")
@click.option("-n", "--dry-run", is_flag=True, help="With --repair: print the plan and change nothing.")
@click.option("-y", "--yes", is_flag=True, help="Answer yes to every repair.")
@click.option("--force", is_flag=True, help="Repair even while another process holds files in the dirs.")
@click.option("--backup-dir", type=click.Path(file_okay=False), help="Where replaced files are kept.")
@click.option("--rebuild-dropping-lost-entries", "drop_lost", is_flag=True,
              help="Destructive: rebuild an index even where entries it points at are in no entry log (the "
                   "bookie then answers 'no such entry' for them).")
@click.option("-j", "--jobs", type=click.IntRange(1, 256), default=1, show_default=True, help="Threads for scanning.")
@click.option("--no-digests", is_flag=True, help="Skip digest verification.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option("-v", "--verbose", is_flag=True, help="List every finding.")
def fsck_command(root, conf, journal_dirs, ledger_dirs, index_dirs, metadata_dir, as_json, repair, dry_run, yes,
                 force, backup_dir, drop_lost, jobs, no_digests, progress, verbose):
    """Check a bookie's journal, ledger and index dirs; read-only unless --repair.

    Exit codes (as e2fsck): 0 no errors, 1 errors corrected, 4 errors left uncorrected,
    8 operational error, 16 usage error, 32 cancelled.
    """
    try:
        code = _run(root, conf, journal_dirs, ledger_dirs, index_dirs, metadata_dir, as_json, repair, dry_run, yes,
                    force, backup_dir, drop_lost, jobs, no_digests, progress, verbose)
    except KeyboardInterrupt:
        click.echo("bookie-fsck: cancelled", err=True)
        code = EXIT_CANCELLED
    except click.UsageError:
        raise
    except (LayoutError, BkdiskError) as e:
        click.echo(f"bookie-fsck: {e}", err=True)
        code = EXIT_OPERATIONAL
    except OSError as e:
        click.echo(f"bookie-fsck: {e.filename or ''}: {e.strerror}", err=True)
        code = EXIT_OPERATIONAL
    sys.exit(code)


def _run(root, conf, journal_dirs, ledger_dirs, index_dirs, metadata_dir, as_json, repair, dry_run, yes, force,
         backup_dir, drop_lost, jobs, no_digests, progress, verbose) -> int:
    if dry_run and not repair:
        repair = True  # -n alone: show what a repair would do, change nothing
    dirs = _dirs(root, conf, journal_dirs, ledger_dirs, index_dirs)
    if progress is None:
        progress = sys.stderr.isatty() and not as_json
    with _Progress(progress) as bar:
        report = check_bookie(dirs, CheckOptions(metadata_dir=metadata_dir, verify_digests=not no_digests,
                                                 jobs=jobs, progress=bar))
    if not repair or not (report.errors or any(f.problem.repairable for f in report.findings)):
        if as_json:
            render_json(report.to_json(), sys.stdout)
        else:
            render_text(report, sys.stdout, verbose=verbose)
        return report.exit_code
    from fsck.api import RepairRun
    plan = plan_repairs(report, drop_lost_entries=drop_lost)
    out = sys.stderr if as_json else sys.stdout
    if not as_json:
        render_text(report, out, verbose=verbose)
    print("\nRepair plan:" if plan.actions else "\nNo repairable findings.", file=out)
    for line in plan.lines():
        print(f"  {line}", file=out)

    def stop(exit_code: int) -> int:
        """No repair ran: the report (with the plan) still goes out as JSON when asked."""
        if as_json:
            run = RepairRun(report, plan, exit_code=exit_code)
            render_json(run.to_json(), sys.stdout)
        return exit_code

    if dry_run or not plan.todo:
        return stop(report.exit_code)
    confirm = None
    if not yes:
        if not sys.stdin.isatty():
            print("bookie-fsck: repairs need --yes or an interactive terminal", file=sys.stderr)
            return stop(EXIT_OPERATIONAL)
        confirm = lambda a: click.confirm(f"{a.line()}?", default=False)  # noqa: E731
    try:
        run = apply_repairs(report, plan, confirm=confirm, backup_dir=backup_dir, force=force,
                            log=lambda s: print(s, file=out))
    except RepairRefused as e:
        print(f"bookie-fsck: {e}", file=sys.stderr)
        return stop(EXIT_OPERATIONAL)
    if as_json:
        render_json(run.to_json(), sys.stdout)
    else:
        render_repair(run, out, verbose=verbose)
    return run.exit_code


def main(argv: list[str] | None = None) -> None:
    run_click(fsck_command, "bookie-fsck", argv)
