"""Journal ``.txn`` files: the version header, length-prefixed records, padding and meta records.

specs/journal.md holds the byte tables. Source facts: bookie/JournalChannel.java, Journal.java,
BookieImpl.java (METAENTRY_ID_*), LedgerDescriptor.java.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import construct as cs

from bkdisk.formats.codec import field_offsets, parse_struct
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, V2_FLAGS_BASE, V2_MARKER
from bkdisk.formats.errors import FormatError

JOURNAL_MAGIC = b"BKLG"
MIN_VERSION, MAX_VERSION = 1, 6
WRITABLE_VERSIONS = (4, 5, 6)
SECTOR_SIZE = 512

JOURNAL_VERSION_HEADER = cs.Struct("magic" / cs.Const(JOURNAL_MAGIC), "version" / cs.Int32sb)
# V5 and V6 pad the 8-byte header with zeros to one 512-byte sector.
JOURNAL_SECTOR_HEADER = cs.Padded(SECTOR_SIZE, JOURNAL_VERSION_HEADER)

RECORD_LENGTH = cs.Int32sb
PADDING_MARKER = -0x100
PADDING_RECORD = cs.Struct(
    "marker" / cs.Const(PADDING_MARKER, cs.Int32sb),
    "padding_length" / cs.Int32sb,
    "padding" / cs.Bytes(cs.this.padding_length),
)

META_LEDGER_KEY = -0x1000
META_FENCE = -0x2000
META_FORCE_LEDGER = -0x4000  # a queue marker in BookKeeper; never written
META_EXPLICIT_LAC = -0x8000

LEDGER_KEY_BODY = cs.Struct(
    "ledger_id" / cs.Int64ub,
    "entry_id" / cs.Const(META_LEDGER_KEY, cs.Int64sb),
    "key_length" / cs.Int32sb,
    cs.Check(lambda ctx: 0 <= ctx.key_length <= 1 << 16),
    "master_key" / cs.Bytes(cs.this.key_length),
)
FENCE_BODY = cs.Struct(
    "ledger_id" / cs.Int64ub,
    "entry_id" / cs.Const(META_FENCE, cs.Int64sb),
)
FORCE_LEDGER_BODY = cs.Struct(
    "ledger_id" / cs.Int64ub,
    "entry_id" / cs.Const(META_FORCE_LEDGER, cs.Int64sb),
)
EXPLICIT_LAC_BODY = cs.Struct(
    "ledger_id" / cs.Int64ub,
    "entry_id" / cs.Const(META_EXPLICIT_LAC, cs.Int64sb),
    "lac_body_length" / cs.Int32sb,
    cs.Check(lambda ctx: 16 <= ctx.lac_body_length <= 1 << 16),
    "lac_body" / cs.Bytes(cs.this.lac_body_length),
)
# The explicit-LAC body a client sends (WriteLac), stored as is in journals and .idx V1 headers.
LAC_BODY = cs.Struct(
    "ledger_id" / cs.Int64ub,
    "lac" / cs.Int64sb,
    "digest" / cs.GreedyBytes,
)
# Scoped (BP-35) records: the V1 body behind a 9-byte prefix, the same prefix a V2 entry starts with.
# Meta records use digest nibble 0 (flags 0xA0); V2 data entries carry their digest type (0xA1..0xA4).
SCOPED_PREFIX = cs.Struct("flags" / cs.Int8ub, "scope_id" / cs.Int64ub)
SCOPED_PREFIX_SIZE = 9
SCOPED_META_FLAGS = V2_FLAGS_BASE


class RecordKind(enum.IntEnum):
    DATA = 0
    LEDGER_KEY = 1
    FENCE = 2
    FORCE_LEDGER = 3
    EXPLICIT_LAC = 4
    PADDING = 5
    UNKNOWN_META = 6


META_KIND = {META_LEDGER_KEY: RecordKind.LEDGER_KEY, META_FENCE: RecordKind.FENCE,
             META_FORCE_LEDGER: RecordKind.FORCE_LEDGER, META_EXPLICIT_LAC: RecordKind.EXPLICIT_LAC}
# The first journal version that may carry each meta record (older files reject it on replay).
KIND_MIN_VERSION = {RecordKind.LEDGER_KEY: 3, RecordKind.FENCE: 4, RecordKind.EXPLICIT_LAC: 6}


def header_size(version: int) -> int:
    """Where the first record starts: V1 has no header, V2-V4 8 bytes, V5+ one 512-byte sector."""
    if version == 1:
        return 0
    return 8 if version <= 4 else SECTOR_SIZE


def parse_header(data: bytes | memoryview, *, path: str | None = None) -> int:
    """The journal version. Like BookKeeper, bytes that do not start with BKLG mean a V1 file."""
    if len(data) < 8 or bytes(data[:4]) != JOURNAL_MAGIC:
        return 1
    v = JOURNAL_VERSION_HEADER.parse(bytes(data[:8])).version
    if not MIN_VERSION <= v <= MAX_VERSION:
        raise FormatError(f"a journal version {MIN_VERSION}..{MAX_VERSION}", str(v), path=path, offset=4)
    return v


def build_header(version: int) -> bytes:
    if version not in WRITABLE_VERSIONS:
        raise FormatError(f"a writable journal version {WRITABLE_VERSIONS}", str(version))
    hdr = dict(magic=JOURNAL_MAGIC, version=version)
    return (JOURNAL_SECTOR_HEADER if version >= 5 else JOURNAL_VERSION_HEADER).build(hdr)


def padding_payload_length(position: int, alignment: int) -> int | None:
    """The padding record's payload length that aligns ``position``, or None when already aligned."""
    r = position % alignment
    if r == 0:
        return None
    pad = alignment - r
    return pad - 8 if pad >= 8 else alignment - (8 - pad)


@dataclass(frozen=True)
class JournalRecord:
    """One record of a journal, decoded from its body."""

    offset: int          # of the 4-byte length prefix
    length: int          # body length (the prefix value; padding: its payload length)
    kind: RecordKind
    scope_id: int
    ledger_id: int
    entry_id: int
    master_key: bytes | None = None
    explicit_lac: int | None = None
    lac_body: bytes | None = None
    scoped: bool = False


def classify_body(body: bytes | memoryview, *, offset: int, path: str | None = None) -> JournalRecord:
    """Decode a record body (the bytes after its length prefix) at file ``offset``."""
    b = bytes(body)
    scope, scoped, base = 0, False, b
    if b and b[0] >= V2_MARKER:
        pre = parse_struct(SCOPED_PREFIX, b[:SCOPED_PREFIX_SIZE], what="a 9-byte scoped record prefix",
                           path=path, offset=offset + 4)
        scope, scoped, base = pre.scope_id, True, b[SCOPED_PREFIX_SIZE:]
        is_meta = len(base) >= 16 and int.from_bytes(base[8:16], "big", signed=True) < 0
        if is_meta and pre.flags != SCOPED_META_FLAGS:
            raise FormatError("flags 0xA0 on a scoped meta record", f"0x{pre.flags:02x}", path=path, offset=offset + 4)
        if not is_meta and not V2_FLAGS_BASE + 1 <= pre.flags <= V2_FLAGS_BASE + 4:
            raise FormatError("flags 0xA1..0xA4 on a V2 data entry", f"0x{pre.flags:02x}", path=path,
                              offset=offset + 4)
    if len(base) < 16:
        raise FormatError("a record body of at least 16 bytes (ledger id, entry id)", f"{len(b)} bytes",
                          path=path, offset=offset + 4)
    ledger_id = int.from_bytes(base[0:8], "big")
    entry_id = int.from_bytes(base[8:16], "big", signed=True)
    body_off = offset + 4 + (SCOPED_PREFIX_SIZE if scoped else 0)
    if entry_id >= 0:
        if len(base) < ENTRY_V1_HEADER_SIZE:
            raise FormatError("a data record of at least 32 bytes", f"{len(base)} bytes", path=path, offset=body_off)
        return JournalRecord(offset, len(b), RecordKind.DATA, scope, ledger_id, entry_id, scoped=scoped)
    kind = META_KIND.get(entry_id, RecordKind.UNKNOWN_META)
    if kind == RecordKind.LEDGER_KEY:
        c = parse_struct(LEDGER_KEY_BODY, base, what="a ledger-key record", path=path, offset=body_off)
        return JournalRecord(offset, len(b), kind, scope, ledger_id, entry_id, master_key=c.master_key, scoped=scoped)
    if kind == RecordKind.EXPLICIT_LAC:
        c = parse_struct(EXPLICIT_LAC_BODY, base, what="an explicit-LAC record", path=path, offset=body_off)
        lac = parse_struct(LAC_BODY, c.lac_body, what="an explicit-LAC body", path=path, offset=body_off + 20)
        return JournalRecord(offset, len(b), kind, scope, ledger_id, entry_id, explicit_lac=lac.lac,
                             lac_body=c.lac_body, scoped=scoped)
    return JournalRecord(offset, len(b), kind, scope, ledger_id, entry_id, scoped=scoped)


def scoped_prefix(scope_id: int, flags: int = SCOPED_META_FLAGS) -> bytes:
    return SCOPED_PREFIX.build(dict(flags=flags, scope_id=scope_id))


def build_ledger_key_body(ledger_id: int, master_key: bytes, scope_id: int = 0) -> bytes:
    body = LEDGER_KEY_BODY.build(dict(ledger_id=ledger_id, key_length=len(master_key), master_key=master_key))
    return (scoped_prefix(scope_id) + body) if scope_id else body


def build_fence_body(ledger_id: int, scope_id: int = 0) -> bytes:
    body = FENCE_BODY.build(dict(ledger_id=ledger_id))
    return (scoped_prefix(scope_id) + body) if scope_id else body


def build_explicit_lac_body(ledger_id: int, lac_body: bytes, scope_id: int = 0) -> bytes:
    body = EXPLICIT_LAC_BODY.build(dict(ledger_id=ledger_id, lac_body_length=len(lac_body), lac_body=lac_body))
    return (scoped_prefix(scope_id) + body) if scope_id else body


# --- offsets, sizes and limits the scanners read, derived from the declarations above ------------
RECORD_LENGTH_SIZE = RECORD_LENGTH.sizeof()
PADDING_HEAD_SIZE = PADDING_RECORD.marker.sizeof() + PADDING_RECORD.padding_length.sizeof()
PADDING_MIN_VERSION = 5                 # JournalChannel.V5: padding records and sector-aligned headers
# Every record body starts with ledger id and entry id (a marker below zero on meta records); the
# force-ledger body is nothing more, so it gives the smallest body and where both ids sit.
META_BODY_SIZE = FORCE_LEDGER_BODY.sizeof()
META_LEDGER_AT, META_ENTRY_AT = (field_offsets(FORCE_LEDGER_BODY)[k] for k in ("ledger_id", "entry_id"))
KEY_LENGTH_AT = field_offsets(LEDGER_KEY_BODY)["key_length"]
KEY_AT = KEY_LENGTH_AT + LEDGER_KEY_BODY.key_length.sizeof()
LAC_BODY_LENGTH_AT = field_offsets(EXPLICIT_LAC_BODY)["lac_body_length"]
LAC_BODY_AT = LAC_BODY_LENGTH_AT + EXPLICIT_LAC_BODY.lac_body_length.sizeof()
assert (KEY_AT, LAC_BODY_AT) == (field_offsets(LEDGER_KEY_BODY)["master_key"],
                                 field_offsets(EXPLICIT_LAC_BODY)["lac_body"])
# The bounds the Checks of LEDGER_KEY_BODY and EXPLICIT_LAC_BODY enforce (tests build both edges).
MAX_KEY_LENGTH = 1 << 16
MIN_LAC_BODY_LENGTH, MAX_LAC_BODY_LENGTH = 16, 1 << 16
SCOPE_AT = field_offsets(SCOPED_PREFIX)["scope_id"]
assert SCOPED_PREFIX.sizeof() == SCOPED_PREFIX_SIZE
