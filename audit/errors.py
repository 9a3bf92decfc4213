"""The audit's error, and the one line of a Spark failure it is told by: beneath the job and its stages,
which all raise it."""
from __future__ import annotations

from bkdisk.formats.errors import BkdiskError


class AuditError(BkdiskError):
    """The audit could not run (no disks, unreadable metadata, an output folder in the way)."""


class AuditUsageError(BkdiskError):
    """An input of the audit, salvage or scan-disk could not be used (a disks file, an output folder)."""


def first_line(e: Exception) -> str:
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    errs = [x for x in lines if x.endswith("Error") or "Error:" in x or "Exception:" in x]
    return (errs[-1] if errs else lines[0] if lines else type(e).__name__)[:300]
