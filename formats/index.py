"""Ledger index ``.idx`` files (FileInfo): the 1024-byte header and pages of entry locations.

specs/index.md holds the byte tables. Source facts: bookie/FileInfo.java, IndexPersistenceMgr.java,
LedgerEntryPage.java.
"""
from __future__ import annotations

from dataclasses import dataclass

import construct as cs

from formats.codec import parse_struct
from formats.errors import FormatError

INDEX_MAGIC = b"BKLE"
HEADER_SIZE = 1024  # START_OF_DATA
HEADER_V0, HEADER_V1 = 0, 1
STATE_FENCED = 0x1
LAC_BODY_MIN = 16

INDEX_HEADER_FIELDS = cs.Struct(
    "magic" / cs.Const(INDEX_MAGIC),
    "version" / cs.Int32sb,
    cs.Check(lambda ctx: ctx.version in (HEADER_V0, HEADER_V1)),
    "master_key_length" / cs.Int32sb,
    # The fields around the key must still fit the 1024-byte block: 16 more bytes for V0, 20 for V1.
    cs.Check(lambda ctx: 0 <= ctx.master_key_length <= HEADER_SIZE - (16 if ctx.version == HEADER_V0 else 20)),
    "master_key" / cs.Bytes(cs.this.master_key_length),
    "state_bits" / cs.Int32ub,
    "explicit_lac_length" / cs.If(cs.this.version >= HEADER_V1, cs.Int32sb),
    cs.Check(lambda ctx: ctx.version == HEADER_V0 or ctx.explicit_lac_length == 0
             or LAC_BODY_MIN <= ctx.explicit_lac_length <= HEADER_SIZE - 20 - ctx.master_key_length),
    "explicit_lac" / cs.If(cs.this.version >= HEADER_V1, cs.Bytes(cs.this.explicit_lac_length)),
)
INDEX_HEADER = cs.Padded(HEADER_SIZE, INDEX_HEADER_FIELDS)

LOCATION = cs.Int64ub  # (entry log id << 32) | position of the entry bytes; 0 = absent


@dataclass(frozen=True)
class IndexHeader:
    version: int
    master_key: bytes
    state_bits: int
    explicit_lac_body: bytes | None  # None for V0 or an empty field

    @property
    def fenced(self) -> bool:
        return bool(self.state_bits & STATE_FENCED)

    @property
    def explicit_lac(self) -> int | None:
        b = self.explicit_lac_body
        return None if not b else int.from_bytes(b[8:16], "big", signed=True)


def parse_header(data: bytes | memoryview, *, path: str | None = None) -> IndexHeader:
    if len(data) < HEADER_SIZE:
        raise FormatError(f"a {HEADER_SIZE}-byte index header", f"{len(data)} bytes", path=path, offset=0)
    c = parse_struct(INDEX_HEADER, data[:HEADER_SIZE], what="an index header 'BKLE', version 0|1, master key, state",
                     path=path)
    return IndexHeader(c.version, c.master_key, c.state_bits, c.explicit_lac or None)


def build_header(h: IndexHeader) -> bytes:
    lac = h.explicit_lac_body or b""
    return INDEX_HEADER.build(dict(magic=INDEX_MAGIC, version=h.version, master_key_length=len(h.master_key),
                                   master_key=h.master_key, state_bits=h.state_bits,
                                   explicit_lac_length=len(lac) if h.version >= 1 else None,
                                   explicit_lac=lac if h.version >= 1 else None))


def pack_location(log_id: int, position: int) -> int:
    if not (0 <= log_id < 1 << 32 and 0 <= position < 1 << 32):
        raise FormatError("an entry log id and position that fit 32 bits each", f"({log_id}, {position})")
    return (log_id << 32) | position


def unpack_location(loc: int) -> tuple[int, int]:
    return loc >> 32, loc & 0xFFFFFFFF


def slot_offset(entry_id: int) -> int:
    """File offset of an entry's location slot (pages are only an I/O unit: the slots are one flat array)."""
    return HEADER_SIZE + 8 * entry_id
