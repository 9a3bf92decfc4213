"""Write batches of the WAL replayed into a memtable: each counted operation takes the next sequence number."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.codec import parse_struct
from bkdisk.formats.errors import FormatError
from bkdisk.rocksdbfiles.logfile import LogContents, Tail, read_log
from bkdisk.rocksdbfiles.sst import Record

if TYPE_CHECKING:
    import numpy as np

V = rf.ValueType
# Operations of the default column family that take a sequence number: tag -> (has cf id, value type, has value)
_OPS = {
    V.VALUE: (False, V.VALUE, True), V.CF_VALUE: (True, V.VALUE, True),
    V.DELETION: (False, V.DELETION, False), V.CF_DELETION: (True, V.DELETION, False),
    V.SINGLE_DELETION: (False, V.SINGLE_DELETION, False), V.CF_SINGLE_DELETION: (True, V.SINGLE_DELETION, False),
    V.RANGE_DELETION: (False, V.RANGE_DELETION, True), V.CF_RANGE_DELETION: (True, V.RANGE_DELETION, True),
    V.MERGE: (False, V.MERGE, True), V.CF_MERGE: (True, V.MERGE, True),
    V.BLOB_INDEX: (False, V.BLOB_INDEX, True), V.CF_BLOB_INDEX: (True, V.BLOB_INDEX, True),
    V.WIDE_COLUMN_ENTITY: (False, V.WIDE_COLUMN_ENTITY, True),
    V.CF_WIDE_COLUMN_ENTITY: (True, V.WIDE_COLUMN_ENTITY, True),
    V.VALUE_PREFERRED_SEQNO: (False, V.VALUE_PREFERRED_SEQNO, True),
    V.CF_VALUE_PREFERRED_SEQNO: (True, V.VALUE_PREFERRED_SEQNO, True),
}
_MARKERS_WITH_SLICE = {V.LOG_DATA: 1, V.END_PREPARE_XID: 1, V.COMMIT_XID: 1, V.ROLLBACK_XID: 1,
                       V.COMMIT_XID_AND_TIMESTAMP: 2}
_MARKERS = {V.NOOP, V.BEGIN_PREPARE_XID, V.BEGIN_PERSISTED_PREPARE_XID, V.BEGIN_UNPREPARE_XID}


@dataclass(frozen=True)
class Batch:
    offset: int              # file offset of its log record
    sequence: int            # of its first counted operation
    count: int
    records: tuple[Record, ...]   # default column family only, in batch order


def decode_batch(payload: bytes, *, path: str, offset: int) -> Batch:
    """One write batch: header (sequence, count), then ``count`` tagged operations (and uncounted markers)."""
    if len(payload) < rf.WRITE_BATCH_HEADER_SIZE:
        raise FormatError(f"a write batch of at least its {rf.WRITE_BATCH_HEADER_SIZE}-byte header",
                          f"{len(payload)} bytes", path=path, offset=offset)
    h = parse_struct(rf.WRITE_BATCH_HEADER, payload[:rf.WRITE_BATCH_HEADER_SIZE], what="a write batch header",
                     path=path, offset=offset)
    p, n, seq, counted, out = rf.WRITE_BATCH_HEADER_SIZE, len(payload), h.sequence, 0, []

    def slice_(what: str) -> bytes:
        nonlocal p
        v, p = rf.read_slice(payload, p, n, what=what, path=path, base=offset)
        return v

    while p < n:
        tag = payload[p]
        p += 1
        if tag in _OPS:
            has_cf, vtype, has_value = _OPS[tag]
            cf = 0
            if has_cf:
                cf, p = rf.read_varint(payload, p, n, rf.VARINT32_MAX_BYTES, what="a column family id", path=path,
                                       base=offset)
            key = slice_("a key")
            value = slice_("a value") if has_value else b""
            if cf == 0:
                out.append(Record(key, seq + counted, vtype, value))
            counted += 1
        elif tag in _MARKERS_WITH_SLICE:
            for _ in range(_MARKERS_WITH_SLICE[tag]):
                slice_("a marker's bytes")
        elif tag not in _MARKERS:
            raise FormatError("a write batch tag", f"{tag:#04x}", path=path, offset=offset + p - 1)
    if counted != h.count:
        raise FormatError(f"{h.count} operations as the batch header says", str(counted), path=path, offset=offset)
    return Batch(offset, h.sequence, h.count, tuple(out))


@dataclass
class WalReplay:
    path: str
    number: int
    batches: list[Batch] = field(default_factory=list)
    tail: Tail | None = None
    bad_batch: FormatError | None = None     # a whole record whose batch did not decode (replay stops there)

    @property
    def last_sequence(self) -> int:
        b = self.batches[-1] if self.batches else None
        return b.sequence + b.count - 1 if b else 0


def replay_wal(data: bytes | memoryview | np.ndarray, *, path: str, number: int) -> WalReplay:
    """The write batches of one WAL up to its first damage (what RocksDB's point-in-time recovery keeps)."""
    contents: LogContents = read_log(data, path=path, log_number=number)
    out = WalReplay(path, number, tail=contents.tail)
    for rec in contents.records:
        try:
            out.batches.append(decode_batch(rec.payload, path=path, offset=rec.offset))
        except FormatError as e:
            out.bad_batch = e
            break
    return out
