"""The exit codes every command ends with: e2fsck's convention.

They are declared with the fsck report, which carries one as data (fsck/exit_codes.py); the commands
take them from here, with the name the audit reads them by.
"""
from __future__ import annotations

from bkdisk.fsck.exit_codes import (
    EXIT_CANCELLED,
    EXIT_CORRECTED,
    EXIT_OK,
    EXIT_OPERATIONAL,
    EXIT_UNCORRECTED,
    EXIT_USAGE,
)

EXIT_PROBLEMS = EXIT_UNCORRECTED   # an audit or a scan found problems on the disks
# The reader of the output went away before the end (``| head``): what a command killed by SIGPIPE
# reports, as a shell's pipefail expects of any filter; never 0, which would say every row was read.
EXIT_OUTPUT_CLOSED = 128 + 13

__all__ = ["EXIT_CANCELLED", "EXIT_CORRECTED", "EXIT_OK", "EXIT_OPERATIONAL", "EXIT_OUTPUT_CLOSED", "EXIT_PROBLEMS",
           "EXIT_UNCORRECTED", "EXIT_USAGE"]
