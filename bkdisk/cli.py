"""Entry point of the ``bkdisk`` command: a click group whose subcommands load only when they run.

``bkdisk --help`` and a usage error import click alone, never numpy, numba, Spark or gRPC: the table
below names each command's module and its one-line summary for the listing.
"""
from __future__ import annotations

import importlib
import sys

import click

from bkdisk.commandline.output import HELP_OPTIONS
from bkdisk.commandline.runner import console_command, guarded, run_click

# name: (module, attribute, one-line summary shown by `bkdisk --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "audit": ("bkdisk.audit.cli", "audit", "Audit every bookie disk of a cluster with Spark against ledger metadata."),
    "bookies": ("bkdisk.bookies_cli", "bookies",
                "Registered bookies and the BookieId resolver (BP-41), via the service."),
    "salvage": ("bkdisk.salvage_cli", "salvage",
                "Rebuild lost ledger metadata from a cluster's bookie disks with Spark; import it on request."),
    "scan-disk": ("bkdisk.audit.cli", "scan_disk_command",
                  "Scan one bookie disk into the rows the audit joins (Parquet)."),
    "demo": ("bkdisk.demo", "demo", "The embedded default job: a sample bookie and fsck, then a local Spark audit."),
    "dump": ("bkdisk.dump.command", "dump", "Print BookKeeper files as `bookkeeper shell` prints them (or as JSON)."),
    "fsck": ("bkdisk.fsck_cli", "fsck_command", "Check a bookie's journal, ledger and index dirs; repair on request."),
    "inventory": ("bkdisk.inventory_cli", "inventory", "One row per entry in a bookie's ledger storage."),
    "metadata": ("bkdisk.metadata_cli", "metadata",
                 "Serve the ledger metadata service (BP-16); get, list, change ledgers."),
    "read-ledger": ("bkdisk.read_ledger", "read_ledger_command",
                    "A ledger's entries in id order from any intact copy on the disks (JSON lines)."),
    "space": ("bkdisk.space_cli", "space",
              "Where a bookie's disk space goes: live and garbage bytes per entry log, what GC frees."),
    "warm-up": ("bkdisk.warmup", "warmup", "Compile the scanners into numba's cache (after an install)."),
}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _summary = COMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings=HELP_OPTIONS)
@click.version_option(package_name="bkdisk")
def cli() -> None:
    """Apache BookKeeper disks: dump files, inventory entries, check and repair a bookie."""


def main(argv: list[str] | None = None) -> None:
    run_click(cli, "bkdisk", argv)


# The commands that read bookie files through memory maps run guarded (commandline.runner.guarded);
# scan-disk guards its scan itself (audit.rows.iter_disk), so that its file still says why.
GUARDED = ("dump", "fsck", "inventory", "read-ledger", "space")


def console() -> None:
    """The ``bkdisk`` command: ``main``, guarded for the commands that read bookie files (the group
    takes no option with a value, so the first word not starting with '-' is the command)."""
    name = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if name in GUARDED:
        console_command(guarded, main, "bkdisk")   # (exits, in the child as in the parent)
    else:
        console_command(main)
