"""fsck's exit codes (e2fsck's convention) and the click runner that maps click's own outcomes to them.

Kept apart from the checker so that every command line can use them without importing the passes.
"""
from __future__ import annotations

import sys

import click

EXIT_OK = 0            # no errors
EXIT_CORRECTED = 1     # errors were found and all corrected
EXIT_UNCORRECTED = 4   # errors left
EXIT_OPERATIONAL = 8   # the check itself could not run (a path, a permission, damage that stops it)
EXIT_USAGE = 16        # bad command line
EXIT_CANCELLED = 32    # the user cancelled


def run_click(command: click.Command, prog_name: str, argv: list[str] | None = None) -> None:
    """Run a click command with e2fsck's codes for what click itself reports: usage 16, abort 32."""
    try:
        rv = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo(f"{prog_name}: cancelled", err=True)
        sys.exit(EXIT_CANCELLED)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    sys.exit(rv if isinstance(rv, int) else 0)
