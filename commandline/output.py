"""What commands print besides their reports: the help options they all take, one result as JSON or as
a line of text, and a warning on stderr."""
from __future__ import annotations

from typing import Any

import click

from bkdisk.commandline.lazy import lazy_import

json = lazy_import("json")   # only a command asked for --json encodes; `bkdisk --help` does not load it

# Every command and group answers -h as it answers --help.
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def emit(obj: Any, as_json: bool, text: str) -> None:
    """A command's result on stdout: ``obj`` as one JSON document (keys sorted) with --json, else ``text``."""
    click.echo(json.dumps(obj, sort_keys=True) if as_json else text)


def warn(message: str, prog: str = "bkdisk") -> None:
    """``<prog>: warning: <message>`` on stderr: damage a command reports and goes on past."""
    click.echo(f"{prog}: warning: {message}", err=True)
