"""Reference journal reader: walks records with the construct declarations, one Python step each.

This is the slow, obviously-correct path; the jitted scanner (journal/scan.py) must agree with it.
"""
from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field

from bkdisk.diskio.mapped import read_bytes
from bkdisk.formats import journal as fj
from bkdisk.formats.errors import FormatError
from bkdisk.formats.journal import JournalRecord, RecordKind

PREFIX = fj.RECORD_LENGTH_SIZE          # a record's length prefix
PADDING_HEAD = fj.PADDING_HEAD_SIZE     # a padding record's marker and length


class EndKind(enum.IntEnum):
    CLEAN = 0        # a zero length, then only zeros (the preallocated tail)
    EOF = 1          # the file ends exactly after a record
    TORN = 2         # a length that runs past the end of the file, or an all-zero body
    INVALID = 3      # a negative length that is not padding, or a malformed body
    GARBAGE = 4      # a zero length followed by non-zero bytes


@dataclass(frozen=True)
class JournalEnd:
    kind: EndKind
    offset: int          # where reading stopped: the bad or terminating length prefix
    detail: str = ""


@dataclass
class JournalScan:
    path: str
    journal_id: int | None
    version: int
    header_size: int
    size: int
    records: list[JournalRecord] = field(default_factory=list)  # padding included, kind PADDING
    end: JournalEnd | None = None

    @property
    def data_records(self) -> list[JournalRecord]:
        return [r for r in self.records if r.kind != RecordKind.PADDING]

    @property
    def valid_end(self) -> int:
        """Offset just past the last complete record: where a torn tail would be cut."""
        last = self.records[-1] if self.records else None
        if last is None:
            return self.header_size
        # A padding record is marker + padLen + padLen bytes; any other record is length + body.
        return last.offset + (PADDING_HEAD + last.length if last.kind == RecordKind.PADDING else PREFIX + last.length)


def read_journal(path: str | os.PathLike, data: bytes | None = None, start: int | None = None) -> JournalScan:
    """Parse every record of a journal from its first record (or ``start``) to its end."""
    p = os.fspath(path)
    b = read_bytes(p, limit=None) if data is None else data
    from bkdisk.formats.paths import parse_journal_name
    version = fj.parse_header(b, path=p)
    hs = fj.header_size(version)
    scan = JournalScan(p, parse_journal_name(os.path.basename(p)), version, hs, len(b))
    pos = hs if start is None else start
    n = len(b)
    while True:
        if pos + PREFIX > n:
            scan.end = JournalEnd(EndKind.EOF, pos, "end of file")
            break
        length = fj.RECORD_LENGTH.parse(bytes(b[pos:pos + PREFIX]))
        if length == 0:
            tail = b[pos:]
            if tail.count(0) == len(tail):
                scan.end = JournalEnd(EndKind.CLEAN, pos, "zero length, zero-filled tail")
            else:
                nz = pos + next(i for i, c in enumerate(tail) if c)
                scan.end = JournalEnd(EndKind.GARBAGE, pos, f"zero length, but non-zero byte at offset {nz}")
            break
        if length == fj.PADDING_MARKER and version >= fj.PADDING_MIN_VERSION:
            if pos + PADDING_HEAD > n:
                scan.end = JournalEnd(EndKind.TORN, pos, "padding record cut short")
                break
            plen = fj.PADDING_RECORD.padding_length.parse(bytes(b[pos + PREFIX:pos + PADDING_HEAD]))
            if plen < 0 or pos + PADDING_HEAD + plen > n:
                scan.end = JournalEnd(EndKind.TORN if plen >= 0 else EndKind.INVALID, pos,
                                      f"padding length {plen} with {n - pos - PADDING_HEAD} bytes left")
                break
            scan.records.append(JournalRecord(pos, plen, RecordKind.PADDING, 0, 0, 0))
            pos += PADDING_HEAD + plen
            continue
        if length < 0:
            scan.end = JournalEnd(EndKind.INVALID, pos, f"negative record length {length}")
            break
        if pos + PREFIX + length > n:
            scan.end = JournalEnd(EndKind.TORN, pos, f"record length {length} with {n - pos - PREFIX} bytes left")
            break
        body = b[pos + PREFIX:pos + PREFIX + length]
        if body.count(0) == length:
            scan.end = JournalEnd(EndKind.TORN, pos, f"record length {length} over an all-zero body")
            break
        try:
            rec = fj.classify_body(body, offset=pos, path=p)
        except FormatError as e:
            scan.end = JournalEnd(EndKind.INVALID, pos, f"{e.expected}, found {e.found}")
            break
        min_v = fj.KIND_MIN_VERSION.get(rec.kind)
        if min_v is not None and version < min_v:
            scan.end = JournalEnd(EndKind.INVALID, pos, f"{rec.kind.name} record in a version {version} journal")
            break
        scan.records.append(rec)
        pos += PREFIX + length
    return scan
