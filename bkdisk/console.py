"""The console scripts ``bkdisk`` and ``bookie-fsck`` (pyproject's [project.scripts]): a Ctrl-C is
a cancel, one line and exit 32, from their first instant, before click and the commands load
(commandline/early_cancel.py)."""
from __future__ import annotations

from bkdisk.commandline import early_cancel


def bkdisk() -> None:
    early_cancel.install("bkdisk")
    from bkdisk.cli import console
    console()


def bookie_fsck() -> None:
    early_cancel.install("bookie-fsck")
    from bkdisk.fsck_cli import console
    console()
