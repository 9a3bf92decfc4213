"""Progress on stderr: a bar per step while a long command runs on a terminal, nothing otherwise; or a
counter line rewritten in place on a terminal, one line per update elsewhere."""
from __future__ import annotations

import sys
from typing import Any

import click


def progress_line(text: str, last: bool) -> None:
    """Say ``text`` on stderr: on a terminal over the previous line (``\r``) until the ``last`` one,
    which ends the line; elsewhere (a log file) as a line of its own."""
    click.echo(text, err=True, nl=False)
    click.echo("\n" if last or not sys.stderr.isatty() else "\r", err=True, nl=False)


class ProgressBars:
    """A rich progress bar per step (``bar(what, done, total)``) on a terminal; silent when not enabled.

    rich is imported only when the bars are shown, so a command writing to a pipe or a file never loads it."""

    def __init__(self, enabled: bool):
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
            columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                       TimeRemainingColumn())
            self.bar = Progress(*columns, console=Console(stderr=True), transient=True)

    def __call__(self, what: str, done: int, total: int) -> None:
        if self.bar is None:
            return
        if what not in self.tasks:
            self.tasks[what] = self.bar.add_task(what, total=total)
        self.bar.update(self.tasks[what], completed=done, total=total)

    def __enter__(self) -> ProgressBars:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
