"""An entry log's identity for the scrub schedule: size, inode, mtime and a hash of its header and
ledgers map. Compaction writes a new file (another inode) and a bookie appending to its current log
changes its size and mtime; the hash catches a log rewritten in place to the same size."""
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

from bkdisk.formats import entrylog as fe
from bkdisk.formats.errors import FormatError

_CHUNK = 1 << 20   # the ledgers map is read this much at a time: memory stays bounded for any map


@dataclass(frozen=True)
class LogIdentity:
    size: int
    inode: int
    mtime_ns: int
    frame_hash: bytes   # blake2b-16 of the header's 1024 bytes and the ledgers map's bytes (when rolled)


def _map_offset(header: bytes, size: int, path: str) -> int | None:
    """Where the ledgers map starts, None when the log has none (not rolled) or its header is unreadable."""
    try:
        h = fe.parse_header(header, path=path)
    except FormatError:
        return None
    if h.version >= 1 and fe.HEADER_SIZE <= h.ledgers_map_offset <= size:
        return h.ledgers_map_offset
    return None


def log_identity(path: str) -> LogIdentity:
    """The identity of the entry log at ``path`` (reads its header and ledgers map, never its entries).
    An unreadable file raises OSError, for the caller to report as such; so does a file that is not a
    regular one (a FIFO named like a log would block a plain open until a writer came)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        digest = hashlib.blake2b(digest_size=16)
        header = f.read(fe.HEADER_SIZE)
        digest.update(header)
        start = _map_offset(header, st.st_size, path)
        if start is not None:
            f.seek(start)
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    return LogIdentity(st.st_size, st.st_ino, st.st_mtime_ns, digest.digest())
