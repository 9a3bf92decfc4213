"""Ctrl-C from a console script's first instant: one line and e2fsck's cancelled (32), never a
KeyboardInterrupt traceback out of the middle of an import.

Python raises KeyboardInterrupt wherever SIGINT finds the main thread. Until ``run_click`` is inside
click's handling, which says "cancelled" and exits 32, that is the import of click and of the
command's modules, or the guarded runner's fork: the console scripts (bkdisk/console.py) install
``install`` before they import any of it, and ``run_click`` hands SIGINT back to Python once a
KeyboardInterrupt has somewhere to go. Imports nothing that takes time to load.
"""
from __future__ import annotations

import os
import signal
from types import FrameType

from bkdisk.commandline.exit_codes import EXIT_CANCELLED


class _CancelAtOnce:
    """The SIGINT handler while nothing is done that needs unwinding: say it, and exit."""

    def __init__(self, prog: str):
        self.line = f"{prog}: cancelled\n".encode()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        os.write(2, self.line)
        os._exit(EXIT_CANCELLED)   # (nothing written, spilled or registered yet: nothing to undo)


def install(prog: str) -> None:
    """Make Ctrl-C end the process at once with ``prog: cancelled`` and exit 32."""
    signal.signal(signal.SIGINT, _CancelAtOnce(prog))


def hand_back() -> None:
    """Let Ctrl-C raise KeyboardInterrupt again (Python's own handler), if ``install`` took it."""
    if isinstance(signal.getsignal(signal.SIGINT), _CancelAtOnce):
        signal.signal(signal.SIGINT, signal.default_int_handler)
