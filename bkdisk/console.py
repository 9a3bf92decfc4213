"""The console scripts ``bkdisk`` and ``bookie-fsck`` (pyproject's [project.scripts]): a Ctrl-C is
a cancel, one line and exit 32, from their first instant, before click and the commands load
(commandline/early_cancel.py)."""
from __future__ import annotations

from bkdisk.commandline import early_cancel
from bkdisk.commandline.lazy import lazy_import

# Loaded at the first call below, once early_cancel is installed.
bkdisk_cli = lazy_import("bkdisk.cli")
fsck_cli = lazy_import("bkdisk.fsck_cli")


def bkdisk() -> None:
    early_cancel.install("bkdisk")
    bkdisk_cli.console()


def bookie_fsck() -> None:
    early_cancel.install("bookie-fsck")
    fsck_cli.console()
