"""Where the commands that read bookie disks (audit, salvage, scan-disk) may write: never inside a disk
they read, neither its root as given nor a dir its layout names (a bk_server.conf's dirs may lie
anywhere), and the output and the scrub state never one inside the other. Checked before any disk is
read or Spark starts."""
from __future__ import annotations

import os
from collections.abc import Iterable

from bkdisk.audit.errors import AuditUsageError
from bkdisk.bookie.layout import discover, from_conf
from bkdisk.formats.errors import BkdiskError


def _real(path: str) -> str:
    return os.path.realpath(path).rstrip(os.sep) + os.sep


def _within(path: str, folder: str) -> bool:
    return _real(path).startswith(_real(folder))


def disk_folders(disk: str) -> list[str]:
    """The folders a disk given as ``disk`` (a root, or a bk_server.conf) is: the root itself and every
    dir its layout names; the root alone when its layout cannot be read (the scan says why)."""
    folders = [] if os.path.isfile(disk) else [disk]
    try:
        dirs = from_conf(disk) if os.path.isfile(disk) else discover(disk)
    except (BkdiskError, OSError):
        return folders
    return folders + list(dirs.all_dirs)


def refuse_inside_disks(writes: dict[str, str | None], disks: Iterable[str]) -> None:
    """AuditUsageError naming the option and the disk when a place written (``writes``: option -> path)
    lies in a disk read."""
    disks = list(disks)
    for option, path in writes.items():
        if path is None:
            continue
        for disk in disks:
            for folder in disk_folders(disk):
                if _within(path, folder):
                    where = f"the disk {disk}" if folder == disk else f"{folder}, a dir of the disk {disk}"
                    raise AuditUsageError(f"{path}: {option} is inside {where}, which this command reads; "
                                          f"expected a place outside every disk")


def refuse_nested(a: str | None, a_option: str, b: str | None, b_option: str) -> None:
    """AuditUsageError when ``a`` and ``b`` are one place or one lies inside the other."""
    if a is None or b is None:
        return
    if _within(a, b) or _within(b, a):
        raise AuditUsageError(f"{a}: {a_option} and {b_option} ({b}) overlap; expected two places apart")
