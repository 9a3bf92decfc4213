"""How the command line reports failures: one line on stderr, an e2fsck-style exit code (fsck/exit_codes.py)."""
from __future__ import annotations

from fsck.exit_codes import one_line_errors

__all__ = ["one_line_errors"]
