"""The record framing of RocksDB log files (the WAL ``*.log`` and ``MANIFEST-*``): 32 KiB blocks of
checksummed fragments joined into logical records, and where a damaged or torn tail begins."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import crc32c

from bkdisk.formats import rocksdb as rf

if TYPE_CHECKING:
    import numpy as np

T = rf.LogRecordType
_FRAGMENT_TYPES = {T.FULL, T.FIRST, T.MIDDLE, T.LAST}
_RECYCLABLE = {T.RECYCLABLE_FULL: T.FULL, T.RECYCLABLE_FIRST: T.FIRST, T.RECYCLABLE_MIDDLE: T.MIDDLE,
               T.RECYCLABLE_LAST: T.LAST}


@dataclass(frozen=True)
class LogRecord:
    offset: int          # file offset of the header of its first fragment
    payload: bytes


@dataclass(frozen=True)
class Tail:
    """Where reading stopped before the end of the file, and why."""
    offset: int          # first byte not part of a whole record
    reason: str          # 'truncated record', 'checksum mismatch', 'bad record length', ...
    lost_bytes: int      # bytes from ``offset`` to the end of the file: never replayed
    partial_payload: bytes = b""   # fragments of a record begun but never finished


@dataclass
class LogContents:
    path: str
    size: int
    records: list[LogRecord] = field(default_factory=list)
    tail: Tail | None = None
    compression: int = 0         # a kSetCompressionType record's value (only 0 is read here)


def _nonzero(data, start: int) -> int:
    """How many bytes from ``start`` on, up to the last non-zero byte (0 when all zeros)."""
    rest = bytes(data[start:])
    stripped = rest.rstrip(b"\x00")
    return len(stripped)


def read_log(data: bytes | memoryview | np.ndarray, *, path: str = "<log>",
             log_number: int | None = None) -> LogContents:
    """Every whole logical record of a log file, stopping at the first damage (as RocksDB's point-in-time
    recovery does); the rest of the file is described in ``tail``. Never raises on content."""
    out = LogContents(path, len(data))
    n = len(data)
    pos = 0
    pending: bytearray | None = None
    pending_at = 0

    def stop(at: int, reason: str) -> LogContents:
        start = pending_at if pending is not None else at
        if _nonzero(data, start) or pending is not None:     # zeros alone after the last record: a clean end
            out.tail = Tail(start, reason, n - start, bytes(pending or b""))
        return out

    while pos < n:
        left_in_block = rf.LOG_BLOCK_SIZE - pos % rf.LOG_BLOCK_SIZE
        if left_in_block < rf.LOG_HEADER_SIZE:
            pos += left_in_block            # block trailer, zero-filled by the writer
            continue
        if n - pos < rf.LOG_HEADER_SIZE:
            return stop(pos, "truncated record header")
        h = rf.LOG_HEADER.parse(bytes(data[pos:pos + rf.LOG_HEADER_SIZE]))
        if h.type == T.ZERO and h.length == 0:
            if _nonzero(data, pos) == 0 and pending is None:
                return out                  # preallocated zeros: the clean end
            pos += left_in_block            # RocksDB skips the rest of such a block
            continue
        header = rf.LOG_HEADER_SIZE
        rtype = h.type
        if rtype in _RECYCLABLE or rtype in (T.RECYCLABLE_TIMESTAMP_SIZE, T.RECYCLABLE_PREDECESSOR_WAL_INFO):
            header = rf.RECYCLABLE_LOG_HEADER_SIZE
        end = pos + header + h.length
        if header + h.length > left_in_block:
            if end > n:
                return stop(pos, "truncated record")
            return stop(pos, "bad record length")
        if end > n:
            return stop(pos, "truncated record")
        if rf.mask_crc(crc32c.crc32c(bytes(data[pos + rf.LOG_CHECKSUM_FROM:end]))) != h.checksum:
            return stop(pos, "checksum mismatch")
        if header == rf.RECYCLABLE_LOG_HEADER_SIZE:
            rec = rf.RECYCLABLE_LOG_HEADER.parse(bytes(data[pos:pos + header]))
            if log_number is not None and rec.log_number != rf.recycled_log_number(log_number):
                return stop(pos, "record of an older log (recycled file)")
            rtype = _RECYCLABLE.get(rtype, rtype)
        payload = bytes(data[pos + header:end])
        if rtype == T.FULL:
            if pending is not None:
                return stop(pos, "a whole record inside a fragmented one")
            out.records.append(LogRecord(pos, payload))
        elif rtype == T.FIRST:
            if pending is not None:
                return stop(pos, "a first fragment inside a fragmented record")
            pending, pending_at = bytearray(payload), pos
        elif rtype in (T.MIDDLE, T.LAST):
            if pending is None:
                return stop(pos, "a continuation fragment without its first")
            pending += payload
            if rtype == T.LAST:
                out.records.append(LogRecord(pending_at, bytes(pending)))
                pending = None
        elif rtype == T.SET_COMPRESSION:
            out.compression = payload[0] if payload else 0
            if out.compression != 0:
                return stop(pos, f"a compressed log (compression type {out.compression}) this reader does not read")
        elif rtype in (T.TIMESTAMP_SIZE, T.RECYCLABLE_TIMESTAMP_SIZE) or rtype & rf.LOG_SAFE_IGNORE_BIT:
            pass                            # metadata records a reader may skip
        else:
            return stop(pos, f"unknown record type {rtype}")
        pos = end
    if pending is not None:
        return stop(pos, "truncated record")
    return out

