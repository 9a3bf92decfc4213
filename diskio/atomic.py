"""Atomic file replacement that keeps what it replaces: temp file, fsync, backup copy, rename.

Temp files are named ``.<name>.bkdisk-tmp-<pid>`` (TEMP_MARK) in the target's folder, so that a
later run can recognise, by name and owner, the ones a killed run left behind.
"""
from __future__ import annotations

import fcntl
import os
import re
import stat
import time
from collections.abc import Iterable

TEMP_MARK = ".bkdisk-tmp-"
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.bkdisk-tmp-(?P<pid>\d+)$")
FICLONE = 0x40049409   # Linux ioctl: share the source's extents (a reflink) on btrfs, XFS
COPY_STEP = 8 << 20


def temp_name(path: str) -> str:
    """Where atomic_rewrite writes the new bytes of ``path`` before the rename."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}{TEMP_MARK}{os.getpid()}")


def write_whole(fd: int, data) -> int:
    """Write every byte of ``data`` (bytes or any buffer) to ``fd``, however many writes it takes;
    returns how many that was."""
    whole = view = memoryview(data).cast("B")
    while len(view):
        view = view[os.write(fd, view):]
    return len(whole)


def private_file(path: str):
    """``path`` opened for writing from its start, readable by its owner only (0600, whatever the umask
    and whatever mode it had) when it is a regular file: for what carries ledger passwords (metadata,
    stores of it). Anything else named (a device, a terminal, a pipe) is written as it is, its mode
    left alone."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb")


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
    tmp = temp_name(path)
    old = os.stat(path) if os.path.exists(path) else None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        for chunk in chunks:
            write_whole(fd, chunk)
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
    """Copy the bytes of ``path`` into ``backup_dir`` under a unique name that keeps its base name.

    A snapshot: a reflink where the filesystem has them, else a byte copy; never a hard link, which
    later writes to the live file would change too."""
    os.makedirs(backup_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = os.path.basename(path)
    dest = os.path.join(backup_dir, f"{base}.{stamp}")
    n = 1
    while os.path.exists(dest):
        dest = os.path.join(backup_dir, f"{base}.{stamp}.{n}")
        n += 1
    src = os.open(path, os.O_RDONLY)
    try:
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _copy_bytes(src, out)
            os.fsync(out)
        except BaseException:   # a full disk, Ctrl-C: no part copy left to pass for a backup
            os.close(out)
            os.unlink(dest)
            raise
        os.close(out)
    finally:
        os.close(src)
    fsync_dir(backup_dir)
    return dest


def _copy_bytes(src: int, out: int) -> None:
    try:
        fcntl.ioctl(out, FICLONE, src)
        return
    except OSError:
        pass   # no reflinks here (ext4, tmpfs) or across filesystems: copy
    while True:
        chunk = os.read(src, COPY_STEP)
        if not chunk:
            return
        write_whole(out, chunk)


def remove_name(path: str) -> None:
    """Unlink one name (never what a symlink points at) and make the removal durable."""
    os.unlink(path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def atomic_move(src: str, dest: str, *, backup_dir: str | None = None) -> str | None:
    """Move ``src`` to ``dest`` (same filesystem), keeping a copy of ``src``'s bytes in ``backup_dir``.

    A link then an unlink: a kill between them leaves two names of one inode, which a later run
    recognises and finishes. A symlink ``src`` is moved as the link itself, never as its target."""
    kept = backup_file(src, backup_dir) if backup_dir else None
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.lexists(dest):
        raise FileExistsError(dest)
    os.link(src, dest, follow_symlinks=False)
    fsync_dir(os.path.dirname(dest))
    os.unlink(src)
    fsync_dir(os.path.dirname(src))
    return kept
