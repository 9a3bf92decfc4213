"""The exit codes of e2fsck's convention, as an fsck report carries them (``Report.exit_code``).

Every command exits with them through the command-line layer (commandline/exit_codes.py).
"""
from __future__ import annotations

EXIT_OK = 0            # no errors
EXIT_CORRECTED = 1     # errors were found and all corrected
EXIT_UNCORRECTED = 4   # errors left
EXIT_OPERATIONAL = 8   # the check itself could not run (a path, a permission, damage that stops it)
EXIT_USAGE = 16        # bad command line
EXIT_CANCELLED = 32    # the user cancelled
