"""Entry digests (CRC32, CRC32C, HMAC-SHA1, DUMMY) and the keys BookKeeper derives from a password."""
from __future__ import annotations

import enum
import hashlib
import hmac
import zlib

from bkdisk.formats.errors import FormatError, shown


class DigestType(enum.IntEnum):
    """Digest types with the numbers of BookKeeper's LedgerMetadataFormat.DigestType.

    The same numbers are the low nibble of an entry-format-V2 flags byte (specs/entry.md).
    """

    CRC32 = 1
    HMAC = 2
    CRC32C = 3
    DUMMY = 4

    @property
    def length(self) -> int:
        return DIGEST_LENGTH[self]

    @classmethod
    def parse(cls, name: str | int) -> DigestType:
        """Accept the proto name, the client API name (``MAC``) or the number."""
        if isinstance(name, int):
            try:
                return cls(name)
            except ValueError:
                raise FormatError("a digest type code 1..4", str(name)) from None
        key = name.strip().upper()
        if key == "MAC":
            key = "HMAC"
        try:
            return cls[key]
        except KeyError:
            raise FormatError("a digest type CRC32|CRC32C|HMAC|MAC|DUMMY", shown(name)) from None


DIGEST_LENGTH = {DigestType.CRC32: 8, DigestType.HMAC: 20, DigestType.CRC32C: 4, DigestType.DUMMY: 0}


MASTER_KEY_SIZE = 20   # a SHA-1


def master_key(password: bytes) -> bytes:
    """The ledger master key a bookie stores: SHA-1(b"ledger" + password)."""
    return hashlib.sha1(b"ledger" + password).digest()


def mac_key(password: bytes) -> bytes:
    """The HMAC key a client derives from the ledger password: SHA-1(b"mac" + password)."""
    return hashlib.sha1(b"mac" + password).digest()


def compute_digest(dtype: DigestType, covered: bytes | memoryview, payload: bytes | memoryview = b"",
                   password: bytes | None = None) -> bytes:
    """The stored digest over ``covered`` then ``payload`` (the entry header, then the payload).

    CRC32 is stored as a big-endian long whose upper half is zero; CRC32C as a big-endian int.
    HMAC needs the ledger password.
    """
    if dtype == DigestType.CRC32:
        return zlib.crc32(payload, zlib.crc32(covered)).to_bytes(8, "big")
    if dtype == DigestType.CRC32C:
        # Imported here: at import the package loads its command line (argparse), which a check never uses.
        import crc32c
        return crc32c.crc32c(payload, crc32c.crc32c(covered)).to_bytes(4, "big")
    if dtype == DigestType.HMAC:
        if password is None:
            raise FormatError("a ledger password to compute an HMAC digest", "none")
        mac = hmac.new(mac_key(password), covered, hashlib.sha1)
        mac.update(payload)
        return mac.digest()
    if dtype == DigestType.DUMMY:
        return b""
    raise FormatError("a digest type", shown(dtype))
