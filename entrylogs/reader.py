"""Reference entry-log reader: the framing walk, the ledgers map and resync after damage.

The walk rules here are the contract the jitted scanner (entrylogs/scan.py) must meet record for
record; specs/entrylog.md states them.
"""
from __future__ import annotations

import enum
import os
from typing import Callable
from dataclasses import dataclass, field

from diskio.mapped import read_bytes
from formats import entrylog as fe
from formats.entry import ENTRY_V1_HEADER_SIZE, ENTRY_V2_HEADER_SIZE, V2_FLAGS_BASE
from formats.errors import FormatError
from formats.paths import parse_entry_log_name

MAX_ENTRY_SIZE = 1 << 30  # an entry log is at most 1 GiB (MAX_LOG_SIZE_LIMIT)


# header_at's code for a record of ledger -1 met while walking entries: a ledgers-map batch (the
# map's offset is unknown when the header is damaged) or DirectEntryLogger's dummy record at 1024.
# Not an entry and not damage: skipped, as BookKeeper's scanEntryLog skips every ledger -1 record.
SKIP_RECORD = 16

# DirectEntryLogger (O_DIRECT) pads every buffer flush with 0xF0 bytes up to a 4096-byte boundary.
DIRECT_ALIGNMENT = 4096
DIRECT_PADDING_BYTE = 0xF0


class Damage(enum.IntEnum):
    """Why framing broke at an offset."""
    ZERO_SIZE = 1        # a zero or negative size in the middle of data (zeroed region)
    BAD_SIZE = 2         # a size too small for an entry header, or past the end of the data
    BAD_HEADER = 3       # an entry header that cannot be an entry (negative entry id, bad V2 flags)
    TRUNCATED = 4        # the file ends inside a size prefix


@dataclass(frozen=True)
class EntryRecord:
    offset: int          # of the 4-byte size prefix; the entry's location position is offset + 4
    size: int
    format_version: int
    scope_id: int
    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    length: int


@dataclass(frozen=True)
class FramingProblem:
    offset: int
    reason: Damage
    resumed_at: int      # where the next plausible entry was found (or the end of the data)


@dataclass
class EntryLogScan:
    path: str
    log_id: int | None
    size: int
    header: fe.EntryLogHeader | None = None
    header_error: FormatError | None = None
    ledgers_map: dict[tuple[int, int], int] | None = None
    map_error: FormatError | None = None
    data_end: int = 0     # where entry records end (the ledgers map offset, or the file end)
    records: list[EntryRecord] = field(default_factory=list)
    problems: list[FramingProblem] = field(default_factory=list)


def header_at(b, pos: int, end: int) -> tuple[int, EntryRecord | None]:
    """Judge the record whose size prefix is at ``pos``: (damage code or 0, the record if plausible)."""
    if pos + 4 > end:
        return Damage.TRUNCATED, None
    size = int.from_bytes(b[pos:pos + 4], "big", signed=True)
    if size <= 0:
        return Damage.ZERO_SIZE, None
    if size >= fe.MIN_SANE_ENTRY_SIZE and pos + 4 + size <= end and bytes(b[pos + 4:pos + 12]) == b"\xff" * 8:
        return SKIP_RECORD, None
    if size < ENTRY_V1_HEADER_SIZE or size > MAX_ENTRY_SIZE or pos + 4 + size > end:
        return Damage.BAD_SIZE, None
    s = pos + 4
    first = b[s]
    if first >= 0x80:
        if size < ENTRY_V2_HEADER_SIZE or (first & 0xF0) != V2_FLAGS_BASE or not 1 <= (first & 0x0F) <= 4:
            return Damage.BAD_HEADER, None
        ver, scope, s = 2, int.from_bytes(b[s + 1:s + 9], "big"), s + 9
    else:
        ver, scope = 1, 0
    ledger = int.from_bytes(b[s:s + 8], "big")
    entry = int.from_bytes(b[s + 8:s + 16], "big", signed=True)
    lac = int.from_bytes(b[s + 16:s + 24], "big", signed=True)
    length = int.from_bytes(b[s + 24:s + 32], "big", signed=True)
    if entry < 0 or lac < -1 or lac >= entry or length < 0:
        return Damage.BAD_HEADER, None
    return 0, EntryRecord(pos, size, ver, scope, ledger, entry, lac, length)


def padding_end(b, pos: int, end: int) -> int:
    """Where DirectEntryLogger's flush padding that starts at ``pos`` ends, or 0 when there is none.

    Padding: ``pos`` is not on a 4096-byte boundary, the next boundary is within the data, and every
    byte from ``pos`` up to it is 0xF0.
    """
    r = pos % DIRECT_ALIGNMENT
    nxt = pos + DIRECT_ALIGNMENT - r
    if r == 0 or nxt > end or b[pos] != DIRECT_PADDING_BYTE:
        return 0
    return nxt if bytes(b[pos:nxt]).count(DIRECT_PADDING_BYTE) == nxt - pos else 0


def plausible_at(b, pos: int, end: int) -> bool:
    """A resync candidate: a valid header whose successor is the end of data, another valid header,
    a skipped (ledger -1) record, flush padding or a zero tail."""
    code, rec = header_at(b, pos, end)
    if code:
        return False
    nxt = pos + 4 + rec.size
    if nxt == end:
        return True
    code2, _ = header_at(b, nxt, end)
    return code2 in (0, SKIP_RECORD) or padding_end(b, nxt, end) > 0 or _zero_tail(b, nxt, end)


def _zero_tail(b, pos: int, end: int) -> bool:
    return bytes(b[pos:end]).count(0) == end - pos


def resync(b, pos: int, end: int) -> int:
    """The next offset after ``pos`` where a plausible entry starts, or ``end``."""
    q = pos + 1
    while q + 4 + ENTRY_V1_HEADER_SIZE <= end:
        if plausible_at(b, q, end):
            return q
        q += 1
    return end


@dataclass(frozen=True)
class LogFrame:
    """What the header says about a log: the header (or why it is unreadable), the ledgers map
    (or why it is unreadable), and where entry records end."""

    header: fe.EntryLogHeader | None
    header_error: FormatError | None
    ledgers_map: dict[tuple[int, int], int] | None
    map_error: FormatError | None
    data_end: int


def read_frame(read: Callable[[int, int], bytes], size: int, path: str,
               parse_map: Callable[[int], dict[tuple[int, int], int]]) -> LogFrame:
    """Header and ledgers map of a non-empty log of ``size`` bytes; shared by this reader and the
    jitted scanner, which differ only in how they read bytes (``read(offset, n)``) and parse the map."""
    header = header_error = ledgers_map = map_error = None
    try:
        header = fe.parse_header(read(0, fe.HEADER_SIZE), path=path)
    except FormatError as e:
        header_error = e
    end = size
    h = header
    if h is not None and h.version >= 1 and h.ledgers_map_offset != 0:
        if fe.HEADER_SIZE <= h.ledgers_map_offset <= size:
            try:
                ledgers_map = parse_map(h.ledgers_map_offset)
                end = h.ledgers_map_offset
                if len(ledgers_map) != h.ledgers_count:
                    map_error = FormatError(f"{h.ledgers_count} ledgers in the ledgers map (header count)",
                                            f"{len(ledgers_map)}", path=path, offset=h.ledgers_map_offset)
            except FormatError as e:
                map_error = e
                ledgers_map = None
        else:
            map_error = FormatError(f"a ledgers map offset within the file (1024..{size})",
                                    str(h.ledgers_map_offset), path=path, offset=8)
    return LogFrame(header, header_error, ledgers_map, map_error, end)


def read_entry_log(path: str | os.PathLike, data: bytes | None = None) -> EntryLogScan:
    """Walk an entry log: header, every framed entry up to the ledgers map, the map itself."""
    p = os.fspath(path)
    b = read_bytes(p) if data is None else data
    scan = EntryLogScan(p, parse_entry_log_name(os.path.basename(p)), len(b))
    if len(b) == 0:
        scan.data_end = 0
        return scan  # a preallocated log that was never written
    fr = read_frame(lambda o, n: b[o:o + n], len(b), p, lambda start: fe.parse_ledgers_map(b, start, path=p))
    scan.header, scan.header_error, scan.ledgers_map, scan.map_error = fr.header, fr.header_error, fr.ledgers_map, \
        fr.map_error
    end = fr.data_end
    scan.data_end = end
    pos = fe.HEADER_SIZE
    while pos < end:
        pad = padding_end(b, pos, end)
        if pad:
            pos = pad
            continue
        code, rec = header_at(b, pos, end)
        if code == 0:
            scan.records.append(rec)
            pos += 4 + rec.size
            continue
        if code == SKIP_RECORD:
            pos += 4 + int.from_bytes(b[pos:pos + 4], "big", signed=True)
            continue
        if code == Damage.ZERO_SIZE and _zero_tail(b, pos, end):
            # Zeros to the end of data: an unwritten tail, not damage, unless a map should follow.
            if scan.ledgers_map is not None:
                scan.problems.append(FramingProblem(pos, Damage.ZERO_SIZE, end))
            break
        nxt = resync(b, pos, end)
        scan.problems.append(FramingProblem(pos, Damage(code), nxt))
        pos = nxt
    return scan


def computed_ledgers_map(scan: EntryLogScan) -> dict[tuple[int, int], int]:
    """The ledgers map the records imply: per (scope, ledger), the sum of (size + 4)."""
    out: dict[tuple[int, int], int] = {}
    for r in scan.records:
        k = (r.scope_id, r.ledger_id)
        out[k] = out.get(k, 0) + r.size + 4
    return out
