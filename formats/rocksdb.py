"""RocksDB on-disk structures a DbLedgerStorage bookie holds: SST footer, block handles, block trailers,
internal keys, log records (WAL and MANIFEST), write batches and version-edit tags.

specs/rocksdb.md holds the byte tables. Every integer is little-endian; variable-length integers are
LEB128 (``VARINT``, at most 10 bytes for 64 bits, 5 for 32 bits). Source facts: RocksDB's
table/format.{h,cc}, table/block_based/{block,block_builder,data_block_footer,reader_common}.cc,
db/dbformat.h, db/log_format.h, db/write_batch.cc, db/version_edit.{h,cc}.
"""
from __future__ import annotations

import enum

import construct as cs
import crc32c as _crc32c
import numpy as np
import xxhash

from bkdisk.formats.errors import FormatError

# --- variable-length integers ---------------------------------------------------------------
VARINT = cs.VarInt                     # RocksDB PutVarint32/PutVarint64: 7 bits a byte, low group first
VARINT32_MAX_BYTES, VARINT64_MAX_BYTES = 5, 10
VARSIGNED = cs.ZigZag                  # PutVarsignedint64: zigzag over a varint


def unzigzag(n: int) -> int:
    """The signed value of a zigzag-coded varint (``read_varint`` twin of ``VARSIGNED``)."""
    return (n >> 1) ^ -(n & 1)


def read_varint(buf: bytes | memoryview, pos: int, limit: int, max_bytes: int = VARINT64_MAX_BYTES,
                *, what: str = "a varint", path: str | None = None, base: int = 0) -> tuple[int, int]:
    """(value, next position) of the VARINT at ``buf[pos:limit]``; the hot-loop twin of ``VARINT``.

    A varint running past ``limit`` or longer than ``max_bytes`` is a FormatError at ``base + pos``.
    """
    value = shift = 0
    p = pos
    while True:
        if p >= limit or p - pos >= max_bytes:
            found = "the end of its bytes" if p >= limit else f"more than {max_bytes} bytes"
            raise FormatError(what, found, path=path, offset=base + pos)
        b = buf[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7


def read_slice(buf: bytes | memoryview, pos: int, limit: int, *, what: str, path: str | None = None,
               base: int = 0) -> tuple[bytes, int]:
    """A length-prefixed slice (VARINT32 length, then that many bytes) at ``buf[pos:limit]``."""
    n, p = read_varint(buf, pos, limit, VARINT32_MAX_BYTES, what=f"the length of {what}", path=path, base=base)
    if n > limit - p:
        raise FormatError(f"{what} of {n} bytes", f"{limit - p} bytes left", path=path, offset=base + pos)
    return bytes(buf[p:p + n]), p + n


# --- block-based table (SST) ----------------------------------------------------------------
BLOCK_BASED_TABLE_MAGIC = 0x88E241B785F4CFF7
LEGACY_BLOCK_BASED_TABLE_MAGIC = 0xDB4775248B80FB57   # format_version 0/1, unsupported by RocksDB too
BLOCK_HANDLE = cs.Struct("offset" / VARINT, "size" / VARINT)
BLOCK_HANDLE_MAX = 2 * VARINT64_MAX_BYTES               # BlockHandle::kMaxEncodedLength
EXTENDED_MAGIC = b"\x3e\x00\x7a\x00"                    # format_version >= 6, start of part 2

FOOTER = cs.Struct(                                      # format_version >= 1: the last 53 bytes
    "checksum_type" / cs.Int8ul,
    "part2" / cs.Bytes(2 * BLOCK_HANDLE_MAX),            # two handles + zeros (< 6), or FOOTER_V6_PART2
    "format_version" / cs.Int32ul,
    "magic" / cs.Int64ul,
)
FOOTER_SIZE = FOOTER.sizeof()                            # 53
FOOTER_V6_PART2 = cs.Struct(
    "extended_magic" / cs.Const(EXTENDED_MAGIC),
    "footer_checksum" / cs.Int32ul,                      # of the whole footer with this field zeroed
    "base_context_checksum" / cs.Int32ul,
    "metaindex_size" / cs.Int32ul,                       # the metaindex ends right before the footer
    "unchecked" / cs.Bytes(16),
    "reserved" / cs.Int64ul,                             # must be 0
)
FOOTER_CHECKSUM_AT = FOOTER.subcons[0].sizeof() + len(EXTENDED_MAGIC)   # 5
FOOTER_CHECKSUM_SIZE = FOOTER_V6_PART2.footer_checksum.sizeof()
# (from the footer's start)
FOOTER_FORMAT_VERSION_AT = FOOTER_SIZE - FOOTER.magic.sizeof() - FOOTER.format_version.sizeof()
FORMAT_VERSIONS = range(2, 7)                            # read here; 7 adds custom compression names

BLOCK_TRAILER = cs.Struct("compression_type" / cs.Int8ul, "checksum" / cs.Int32ul)
BLOCK_TRAILER_SIZE = BLOCK_TRAILER.sizeof()              # 5
RESTART = cs.Int32ul                                     # restart offsets, then their count, end a block
BLOCK_FOOTER = cs.Int32ul                                # num_restarts | feature bits
HASH_INDEX_BIT, UNIFORM_KEYS_BIT, SEPARATED_KV_BIT = 1 << 31, 1 << 29, 1 << 28
MAX_NUM_RESTARTS = (1 << 28) - 1
HASH_BUCKET_COUNT = cs.Int16ul                           # data-block hash index: buckets, then their count
RESTART_DTYPE = np.dtype(f"<u{RESTART.sizeof()}")


TRAILER_DTYPE = np.dtype([("compression_type", "u1"), ("checksum", f"<u{BLOCK_TRAILER.subcons[1].sizeof()}")])
assert TRAILER_DTYPE.itemsize == BLOCK_TRAILER_SIZE


def unpack_trailer(data, at: int) -> tuple[int, int]:
    """(compression type, stored checksum) of the BLOCK_TRAILER at ``data[at:]``: the hot-path twin of the
    declaration (tests compare them); a block read per call, so no construct parse per block."""
    t = np.frombuffer(data, dtype=TRAILER_DTYPE, count=1, offset=at)[0]
    return int(t["compression_type"]), int(t["checksum"])


def unpack_restarts(raw: bytes, at: int, count: int) -> list[int]:
    """``RESTART[count]`` at ``raw[at:]``: the hot-path twin of the declaration (tests compare them)."""
    return np.frombuffer(raw, dtype=RESTART_DTYPE, count=count, offset=at).tolist()


class ChecksumType(enum.IntEnum):
    NONE = 0
    CRC32C = 1
    XXHASH = 2
    XXHASH64 = 3
    XXH3 = 4


class Compression(enum.IntEnum):
    NONE = 0
    SNAPPY = 1
    ZLIB = 2
    BZIP2 = 3
    LZ4 = 4
    LZ4HC = 5
    XPRESS = 6
    ZSTD = 7


_CRC_MASK_DELTA = 0xA282EAD8
_XXH3_LAST_BYTE_PRIME = 0x6B9083D9


def mask_crc(crc: int) -> int:
    """crc32c::Mask: rotate right 15 and add a constant (a CRC of data holding CRCs stays useful)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _CRC_MASK_DELTA) & 0xFFFFFFFF


def builtin_checksum(ctype: int, data: bytes | memoryview) -> int:
    """ComputeBuiltinChecksum: the 32-bit checksum of ``data`` by the table's checksum type."""
    if ctype == ChecksumType.CRC32C:
        return mask_crc(_crc32c.crc32c(data))
    if ctype == ChecksumType.XXHASH:
        return xxhash.xxh32_intdigest(data, seed=0)
    if ctype == ChecksumType.XXHASH64:
        return xxhash.xxh64_intdigest(data, seed=0) & 0xFFFFFFFF
    if ctype == ChecksumType.XXH3:
        if len(data) == 0:
            return 0
        v = xxhash.xxh3_64_intdigest(bytes(data[:-1])) & 0xFFFFFFFF
        return v ^ ((data[-1] * _XXH3_LAST_BYTE_PRIME) & 0xFFFFFFFF)
    if ctype == ChecksumType.NONE:
        return 0
    raise FormatError("a checksum type 0..4", str(ctype))


def stored_checksum(value: int) -> int:
    """A 32-bit checksum field's value for a sum that may exceed 32 bits (checksum + context modifier)."""
    return value & 0xFFFFFFFF


def recycled_log_number(log_number: int) -> int:
    """The log number as a recyclable record header holds it: its low 32 bits."""
    return log_number & 0xFFFFFFFF


def context_modifier(base_context_checksum: int, offset: int) -> int:
    """ChecksumModifierForContext (format_version >= 6): added to stored checksums; 0 when disabled."""
    if base_context_checksum == 0:
        return 0
    return (base_context_checksum ^ (((offset & 0xFFFFFFFF) + (offset >> 32)) & 0xFFFFFFFF)) & 0xFFFFFFFF


# Properties block and metaindex names (all other metaindex entries are filters, hash indexes ...).
PROPERTIES_BLOCK = b"rocksdb.properties"
RANGE_DEL_BLOCK = b"rocksdb.range_del"
INDEX_BLOCK = b"rocksdb.index"                            # the index handle for format_version >= 6
PROP_INDEX_KEY_IS_USER_KEY = b"rocksdb.index.key.is.user.key"
PROP_INDEX_VALUE_DELTA = b"rocksdb.index.value.is.delta.encoded"
PROP_NUM_ENTRIES = b"rocksdb.num.entries"
PROP_COMPRESSION = b"rocksdb.compression"
PROP_COMPARATOR = b"rocksdb.comparator"
PROP_INDEX_TYPE = b"rocksdb.block.based.table.index.type"
INDEX_TYPE_BINARY_SEARCH = 0
FIXED_PROPERTY = cs.Int32ul   # the index type property value; most others are VARINT64

# --- internal keys --------------------------------------------------------------------------
INTERNAL_KEY_FOOTER = cs.Int64ul    # (sequence << 8) | value type, after the user key
INTERNAL_KEY_FOOTER_SIZE = INTERNAL_KEY_FOOTER.sizeof()
MAX_SEQUENCE = (1 << 56) - 1


class ValueType(enum.IntEnum):
    DELETION = 0x0
    VALUE = 0x1
    MERGE = 0x2
    LOG_DATA = 0x3
    CF_DELETION = 0x4
    CF_VALUE = 0x5
    CF_MERGE = 0x6
    SINGLE_DELETION = 0x7
    CF_SINGLE_DELETION = 0x8
    BEGIN_PREPARE_XID = 0x9
    END_PREPARE_XID = 0xA
    COMMIT_XID = 0xB
    ROLLBACK_XID = 0xC
    NOOP = 0xD
    CF_RANGE_DELETION = 0xE
    RANGE_DELETION = 0xF
    CF_BLOB_INDEX = 0x10
    BLOB_INDEX = 0x11
    BEGIN_PERSISTED_PREPARE_XID = 0x12
    BEGIN_UNPREPARE_XID = 0x13
    DELETION_WITH_TIMESTAMP = 0x14
    COMMIT_XID_AND_TIMESTAMP = 0x15
    WIDE_COLUMN_ENTITY = 0x16
    CF_WIDE_COLUMN_ENTITY = 0x17
    VALUE_PREFERRED_SEQNO = 0x18
    CF_VALUE_PREFERRED_SEQNO = 0x19


DELETIONS = frozenset({ValueType.DELETION, ValueType.SINGLE_DELETION, ValueType.DELETION_WITH_TIMESTAMP})


def split_internal_key(ikey: bytes, *, path: str | None = None, offset: int = 0) -> tuple[bytes, int, int]:
    """(user key, sequence number, value type) of an internal key."""
    n = len(ikey) - INTERNAL_KEY_FOOTER_SIZE
    if n < 0:
        raise FormatError(f"an internal key of at least {INTERNAL_KEY_FOOTER_SIZE} bytes", f"{len(ikey)} bytes",
                          path=path, offset=offset)
    packed = INTERNAL_KEY_FOOTER.parse(ikey[n:])
    return ikey[:n], packed >> 8, packed & 0xFF


def unpack_internal_key(ikey: bytes) -> tuple[bytes, int, int]:
    """(user key, sequence, type) of an internal key of at least 8 bytes: the hot-path twin of
    ``split_internal_key`` (the footer read as INTERNAL_KEY_FOOTER's little-endian u64)."""
    packed = int.from_bytes(ikey[-INTERNAL_KEY_FOOTER_SIZE:], "little")
    return ikey[:-INTERNAL_KEY_FOOTER_SIZE], packed >> 8, packed & 0xFF


FOOTER_DTYPE = np.dtype(f"<u{INTERNAL_KEY_FOOTER_SIZE}")   # INTERNAL_KEY_FOOTER as a numpy column


def footer_column(ikeys: np.ndarray) -> np.ndarray:
    """The packed (sequence << 8 | type) of each row of an (n, K) array of internal keys, as uint64."""
    tail = np.ascontiguousarray(ikeys[:, ikeys.shape[1] - INTERNAL_KEY_FOOTER_SIZE:])
    return tail.view(FOOTER_DTYPE).reshape(-1).astype(np.uint64)


def key_words(keys: np.ndarray) -> list[np.ndarray]:
    """The bytewise order of (n, K) user-key rows as big-endian uint64 columns, most significant first
    (rows zero-padded to a multiple of 8 bytes; equal-length keys keep their order)."""
    n, k = keys.shape
    pad = (-k) % 8
    if pad:
        keys = np.concatenate([keys, np.zeros((n, pad), np.uint8)], axis=1)
    words = np.ascontiguousarray(keys).view(np.dtype(">u8"))
    return [words[:, j].astype(np.uint64) for j in range(words.shape[1])]


def ceil_key(bound: bytes, size: int) -> bytes | None:
    """The smallest ``size``-byte key >= ``bound`` in bytewise order, None when there is none: a key of
    ``size`` bytes is >= ``bound`` exactly when it is >= this (how range tombstones meet fixed-size keys)."""
    if len(bound) <= size:
        return bound + bytes(size - len(bound))
    v = int.from_bytes(bound[:size], "big") + 1   # longer: a key equal to its first bytes sorts below it
    return None if v >> (8 * size) else v.to_bytes(size, "big")


def internal_key(user_key: bytes, sequence: int, vtype: int) -> bytes:
    return user_key + INTERNAL_KEY_FOOTER.build((sequence << 8) | vtype)


# --- log files (WAL *.log and MANIFEST-*) ---------------------------------------------------
LOG_BLOCK_SIZE = 32768
LOG_HEADER = cs.Struct("checksum" / cs.Int32ul, "length" / cs.Int16ul, "type" / cs.Int8ul)
RECYCLABLE_LOG_HEADER = cs.Struct("checksum" / cs.Int32ul, "length" / cs.Int16ul, "type" / cs.Int8ul,
                                  "log_number" / cs.Int32ul)
LOG_HEADER_SIZE, RECYCLABLE_LOG_HEADER_SIZE = LOG_HEADER.sizeof(), RECYCLABLE_LOG_HEADER.sizeof()   # 7, 11
LOG_CHECKSUM_FROM = LOG_HEADER.subcons[0].sizeof() + LOG_HEADER.subcons[1].sizeof()   # the CRC covers type onward


class LogRecordType(enum.IntEnum):
    ZERO = 0            # preallocated space
    FULL = 1
    FIRST = 2
    MIDDLE = 3
    LAST = 4
    RECYCLABLE_FULL = 5
    RECYCLABLE_FIRST = 6
    RECYCLABLE_MIDDLE = 7
    RECYCLABLE_LAST = 8
    SET_COMPRESSION = 9
    TIMESTAMP_SIZE = 10
    RECYCLABLE_TIMESTAMP_SIZE = 11
    PREDECESSOR_WAL_INFO = 130
    RECYCLABLE_PREDECESSOR_WAL_INFO = 131


LOG_SAFE_IGNORE_BIT = 0x80

WRITE_BATCH_HEADER = cs.Struct("sequence" / cs.Int64ul, "count" / cs.Int32ul)
WRITE_BATCH_HEADER_SIZE = WRITE_BATCH_HEADER.sizeof()   # 12


# --- MANIFEST version edits -----------------------------------------------------------------
class Tag(enum.IntEnum):
    COMPARATOR = 1
    LOG_NUMBER = 2
    NEXT_FILE_NUMBER = 3
    LAST_SEQUENCE = 4
    COMPACT_CURSOR = 5
    DELETED_FILE = 6
    NEW_FILE = 7
    PREV_LOG_NUMBER = 9
    MIN_LOG_NUMBER_TO_KEEP = 10
    NEW_FILE2 = 100
    NEW_FILE3 = 102
    NEW_FILE4 = 103
    COLUMN_FAMILY = 200
    COLUMN_FAMILY_ADD = 201
    COLUMN_FAMILY_DROP = 202
    MAX_COLUMN_FAMILY = 203
    IN_ATOMIC_GROUP = 300
    BLOB_FILE_ADDITION = 400
    BLOB_FILE_GARBAGE = 401
    DB_ID = (1 << 13) + 1
    WAL_ADDITION = (1 << 13) + 4
    WAL_DELETION = (1 << 13) + 5
    FULL_HISTORY_TS_LOW = (1 << 13) + 6
    WAL_ADDITION2 = (1 << 13) + 7
    WAL_DELETION2 = (1 << 13) + 8


TAG_SAFE_IGNORE_BIT = 1 << 13          # unknown tags with this bit carry a length and may be skipped


class NewFileTag(enum.IntEnum):
    TERMINATE = 1
    NEED_COMPACTION = 2
    MIN_LOG_NUMBER_TO_KEEP_HACK = 3
    OLDEST_BLOB_FILE_NUMBER = 4
    OLDEST_ANCESTER_TIME = 5
    FILE_CREATION_TIME = 6
    FILE_CHECKSUM = 7
    FILE_CHECKSUM_FUNC_NAME = 8
    EPOCH_NUMBER = 13
    PATH_ID = 65


NEW_FILE_NON_SAFE_IGNORE_BIT = 1 << 6   # custom fields with this bit must be understood
WAL_ADDITION_TERMINATE, WAL_ADDITION_SYNCED_SIZE = 1, 2
FILE_NUMBER_MASK = 0x3FFFFFFFFFFFFFFF   # kNewFile: the path id rides in the top bits
