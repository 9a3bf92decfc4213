"""DbLedgerStorage's keys and values in its two RocksDB databases: ``locations`` (ledger id, entry id) ->
entry location, and ``ledgers`` ledger id -> LedgerData protobuf.

specs/dbledgerstorage.md holds the tables. Source facts: bookie/storage/ldb/EntryLocationIndex.java,
LedgerMetadataIndex.java, LongPairWrapper.java, LongWrapper.java, ArrayUtil.java (big-endian longs),
DbLedgerStorageDataFormats.proto; DefaultEntryLogger (location = log id << 32 | offset of the entry data).
"""
from __future__ import annotations

from dataclasses import dataclass

import construct as cs
import numpy as np
from google.protobuf.message import DecodeError

from bkdisk.formats.codec import parse_struct
from bkdisk.formats.entrylog import ENTRY_SIZE
from bkdisk.formats.errors import FormatError, shown
from bkdisk.formats.index import LAC_BODY_MIN, POSITION_BITS, POSITION_MASK, pack_location, unpack_location
from bkdisk.formats.journal import LAC_BODY
from bkdisk.formats.proto.dbledger_storage_pb2 import LedgerData

LOCATIONS_KEY = cs.Struct("ledger_id" / cs.Int64sb, "entry_id" / cs.Int64sb)   # LongPairWrapper
LOCATIONS_KEY_SIZE = LOCATIONS_KEY.sizeof()                                       # 16
LOCATION_VALUE = cs.Int64sb                     # LongWrapper: (entry log id << 32) | offset of the entry data
LOCATION_VALUE_SIZE = LOCATION_VALUE.sizeof()   # 8
LEDGERS_KEY = cs.Int64sb                        # LongWrapper: the ledger id
LEDGERS_KEY_SIZE = LEDGERS_KEY.sizeof()         # 8
ENTRY_SIZE_FIELD = ENTRY_SIZE.sizeof()   # a location points past the entry log record's size field


KEY_COLUMNS = np.dtype([("ledger_id", ">i8"), ("entry_id", ">i8")])   # LOCATIONS_KEY as a numpy row
VALUE_COLUMN = np.dtype(">i8")                                           # LOCATION_VALUE
LEDGERS_KEY_COLUMN = np.dtype(">i8")                                     # LEDGERS_KEY
assert KEY_COLUMNS.itemsize == LOCATIONS_KEY_SIZE and VALUE_COLUMN.itemsize == LOCATION_VALUE_SIZE
assert LEDGERS_KEY_COLUMN.itemsize == LEDGERS_KEY_SIZE


def location_columns(keys: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    """Columns (ledger, entry, log, offset) of (n, 16) key rows and (n, 8) value rows of ``locations``."""
    k = np.ascontiguousarray(keys).view(KEY_COLUMNS).reshape(-1)
    v = np.ascontiguousarray(values).view(VALUE_COLUMN).reshape(-1).astype(np.int64)
    return {"ledger": k["ledger_id"].astype(np.int64), "entry": k["entry_id"].astype(np.int64),
            "log": v >> POSITION_BITS, "offset": v & POSITION_MASK}


@dataclass(frozen=True)
class Location:
    ledger_id: int
    entry_id: int
    log_id: int
    offset: int          # of the entry data in the log: the scan offset of its size field + 4

    @property
    def packed(self) -> int:
        # the inverse of unpack_location for any stored value, a damaged one too (pack_location refuses those)
        return (self.log_id << POSITION_BITS) | self.offset


def parse_location(key: bytes, value: bytes, *, path: str | None = None, offset: int = 0) -> Location:
    """One ``locations`` entry: 16-byte key and 8-byte value, both big-endian."""
    if len(key) != LOCATIONS_KEY_SIZE:
        raise FormatError(f"a {LOCATIONS_KEY_SIZE}-byte locations key (ledger id, entry id)", shown(key),
                          path=path, offset=offset)
    if len(value) != LOCATION_VALUE_SIZE:
        raise FormatError(f"an {LOCATION_VALUE_SIZE}-byte location", shown(value), path=path, offset=offset)
    k = parse_struct(LOCATIONS_KEY, key, what="a locations key", path=path, offset=offset)
    loc = LOCATION_VALUE.parse(value)
    return Location(k.ledger_id, k.entry_id, *unpack_location(loc))


def locations_key(ledger_id: int, entry_id: int) -> bytes:
    return LOCATIONS_KEY.build(dict(ledger_id=ledger_id, entry_id=entry_id))


def location_value(log_id: int, offset: int) -> bytes:
    return LOCATION_VALUE.build(pack_location(log_id, offset))


@dataclass(frozen=True)
class LedgerInfo:
    ledger_id: int
    exists: bool
    fenced: bool
    master_key: bytes
    explicit_lac_body: bytes | None
    limbo: bool | None

    @property
    def explicit_lac(self) -> int | None:
        """The LAC inside the explicit-LAC body (ledger id, LAC, digest), None without one."""
        b = self.explicit_lac_body
        return None if not b or len(b) < LAC_BODY_MIN else LAC_BODY.parse(b).lac


def parse_ledger(key: bytes, value: bytes, *, path: str | None = None, offset: int = 0) -> LedgerInfo:
    """One ``ledgers`` entry: an 8-byte big-endian ledger id and a LedgerData message with its required fields."""
    if len(key) != LEDGERS_KEY_SIZE:
        raise FormatError(f"an {LEDGERS_KEY_SIZE}-byte ledgers key", shown(key), path=path, offset=offset)
    return parse_ledger_data(LEDGERS_KEY.parse(key), value, path=path, offset=offset)


def parse_ledger_data(ledger_id: int, value: bytes, *, path: str | None = None, offset: int = 0) -> LedgerInfo:
    """The LedgerData message of ledger ``ledger_id`` (its key already read), with its required fields."""
    msg = LedgerData()
    try:
        msg.ParseFromString(value)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise FormatError("a LedgerData protobuf", f"undecodable bytes ({type(e).__name__})", path=path,
                          offset=offset) from None
    missing = msg.FindInitializationErrors()
    if missing:
        raise FormatError("a LedgerData with exists, fenced and masterKey", "missing " + ", ".join(missing),
                          path=path, offset=offset)
    return LedgerInfo(ledger_id, msg.exists, msg.fenced, bytes(msg.masterKey),
                      bytes(msg.explicitLac) if msg.HasField("explicitLac") else None,
                      msg.limbo if msg.HasField("limbo") else None)


def ledger_value(info: LedgerInfo) -> bytes:
    msg = LedgerData(exists=info.exists, fenced=info.fenced, masterKey=info.master_key)
    if info.explicit_lac_body is not None:
        msg.explicitLac = info.explicit_lac_body
    if info.limbo is not None:
        msg.limbo = info.limbo
    return msg.SerializeToString()
