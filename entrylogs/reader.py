"""Reference entry-log reader: the framing walk, the ledgers map and resync after damage.

The walk rules here are the contract the jitted walk (entrylogs/walk.py, driven by
entrylogs/scan.py) must meet record for record; specs/entrylog.md states them. Records are decoded
through the declarations of formats/entry.py and formats/entrylog.py. The ledgers map has one
reader (``read_ledgers_map``), used by this reader and the jitted scanner alike.
"""
from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import construct as cs
import numpy as np

from bkdisk.diskio.failures import without_frames
from bkdisk.diskio.mapped import read_bytes
from bkdisk.entrylogs.ledgers_map import LedgersMap
from bkdisk.formats import entrylog as fe
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType, compute_digest
from bkdisk.formats.entry import (
    ENTRY_V1_HEADER,
    ENTRY_V1_HEADER_SIZE,
    ENTRY_V2_HEADER,
    ENTRY_V2_HEADER_SIZE,
    V2_DIGEST_MASK,
    V2_FLAGS_BASE,
    V2_MARKER,
    V2_VERSION_MASK,
)
from bkdisk.formats.errors import FormatError
from bkdisk.formats.paths import parse_entry_log_name

# header_at's code for a record of ledger -1 met while walking entries: a ledgers-map batch (the
# map's offset is unknown when the header is damaged) or DirectEntryLogger's dummy record at 1024.
# Not an entry and not damage: skipped, as BookKeeper's scanEntryLog skips every ledger -1 record.
SKIP_RECORD = 16

# Resync after damage (``resync``): an entry proves itself by its CRC when it is at most PROOF_MAX_SIZE
# bytes (an entry past 5 MB exceeds a bookie's default frame limit), searched for up to PROOF_REACH bytes
# past the damage.
PROOF_MAX_SIZE = 16 << 20
PROOF_REACH = 64 << 20


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
    ledgers_map: LedgersMap | None = None
    map_error: FormatError | None = None
    data_end: int = 0     # where entry records end (the ledgers map offset, or the file end)
    records: list[EntryRecord] = field(default_factory=list)
    problems: list[FramingProblem] = field(default_factory=list)


def header_at(b, pos: int, end: int) -> tuple[int, EntryRecord | None]:
    """Judge the record whose size prefix is at ``pos``: (damage code or 0, the record if plausible)."""
    prefix = fe.SIZE_PREFIX_SIZE
    if pos + prefix > end:
        return Damage.TRUNCATED, None
    size = fe.ENTRY_SIZE.parse(bytes(b[pos:pos + prefix]))
    if size <= 0:
        return Damage.ZERO_SIZE, None
    s = pos + prefix
    if (size >= fe.MIN_SANE_ENTRY_SIZE and pos + prefix + size <= end
            and ENTRY_V1_HEADER.ledger_id.parse(bytes(b[s:s + 8])) == fe.INVALID_LEDGER_ID):
        return SKIP_RECORD, None
    if size < ENTRY_V1_HEADER_SIZE or size > fe.MAX_ENTRY_SIZE or pos + prefix + size > end:
        return Damage.BAD_SIZE, None
    first = b[s]
    if first >= V2_MARKER:
        if (size < ENTRY_V2_HEADER_SIZE or (first & V2_VERSION_MASK) != V2_FLAGS_BASE
                or (first & V2_DIGEST_MASK) not in set(DigestType)):
            return Damage.BAD_HEADER, None
        h = ENTRY_V2_HEADER.parse(bytes(b[s:s + ENTRY_V2_HEADER_SIZE]))
        ver, scope = 2, h.scope_id
    else:
        h = ENTRY_V1_HEADER.parse(bytes(b[s:s + ENTRY_V1_HEADER_SIZE]))
        ver, scope = 1, 0
    if h.entry_id < 0 or h.last_add_confirmed < -1 or h.last_add_confirmed >= h.entry_id or h.length < 0:
        return Damage.BAD_HEADER, None
    return 0, EntryRecord(pos, size, ver, scope, h.ledger_id, h.entry_id, h.last_add_confirmed, h.length)


def padding_end(b, pos: int, end: int) -> int:
    """Where DirectEntryLogger's flush padding that starts at ``pos`` ends, or 0 when there is none.

    Padding: ``pos`` is not on a 4096-byte boundary, the next boundary is within the data, and every
    byte from ``pos`` up to it is 0xF0.
    """
    r = pos % fe.DIRECT_ALIGNMENT
    nxt = pos + fe.DIRECT_ALIGNMENT - r
    if r == 0 or nxt > end or b[pos] != fe.DIRECT_PADDING_BYTE:
        return 0
    return nxt if bytes(b[pos:nxt]).count(fe.DIRECT_PADDING_BYTE) == nxt - pos else 0


def proves_itself(b, rec: EntryRecord) -> bool:
    """The entry matches its CRC32C or CRC32 digest (entries of at most PROOF_MAX_SIZE bytes)."""
    if rec.size > PROOF_MAX_SIZE:
        return False
    s = rec.offset + fe.SIZE_PREFIX_SIZE
    head = ENTRY_V2_HEADER_SIZE if rec.format_version == 2 else ENTRY_V1_HEADER_SIZE
    covered, stored = bytes(b[s:s + head]), bytes(b[s + head:s + rec.size])
    return any(len(stored) >= DIGEST_LENGTH[t] and stored[:DIGEST_LENGTH[t]] == compute_digest(
        t, covered, stored[DIGEST_LENGTH[t]:]) for t in (DigestType.CRC32C, DigestType.CRC32))


def _record_end(b, pos: int, end: int) -> tuple[int, bool]:
    """Where the record at ``pos`` ends when it is an entry, a skipped record or flush padding, else -1;
    and whether it is an entry."""
    code, rec = header_at(b, pos, end)
    if code == SKIP_RECORD:
        return pos + fe.SIZE_PREFIX_SIZE + fe.ENTRY_SIZE.parse(bytes(b[pos:pos + fe.SIZE_PREFIX_SIZE])), False
    if code == 0 and rec is not None:
        return pos + fe.SIZE_PREFIX_SIZE + rec.size, True
    return padding_end(b, pos, end) or -1, False


def proves_at(b, pos: int, end: int) -> bool:
    """An entry starts at ``pos`` that proves itself: followed by a record or the end of the data (a chance
    header seldom is), it matches its CRC32C or CRC32 digest."""
    code, rec = header_at(b, pos, end)
    if code != 0 or rec is None:
        return False
    nxt = pos + fe.SIZE_PREFIX_SIZE + rec.size
    return (nxt == end or _record_end(b, nxt, end)[0] >= 0) and proves_itself(b, rec)


def _framing_sizes(b, start: int, stop: int, end: int, step: int = 1 << 20):
    """The offsets in [start, stop) whose four bytes, read as a size prefix, could frame an entry: the
    only ones header_at may accept (numpy picks them, a step at a time, from a long run of others)."""
    from bkdisk.diskio.kernels import be_i32_at  # (numba's import: only a resync needs it)
    view = np.frombuffer(b, np.uint8)
    for lo in range(start, stop, step):
        at = np.arange(lo, min(stop, lo + step))
        size = be_i32_at(view, at)
        yield from (int(q) for q in at[(size >= ENTRY_V1_HEADER_SIZE) & (at + fe.SIZE_PREFIX_SIZE + size <= end)])


def crosses(b, pos: int, target: int, end: int) -> bool:
    """The records from ``pos`` pass over ``target`` without one starting there. Records never overlap, so
    when an entry starts at ``target`` these are not the log's."""
    q = pos
    while 0 <= q < target:
        nxt = _record_end(b, q, end)[0]
        if nxt > target:
            return True
        q = nxt
    return False


def plausible_at(b, pos: int, end: int) -> bool:
    """A resync candidate: an entry whose successor is the end of the data, another entry, a skipped
    record, flush padding or a zero tail."""
    q, is_entry = _record_end(b, pos, end)
    if not is_entry or q == end:
        return is_entry
    return _record_end(b, q, end)[0] >= 0 or _zero_tail(b, q, end)   # (the zero tail last: it reads to the end)


def _zero_tail(b, pos: int, end: int) -> bool:
    return bytes(b[pos:end]).count(0) == end - pos


def resync(b, pos: int, end: int) -> int:
    """Where the walk takes up after damage at ``pos``: the first plausible entry after it whose records
    do not pass over the first entry after it that proves itself; ``end`` when there is none.

    A header that passes every check can lie inside a payload (payloads of small big-endian integers
    or of mostly zeros hold them by the hundred), and the record after it often looks whole too. Taken
    up there, the walk reports entries never written and, where such a record runs past the next real
    entry, steps over real ones. An entry that proves itself (its CRC32C or CRC32 digest matches: one
    chance in 2^32) is real, and the records of a real chain cannot pass over it; entries whose digests
    cannot be checked here (HMAC, none) stay candidates as long as their records do not. The proving
    entry is searched for up to PROOF_REACH bytes past the damage; without one, the first plausible
    entry is taken.
    """
    reach = min(end, pos + PROOF_REACH)
    proved = next((q for q in _framing_sizes(b, pos + 1, reach - fe.SIZE_PREFIX_SIZE - ENTRY_V1_HEADER_SIZE + 1, end)
                   if proves_at(b, q, end)), -1)
    q = pos + 1
    while q + fe.SIZE_PREFIX_SIZE + ENTRY_V1_HEADER_SIZE <= end:
        if plausible_at(b, q, end) and (proved < 0 or not crosses(b, q, proved, end)):
            return q
        q += 1
    return end


@dataclass(frozen=True)
class LogFrame:
    """What the header says about a log: the header (or why it is unreadable), the ledgers map
    (or why it is unreadable), and where entry records end."""

    header: fe.EntryLogHeader | None
    header_error: FormatError | None
    ledgers_map: LedgersMap | None
    map_error: FormatError | None
    data_end: int


def _batch_heads() -> dict[int, tuple[cs.Struct, int, np.dtype]]:
    """Per batch entry id (-2, -3): the batch head's declaration, the item size, the items' dtype."""
    out = {}
    for decl, entry_id in ((fe.LEDGERS_MAP_BATCH, fe.LEDGERS_MAP_ENTRY_ID),
                           (fe.SCOPED_LEDGERS_MAP_BATCH, fe.SCOPED_LEDGERS_MAP_ENTRY_ID)):
        item = decl.ledgers.subcon.subcon
        dtype = np.dtype([(sub.name, sub.subcon.fmtstr) for sub in item.subcons])
        assert dtype.itemsize == item.sizeof()
        out[entry_id] = (cs.Struct(*decl.subcons[:4]), item.sizeof(), dtype)
    return out


_BATCH_HEADS = _batch_heads()
_HEAD_SIZE = fe.LEDGERS_MAP_BATCH_HEAD_SIZE


def read_ledgers_map(read: Callable[[int, int], bytes], start: int, size: int,
                     path: str | None = None) -> LedgersMap:
    """formats.entrylog.parse_ledgers_map over a file of ``size`` bytes read through ``read(offset,
    n)``, as a LedgersMap: each batch's items read as one array, the batches' arrays joined and a
    ledger named twice summed in place at once (a map may hold hundreds of thousands of ledgers).

    A batch that its declaration rejects is handed to parse_ledgers_map, so the error is the
    declaration's; a size <= 0 ends the map, as in BookKeeper.
    """
    scopes: list[np.ndarray] = []
    ledgers: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    pos = start
    while pos + fe.SIZE_PREFIX_SIZE <= size:
        head_bytes = read(pos, _HEAD_SIZE)
        batch = fe.ENTRY_SIZE.parse(head_bytes[:fe.SIZE_PREFIX_SIZE])
        if batch <= 0:
            break
        head, width, dtype = None, 0, np.dtype([])
        for decl, w, dt in _BATCH_HEADS.values():
            try:
                head = decl.parse(head_bytes)
            except cs.ConstructError:
                continue
            width, dtype = w, dt
            break
        if (head is None or pos + fe.SIZE_PREFIX_SIZE + batch > size
                or not 0 < head.count <= fe.LEDGERS_MAP_MAX_BATCH
                or batch != _HEAD_SIZE - fe.SIZE_PREFIX_SIZE + width * head.count):
            whole = read(pos, min(size - pos, fe.SIZE_PREFIX_SIZE + max(batch, 0)))
            try:
                fe.parse_ledgers_map(whole, 0, path=path)
            except FormatError as e:
                raise e.at(base_offset=pos) from None
            raise AssertionError(f"{path}: ledgers-map batch at {pos}: its head and its declaration disagree")
        items = np.frombuffer(read(pos + _HEAD_SIZE, width * head.count), dtype=dtype)
        scopes.append(items["scope_id"].astype(np.uint64) if "scope_id" in (dtype.names or ())
                      else np.zeros(head.count, np.uint64))
        ledgers.append(items["ledger_id"].astype(np.uint64))
        sizes.append(items["size"].astype(np.int64))
        pos += fe.SIZE_PREFIX_SIZE + batch
    if not scopes:
        return LedgersMap.empty()
    columns = []
    for parts in (scopes, ledgers, sizes):   # each column's batches let go once joined
        columns.append(np.concatenate(parts))
        parts.clear()
    return LedgersMap.summed(*columns)


def read_frame(read: Callable[[int, int], bytes], size: int, path: str) -> LogFrame:
    """Header and ledgers map of a non-empty log of ``size`` bytes; shared by this reader and the
    jitted scanner, which differ only in how they read bytes (``read(offset, n)``)."""
    header = header_error = ledgers_map = map_error = None
    try:
        header = fe.parse_header(read(0, fe.HEADER_SIZE), path=path)
    except FormatError as e:
        header_error = without_frames(e)   # (kept with the frame: its frames would keep ``read``'s file)
    end = size
    h = header
    if h is not None and h.version >= 1 and h.ledgers_map_offset != 0:
        if fe.HEADER_SIZE <= h.ledgers_map_offset <= size:
            try:
                ledgers_map = read_ledgers_map(read, h.ledgers_map_offset, size, path)
                end = h.ledgers_map_offset
                if len(ledgers_map) != h.ledgers_count:
                    map_error = FormatError(f"{h.ledgers_count} ledgers in the ledgers map (header count)",
                                            f"{len(ledgers_map)}", path=path, offset=h.ledgers_map_offset)
            except FormatError as e:
                map_error = without_frames(e)
                ledgers_map = None
        else:
            map_error = FormatError(f"a ledgers map offset within the file (1024..{size})",
                                    str(h.ledgers_map_offset), path=path, offset=8)
    return LogFrame(header, header_error, ledgers_map, map_error, end)


def read_entry_log(path: str | os.PathLike, data: bytes | None = None) -> EntryLogScan:
    """Walk an entry log: header, every framed entry up to the ledgers map, the map itself."""
    p = os.fspath(path)
    b = read_bytes(p, limit=None) if data is None else data
    scan = EntryLogScan(p, parse_entry_log_name(os.path.basename(p)), len(b))
    if len(b) == 0:
        scan.data_end = 0
        return scan  # a preallocated log that was never written
    fr = read_frame(lambda o, n: bytes(b[o:o + n]), len(b), p)
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
        if code == 0 and rec is not None:
            scan.records.append(rec)
            pos += fe.SIZE_PREFIX_SIZE + rec.size
            continue
        if code == SKIP_RECORD:
            pos += fe.SIZE_PREFIX_SIZE + fe.ENTRY_SIZE.parse(bytes(b[pos:pos + fe.SIZE_PREFIX_SIZE]))
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
        out[k] = out.get(k, 0) + r.size + fe.SIZE_PREFIX_SIZE
    return out
