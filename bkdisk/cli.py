"""Entry point of the ``bkdisk`` command: a click group whose subcommands live in their own modules."""
from __future__ import annotations

import sys

import click

from bkdisk.errors import EXIT_USAGE


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bkdisk")
def cli() -> None:
    """Apache BookKeeper disks: dump files, inventory entries, check and repair a bookie."""


def _register() -> None:
    from bkdisk import demo, dump, inventory
    cli.add_command(dump.dump)
    cli.add_command(inventory.inventory)
    cli.add_command(demo.demo)
    try:
        from fsck.cli import fsck_command
    except ImportError:
        return
    cli.add_command(fsck_command, name="fsck")


def main(argv: list[str] | None = None) -> None:
    _register()
    try:
        cli.main(args=argv, prog_name="bkdisk", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("bkdisk: cancelled", err=True)
        sys.exit(32)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    sys.exit(0)
