"""Block decompression for SST files (LZ4, Snappy, zlib, ZSTD) with the claimed size bounded first."""
from __future__ import annotations

import zlib

import cramjam
import lz4.block
import snappy

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.errors import FormatError

# No codec RocksDB uses expands input more than ~255x (LZ4); a claimed size beyond this is damage,
# refused before any buffer is allocated.
MAX_RATIO, SLACK = 256, 4096
MAX_BLOCK = 1 << 30


def _claimed_size(data: bytes | memoryview, what: str, path: str | None, offset: int) -> tuple[int, int]:
    n, p = rf.read_varint(data, 0, len(data), rf.VARINT32_MAX_BYTES, what=f"the uncompressed size of {what}",
                          path=path, base=offset)
    if n > min(MAX_BLOCK, MAX_RATIO * len(data) + SLACK):
        raise FormatError(f"an uncompressed size {what} can have", f"{n} bytes claimed by {len(data)} bytes",
                          path=path, offset=offset)
    return n, p


def decompress(ctype: int, data: bytes | memoryview, *, path: str | None = None, offset: int = 0,
               what: str = "a block") -> bytes:
    """The contents of a block stored with compression ``ctype`` (format_version >= 2 framing)."""
    if ctype == rf.Compression.NONE:
        return bytes(data)
    try:
        if ctype == rf.Compression.SNAPPY:
            n, _ = _claimed_size(data, what, path, offset)   # snappy's own header is the same varint
            out = snappy.uncompress(data)
        elif ctype in (rf.Compression.LZ4, rf.Compression.LZ4HC):
            n, p = _claimed_size(data, what, path, offset)
            out = lz4.block.decompress(data[p:], uncompressed_size=n) if n else b""
        elif ctype == rf.Compression.ZLIB:
            n, p = _claimed_size(data, what, path, offset)
            d = zlib.decompressobj(-15)
            out = d.decompress(data[p:], n)
        elif ctype == rf.Compression.ZSTD:
            n, p = _claimed_size(data, what, path, offset)
            out = bytes(cramjam.zstd.decompress(data[p:], output_len=n)) if n else b""
        else:
            name = rf.Compression(ctype).name if ctype in rf.Compression._value2member_map_ else str(ctype)
            raise FormatError("a block compression this reader supports (none, Snappy, LZ4, zlib, ZSTD)",
                              name, path=path, offset=offset)
    except FormatError:
        raise
    except Exception as e:   # each codec has its own error types; all mean the same: damaged bytes
        raise FormatError(f"{rf.Compression(ctype).name}-compressed {what}", f"undecodable bytes ({type(e).__name__})",
                          path=path, offset=offset) from None
    if len(out) != n:
        raise FormatError(f"{n} bytes after decompressing {what}", f"{len(out)} bytes", path=path, offset=offset)
    return bytes(out)
