"""Client-packaged entries: format V1 (BookKeeper today) and format V2 (BP-35, 128-bit ids).

specs/entry.md holds the byte tables; specs/bp35-errata.md says how V2's ambiguities were resolved.
"""
from __future__ import annotations

from dataclasses import dataclass

import construct as cs

from bkdisk.formats.codec import build_struct, field_offsets, parse_struct
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType, compute_digest
from bkdisk.formats.errors import FormatError

# --- declarations -----------------------------------------------------------------------------
# V1, stored as is in journals, entry logs and DbLedgerStorage (DigestManager packaging).
ENTRY_V1_HEADER = cs.Struct(
    "ledger_id" / cs.Int64ub,
    "entry_id" / cs.Int64sb,
    "last_add_confirmed" / cs.Int64sb,
    "length" / cs.Int64sb,  # cumulative ledger length up to and including this payload
)
ENTRY_V1_HEADER_SIZE = 32

# V2: one flags byte (top bit set, version 2 in bits 4-6, digest type in bits 0-3), then the scope.
ENTRY_V2_HEADER = cs.Struct(
    "flags" / cs.Int8ub,
    "scope_id" / cs.Int64ub,
    "ledger_id" / cs.Int64ub,
    "entry_id" / cs.Int64sb,
    "last_add_confirmed" / cs.Int64sb,
    "length" / cs.Int64sb,
)
ENTRY_V2_HEADER_SIZE = 41

V2_MARKER = 0x80
V2_VERSION = 2
V2_FLAGS_BASE = V2_MARKER | (V2_VERSION << 4)  # 0xA0; low nibble = DigestType


def _v2_digest_length(ctx) -> int:
    code = ctx.flags & 0x0F
    if code not in DIGEST_LENGTH:
        raise cs.ExplicitError(f"V2 flags 0x{ctx.flags:02x} with an unknown digest type {code}")
    return DIGEST_LENGTH[DigestType(code)]


def _v2_flags_ok(obj, ctx) -> bool:
    return (obj & 0xF0) == V2_FLAGS_BASE and (obj & 0x0F) in DIGEST_LENGTH


ENTRY_V1 = cs.Struct(
    *ENTRY_V1_HEADER.subcons,
    "digest" / cs.Bytes(cs.this._params.digest_length),
    "payload" / cs.GreedyBytes,
)
ENTRY_V2 = cs.Struct(
    *ENTRY_V2_HEADER.subcons,
    cs.Check(lambda ctx: _v2_flags_ok(ctx.flags, ctx)),
    "digest" / cs.Bytes(_v2_digest_length),
    "payload" / cs.GreedyBytes,
)


@dataclass(frozen=True)
class Entry:
    """One stored entry, in either format."""

    format_version: int
    scope_id: int
    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    length: int
    digest: bytes
    payload: bytes
    digest_type: DigestType | None = None  # known from the bytes for V2 only

    @property
    def header_size(self) -> int:
        return ENTRY_V2_HEADER_SIZE if self.format_version == 2 else ENTRY_V1_HEADER_SIZE

    def header_bytes(self) -> bytes:
        """The bytes the digest covers before the payload (the whole header, flags and scope included)."""
        if self.format_version == 2:
            assert self.digest_type is not None, "a V2 entry names its digest type"
            return ENTRY_V2_HEADER.build(dict(flags=V2_FLAGS_BASE | int(self.digest_type), scope_id=self.scope_id,
                                              ledger_id=self.ledger_id, entry_id=self.entry_id,
                                              last_add_confirmed=self.last_add_confirmed, length=self.length))
        return ENTRY_V1_HEADER.build(dict(ledger_id=self.ledger_id, entry_id=self.entry_id,
                                          last_add_confirmed=self.last_add_confirmed, length=self.length))

    def to_bytes(self) -> bytes:
        return self.header_bytes() + self.digest + self.payload

    def digest_ok(self, digest_type: DigestType | None = None, password: bytes | None = None) -> bool:
        dt = self.digest_type if self.format_version == 2 else digest_type
        if dt is None:
            raise FormatError("a digest type to verify a V1 entry", "none")
        if len(self.digest) != dt.length:
            return False
        return compute_digest(dt, self.header_bytes(), self.payload, password) == self.digest


def is_v2(first_byte: int) -> bool:
    """V1 entries start with a non-negative ledger id, so their first byte is < 0x80."""
    return first_byte >= V2_MARKER


def parse_entry(data: bytes | memoryview, *, digest_type: DigestType | None = None, path: str | None = None,
                offset: int = 0) -> Entry:
    """Parse a stored entry. V2 names its own digest type; V1 needs ``digest_type`` from metadata."""
    if len(data) < 1:
        raise FormatError("an entry header", "0 bytes", path=path, offset=offset)
    if is_v2(data[0]):
        c = parse_struct(ENTRY_V2, data, what="an entry-format-V2 entry (flags 0xA1..0xA4, 41-byte header)",
                         path=path, offset=offset)
        return Entry(2, c.scope_id, c.ledger_id, c.entry_id, c.last_add_confirmed, c.length, c.digest, c.payload,
                     DigestType(c.flags & 0x0F))
    if digest_type is None:
        raise FormatError("a digest type to split a V1 entry's digest from its payload", "none",
                          path=path, offset=offset)
    c = parse_struct(ENTRY_V1, data, what=f"an entry-format-V1 entry with a {digest_type.length}-byte digest",
                     path=path, offset=offset, digest_length=digest_type.length)
    return Entry(1, 0, c.ledger_id, c.entry_id, c.last_add_confirmed, c.length, c.digest, c.payload, None)


def parse_entry_ids(data: bytes | memoryview, *, path: str | None = None, offset: int = 0) -> tuple[int, int, int, int]:
    """(format version, scope, ledger, entry) of a stored entry without knowing its digest type."""
    if len(data) >= 1 and is_v2(data[0]):
        h = parse_struct(ENTRY_V2_HEADER, data[:ENTRY_V2_HEADER_SIZE], what="a 41-byte entry-format-V2 header",
                         path=path, offset=offset)
        return 2, h.scope_id, h.ledger_id, h.entry_id
    h = parse_struct(ENTRY_V1_HEADER, data[:ENTRY_V1_HEADER_SIZE], what="a 32-byte entry header",
                     path=path, offset=offset)
    return 1, 0, h.ledger_id, h.entry_id


def package_entry(*, ledger_id: int, entry_id: int, last_add_confirmed: int, length: int, payload: bytes,
                  digest_type: DigestType, password: bytes | None = None, scope_id: int = 0,
                  format_version: int | None = None) -> Entry:
    """Build an entry the way a client packages it for sending. Scoped ledgers need format V2."""
    version = format_version or (2 if scope_id else 1)
    if version == 1 and scope_id:
        raise FormatError("scope id 0 for an entry-format-V1 entry", f"scope id {scope_id}")
    if version not in (1, 2):
        raise FormatError("entry format version 1 or 2", str(version))
    if version == 1 and ledger_id >= 1 << 63:
        # Its first byte would have the top bit set and read back as V2 (specs/bp35-errata.md).
        raise FormatError("a V1 ledger id below 2^63", str(ledger_id))
    e = Entry(version, scope_id, ledger_id, entry_id, last_add_confirmed, length, b"", payload,
              digest_type if version == 2 else None)
    digest = compute_digest(digest_type, e.header_bytes(), payload, password)
    return Entry(version, scope_id, ledger_id, entry_id, last_add_confirmed, length, digest, payload,
                 digest_type if version == 2 else None)


def build_entry(e: Entry) -> bytes:
    """Serialize an Entry through its declaration (the inverse of parse_entry)."""
    if e.format_version == 2:
        assert e.digest_type is not None, "a V2 entry names its digest type"
        return build_struct(ENTRY_V2, dict(flags=V2_FLAGS_BASE | int(e.digest_type), scope_id=e.scope_id,
                                           ledger_id=e.ledger_id, entry_id=e.entry_id,
                                           last_add_confirmed=e.last_add_confirmed, length=e.length,
                                           digest=e.digest, payload=e.payload), what="V2 entry")
    return build_struct(ENTRY_V1, dict(ledger_id=e.ledger_id, entry_id=e.entry_id,
                                       last_add_confirmed=e.last_add_confirmed, length=e.length,
                                       digest=e.digest, payload=e.payload),
                        what="V1 entry", digest_length=len(e.digest))


# --- offsets the scanners read, derived from the declarations above ---------------------------
assert ENTRY_V1_HEADER.sizeof() == ENTRY_V1_HEADER_SIZE and ENTRY_V2_HEADER.sizeof() == ENTRY_V2_HEADER_SIZE
V1_LEDGER_AT, V1_ENTRY_AT, V1_LAC_AT, V1_LENGTH_AT = (field_offsets(ENTRY_V1_HEADER)[k] for k in (
    "ledger_id", "entry_id", "last_add_confirmed", "length"))
V2_FLAGS_AT, V2_SCOPE_AT, V2_LEDGER_AT = (field_offsets(ENTRY_V2_HEADER)[k] for k in ("flags", "scope_id",
                                                                                      "ledger_id"))
V2_PREFIX_SIZE = V2_LEDGER_AT   # flags + scope: a V2 header is this prefix, then the V1 header's fields
V2_DIGEST_MASK = 0x0F           # the flags' low nibble: the DigestType
V2_VERSION_MASK = 0xF0          # the flags' high nibble: V2_FLAGS_BASE
