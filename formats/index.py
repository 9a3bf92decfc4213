"""Ledger index ``.idx`` files (FileInfo): the 1024-byte header and pages of entry locations.

specs/index.md holds the byte tables. Source facts: bookie/FileInfo.java, IndexPersistenceMgr.java,
LedgerEntryPage.java.
"""
from __future__ import annotations

from dataclasses import dataclass

import construct as cs
import numpy as np

from bkdisk.formats.codec import field_offsets, parse_struct
from bkdisk.formats.digests import MASTER_KEY_SIZE
from bkdisk.formats.errors import FormatError
from bkdisk.formats.journal import LAC_BODY

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
    cs.Check(lambda ctx: 0 <= ctx.master_key_length <= HEADER_SIZE - HEADER_FIXED_SIZE[ctx.version]),
    "master_key" / cs.Bytes(cs.this.master_key_length),
    "state_bits" / cs.Int32ub,
    "explicit_lac_length" / cs.If(cs.this.version >= HEADER_V1, cs.Int32sb),
    cs.Check(lambda ctx: ctx.version == HEADER_V0 or ctx.explicit_lac_length == 0
             or LAC_BODY_MIN <= ctx.explicit_lac_length <= HEADER_SIZE - HEADER_FIXED_SIZE[HEADER_V1]
             - ctx.master_key_length),
    "explicit_lac" / cs.If(cs.this.version >= HEADER_V1, cs.Bytes(cs.this.explicit_lac_length)),
)
INDEX_HEADER = cs.Padded(HEADER_SIZE, INDEX_HEADER_FIELDS)

LOCATION = cs.Int64ub  # (entry log id << 32) | position of the entry bytes; 0 = absent


def _field_size(struct: cs.Struct, name: str) -> int:
    """Size of a fixed-size field (the field itself when it is present only in some versions)."""
    sc = struct._subcons[name]
    while not isinstance(sc, cs.FormatField):   # Renamed -> If -> the integer field
        sc = getattr(sc, "subcon", None) or sc.thensubcon
    return sc.sizeof()


_AT = field_offsets(INDEX_HEADER_FIELDS)
VERSION_OFFSET = _AT["version"]                      # 4
KEY_LENGTH_OFFSET = _AT["master_key_length"]         # 8
KEY_OFFSET = _AT["master_key"]                       # 12; state_bits, then (V1) explicit_lac_length follow the key
# Bytes of the fixed fields around the key: magic, version, key length and state (V0), plus the LAC length (V1).
HEADER_FIXED_SIZE: dict[int, int] = {HEADER_V0: KEY_OFFSET + _field_size(INDEX_HEADER_FIELDS, "state_bits")}
HEADER_FIXED_SIZE[HEADER_V1] = HEADER_FIXED_SIZE[HEADER_V0] + _field_size(INDEX_HEADER_FIELDS, "explicit_lac_length")
SLOT_SIZE = LOCATION.sizeof()                        # 8
SLOT_DTYPE = np.dtype(f">u{SLOT_SIZE}")             # LOCATION as numpy reads a page of slots
MAGIC_VALUE = cs.Int32ub.parse(INDEX_MAGIC)          # the signature as the big-endian u32 a kernel compares
# The fields of an explicit-LAC body (LAC_BODY) read one at a time: cheaper than the whole Struct per file.
_LAC_LEDGER, _LAC, _LAC_AT = LAC_BODY._subcons["ledger_id"], LAC_BODY._subcons["lac"], field_offsets(LAC_BODY)["lac"]


# What a header refused as a whole may still tell: the state bits after the key (INDEX_HEADER_FIELDS'
# own fields, read one at a time), wherever the signature and version went, when the key length before
# them is a master key's (a zeroed or overwritten header would say "not fenced" by accident).
_KEY_LENGTH = INDEX_HEADER_FIELDS._subcons["master_key_length"]
_STATE_BITS = INDEX_HEADER_FIELDS._subcons["state_bits"]
_STATE_AT = KEY_OFFSET + MASTER_KEY_SIZE


def state_after_key(head: bytes) -> int | None:
    """The state bits of a refused header's first bytes; None when its key length is not a master
    key's or the bytes end before them."""
    if len(head) < _STATE_AT + _STATE_BITS.sizeof():
        return None
    if _KEY_LENGTH.parse(head[KEY_LENGTH_OFFSET:KEY_OFFSET]) != MASTER_KEY_SIZE:
        return None
    return int(_STATE_BITS.parse(head[_STATE_AT:_STATE_AT + _STATE_BITS.sizeof()]))


_LAC_LENGTH = INDEX_HEADER_FIELDS._subcons["explicit_lac_length"].thensubcon
_LAC_LENGTH_AT = _STATE_AT + _STATE_BITS.sizeof()
_LAC_BODY_AT = _LAC_LENGTH_AT + _LAC_LENGTH.sizeof()


def lac_after_state(head: bytes, ledger_id: int) -> bytes | None:
    """The explicit-LAC body of a refused header's first bytes, where the rest of it still says where that
    is: a master key's length, then a V1 body's length after the state, and a body that starts with the
    ledger's own id. None when it cannot be told (a version-0 header has zeros there: no body)."""
    if len(head) < _LAC_BODY_AT or _KEY_LENGTH.parse(head[KEY_LENGTH_OFFSET:KEY_OFFSET]) != MASTER_KEY_SIZE:
        return None
    n = _LAC_LENGTH.parse(head[_LAC_LENGTH_AT:_LAC_BODY_AT])
    if not LAC_BODY_MIN <= n <= HEADER_SIZE - _LAC_BODY_AT or len(head) < _LAC_BODY_AT + n:
        return None
    body = bytes(head[_LAC_BODY_AT:_LAC_BODY_AT + n])
    return body if _LAC_LEDGER.parse(body) == ledger_id else None


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
        return None if not b or len(b) < LAC_BODY_MIN else _LAC.parse(b[_LAC_AT:])

    @property
    def explicit_lac_ledger(self) -> int | None:
        """The ledger id the explicit-LAC body starts with (LAC_BODY), None without a whole one."""
        b = self.explicit_lac_body
        return None if not b or len(b) < LAC_BODY_MIN else _LAC_LEDGER.parse(b)


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


# A location is the entry log id in the high 32 bits and the position of the entry bytes (past their
# size prefix) in the low 32 bits.
POSITION_BITS = 32
POSITION_MASK = (1 << POSITION_BITS) - 1


def pack_location(log_id: int, position: int) -> int:
    if not (0 <= log_id <= POSITION_MASK and 0 <= position <= POSITION_MASK):
        raise FormatError("an entry log id and position that fit 32 bits each", f"({log_id}, {position})")
    return (log_id << POSITION_BITS) | position


def unpack_location(loc: int) -> tuple[int, int]:
    """(entry log id, position) of one location."""
    return loc >> POSITION_BITS, loc & POSITION_MASK


def join_locations(log_ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Locations (uint64) of arrays of entry log ids and positions."""
    logs = np.asarray(log_ids).astype(np.uint64)
    return (logs << np.uint64(POSITION_BITS)) | np.asarray(positions).astype(np.uint64, copy=False)


def location_logs(locations: np.ndarray) -> np.ndarray:
    """The entry log id (uint32) of each location of an array."""
    return (np.asarray(locations).astype(np.uint64, copy=False) >> np.uint64(POSITION_BITS)).astype(np.uint32)


def location_positions(locations: np.ndarray) -> np.ndarray:
    """The position (uint32) of each location of an array."""
    return (np.asarray(locations).astype(np.uint64, copy=False) & np.uint64(POSITION_MASK)).astype(np.uint32)


def slot_offset(entry_id: int) -> int:
    """File offset of an entry's location slot (pages are only an I/O unit: the slots are one flat array)."""
    return HEADER_SIZE + SLOT_SIZE * entry_id
