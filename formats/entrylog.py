"""Entry log ``.log`` files: the 1024-byte header, size-prefixed entries and the ledgers map.

specs/entrylog.md holds the byte tables. Source facts: bookie/DefaultEntryLogger.java,
EntryLogManagerBase.java, EntryLoggerAllocator.java.
"""
from __future__ import annotations

from dataclasses import dataclass

import construct as cs

from bkdisk.formats.codec import parse_struct
from bkdisk.formats.errors import FormatError

ENTRY_LOG_MAGIC = b"BKLO"
HEADER_SIZE = 1024
HEADER_V0, HEADER_V1 = 0, 1
MIN_SANE_ENTRY_SIZE = 16  # 8 ledger id + 8 entry id
INVALID_LEDGER_ID = (1 << 64) - 1  # -1 as a Java long: marks ledgers-map batches
LEDGERS_MAP_ENTRY_ID = -2
SCOPED_LEDGERS_MAP_ENTRY_ID = -3  # bkdisk's batch for scope != 0 ledgers (specs/bp35-errata.md)
LEDGERS_MAP_MAX_BATCH = 10000
MAX_ENTRY_SIZE = 1 << 30  # an entry log is at most 1 GiB (MAX_LOG_SIZE_LIMIT)
# DirectEntryLogger (O_DIRECT) pads every buffer flush with 0xF0 bytes up to a 4096-byte boundary.
DIRECT_ALIGNMENT = 4096
DIRECT_PADDING_BYTE = 0xF0

ENTRY_LOG_HEADER_FIELDS = cs.Struct(
    "magic" / cs.Const(ENTRY_LOG_MAGIC),
    "version" / cs.Int32sb,
    "ledgers_map_offset" / cs.Int64sb,  # 0 until the log is rolled
    "ledgers_count" / cs.Int32sb,
)
ENTRY_LOG_HEADER = cs.Padded(HEADER_SIZE, ENTRY_LOG_HEADER_FIELDS)

ENTRY_SIZE = cs.Int32sb  # prefix of every record; the location points 4 bytes past it

LEDGERS_MAP_BATCH = cs.Struct(
    "size" / cs.Int32sb,
    "ledger_id" / cs.Const(INVALID_LEDGER_ID, cs.Int64ub),
    "entry_id" / cs.Const(LEDGERS_MAP_ENTRY_ID, cs.Int64sb),
    "count" / cs.Int32sb,
    cs.Check(lambda ctx: 0 < ctx.count <= LEDGERS_MAP_MAX_BATCH and ctx.size == 20 + 16 * ctx.count),
    "ledgers" / cs.Array(cs.this.count, cs.Struct("ledger_id" / cs.Int64ub, "size" / cs.Int64sb)),
)
SCOPED_LEDGERS_MAP_BATCH = cs.Struct(
    "size" / cs.Int32sb,
    "ledger_id" / cs.Const(INVALID_LEDGER_ID, cs.Int64ub),
    "entry_id" / cs.Const(SCOPED_LEDGERS_MAP_ENTRY_ID, cs.Int64sb),
    "count" / cs.Int32sb,
    cs.Check(lambda ctx: 0 < ctx.count <= LEDGERS_MAP_MAX_BATCH and ctx.size == 20 + 24 * ctx.count),
    "ledgers" / cs.Array(cs.this.count, cs.Struct("scope_id" / cs.Int64ub, "ledger_id" / cs.Int64ub,
                                                  "size" / cs.Int64sb)),
)


@dataclass(frozen=True)
class EntryLogHeader:
    version: int
    ledgers_map_offset: int
    ledgers_count: int


def parse_header(data: bytes | memoryview, *, path: str | None = None) -> EntryLogHeader:
    if len(data) < HEADER_SIZE:
        raise FormatError(f"a {HEADER_SIZE}-byte entry log header", f"{len(data)} bytes", path=path, offset=0)
    c = parse_struct(ENTRY_LOG_HEADER, data[:HEADER_SIZE], what="an entry log header starting 'BKLO'", path=path)
    if c.version not in (HEADER_V0, HEADER_V1):
        raise FormatError("entry log header version 0 or 1", str(c.version), path=path, offset=4)
    return EntryLogHeader(c.version, c.ledgers_map_offset, c.ledgers_count)


def build_header(version: int = HEADER_V1, ledgers_map_offset: int = 0, ledgers_count: int = 0) -> bytes:
    return ENTRY_LOG_HEADER.build(dict(magic=ENTRY_LOG_MAGIC, version=version,
                                       ledgers_map_offset=ledgers_map_offset, ledgers_count=ledgers_count))


def build_ledgers_map(sizes: dict[tuple[int, int], int]) -> bytes:
    """The ledgers map for {(scope, ledger): bytes}: scope-0 batches first, then scoped batches.

    ``bytes`` per ledger is the sum of (entry size + 4) over its entries in the log.
    """
    plain = [(l, n) for (s, l), n in sizes.items() if s == 0]
    scoped = [(s, l, n) for (s, l), n in sizes.items() if s != 0]
    out = bytearray()
    for i in range(0, len(plain), LEDGERS_MAP_MAX_BATCH):
        part = plain[i:i + LEDGERS_MAP_MAX_BATCH]
        out += LEDGERS_MAP_BATCH.build(dict(size=20 + 16 * len(part), count=len(part),
                                            ledgers=[dict(ledger_id=l, size=n) for l, n in part]))
    for i in range(0, len(scoped), LEDGERS_MAP_MAX_BATCH):
        triples = [dict(scope_id=s, ledger_id=l, size=n) for s, l, n in scoped[i:i + LEDGERS_MAP_MAX_BATCH]]
        out += SCOPED_LEDGERS_MAP_BATCH.build(dict(size=20 + 24 * len(triples), count=len(triples), ledgers=triples))
    return bytes(out)


def parse_ledgers_map(data: bytes | memoryview, start: int, *, path: str | None = None) -> dict[tuple[int, int], int]:
    """Read the batches from ``start`` to the end of ``data`` (a whole file's bytes).

    Stops at a size <= 0 like BookKeeper; any other malformation raises FormatError.
    """
    out: dict[tuple[int, int], int] = {}
    pos = start
    n = len(data)
    while pos + 4 <= n:
        size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        if size <= 0:
            break
        if pos + 4 + size > n:
            raise FormatError(f"a ledgers-map batch of {size} bytes", f"{n - pos - 4} bytes left",
                              path=path, offset=pos)
        if size < 20:
            raise FormatError("a ledgers-map batch of at least 20 bytes", f"size {size}", path=path, offset=pos)
        eid = int.from_bytes(data[pos + 12:pos + 20], "big", signed=True)
        decl = SCOPED_LEDGERS_MAP_BATCH if eid == SCOPED_LEDGERS_MAP_ENTRY_ID else LEDGERS_MAP_BATCH
        c = parse_struct(decl, data[pos:pos + 4 + size], what="a ledgers-map batch (-1, -2|-3, count, pairs)",
                         path=path, offset=pos)
        for it in c.ledgers:
            key = (getattr(it, "scope_id", 0), it.ledger_id)
            out[key] = out.get(key, 0) + it.size
        pos += 4 + size
    return out


# --- sizes the scanners read, derived from the declarations above -----------------------------
SIZE_PREFIX_SIZE = ENTRY_SIZE.sizeof()
LEDGERS_MAP_BATCH_HEAD_SIZE = cs.Struct(*LEDGERS_MAP_BATCH.subcons[:4]).sizeof()   # size, -1, -2|-3, count
LEDGERS_MAP_PAIR_SIZE = LEDGERS_MAP_BATCH.ledgers.subcon.subcon.sizeof()                 # ledger id, bytes
SCOPED_LEDGERS_MAP_TRIPLE_SIZE = SCOPED_LEDGERS_MAP_BATCH.ledgers.subcon.subcon.sizeof()  # scope, ledger, bytes
