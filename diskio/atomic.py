"""Atomic file replacement that keeps what it replaces: temp file, fsync, backup, rename."""
from __future__ import annotations

import os
import shutil
import time
from typing import Iterable


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, backup_dir: str | None = None, mode: int = 0o644) -> str | None:
    """Replace ``path`` with ``data`` atomically; return where the old file was kept (if any)."""
    return atomic_rewrite(path, [data], backup_dir=backup_dir, mode=mode)


def atomic_rewrite(path: str, chunks: Iterable[bytes | memoryview], *, size: int | None = None,
                   backup_dir: str | None = None, mode: int = 0o644) -> str | None:
    """Replace ``path`` with the concatenated ``chunks`` (zero-extended to ``size``) atomically.

    The new bytes go to a temp file in the same directory, are fsynced, then renamed over the
    target. An existing target is first kept in ``backup_dir`` and its owner and mode carry over.
    Returns where the old file was kept (if anywhere).
    """
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    kept = None
    if backup_dir is not None and os.path.exists(path):
        kept = backup_file(path, backup_dir)
    tmp = os.path.join(d, f".{os.path.basename(path)}.bkdisk-tmp-{os.getpid()}")
    old = os.stat(path) if os.path.exists(path) else None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        if size is not None:
            os.ftruncate(fd, size)
        if old is not None:
            # The replacement keeps the owner and mode of what it replaces: the bookie must still write it.
            os.fchmod(fd, old.st_mode & 0o7777)
            if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                os.fchown(fd, old.st_uid, old.st_gid)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(d)
    return kept


def backup_file(path: str, backup_dir: str) -> str:
    """Copy ``path`` into ``backup_dir`` under a unique name that keeps its base name."""
    os.makedirs(backup_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = os.path.basename(path)
    dest = os.path.join(backup_dir, f"{base}.{stamp}")
    n = 1
    while os.path.exists(dest):
        dest = os.path.join(backup_dir, f"{base}.{stamp}.{n}")
        n += 1
    try:
        # A hard link keeps the old inode alive when the original name is replaced: no copy needed.
        os.link(path, dest)
    except OSError:
        shutil.copy2(path, dest)
    fsync_dir(backup_dir)
    return dest


def atomic_move(src: str, dest: str, *, backup_dir: str | None = None) -> str | None:
    """Move ``src`` to ``dest`` (same filesystem), keeping a copy of ``src`` in ``backup_dir``."""
    kept = backup_file(src, backup_dir) if backup_dir else None
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.exists(dest):
        raise FileExistsError(dest)
    os.link(src, dest)
    fsync_dir(os.path.dirname(dest))
    os.unlink(src)
    fsync_dir(os.path.dirname(src))
    return kept
