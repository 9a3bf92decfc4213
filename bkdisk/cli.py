"""Entry point of the ``bkdisk`` command: a click group whose subcommands live in their own modules."""
from __future__ import annotations

import click

from fsck.cli import fsck_command, run_click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bkdisk")
def cli() -> None:
    """Apache BookKeeper disks: dump files, inventory entries, check and repair a bookie."""


def _register() -> None:
    from bkdisk import demo, dump, inventory
    cli.add_command(dump.dump)
    cli.add_command(inventory.inventory)
    cli.add_command(demo.demo)
    cli.add_command(fsck_command, name="fsck")


def main(argv: list[str] | None = None) -> None:
    _register()
    run_click(cli, "bkdisk", argv)
