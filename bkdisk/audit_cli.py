"""``bkdisk audit`` and ``bkdisk scan-disk``: the command lines of the Spark disk audit (audit/cli.py)."""
from __future__ import annotations

from audit.cli import audit, scan_disk_command

__all__ = ["audit", "scan_disk"]
scan_disk = scan_disk_command   # the name bkdisk/cli.py loads
