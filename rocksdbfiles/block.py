"""SST blocks: reading one through its trailer (checksum, compression) and walking its entries.

A block is entries (shared-prefix keys), then the restart offsets and their count; an entry at a
restart point shares nothing with the key before it, so a seek bisects the restart points and scans
at most one restart interval.
"""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.errors import FormatError
from bkdisk.rocksdbfiles.codec import decompress


@dataclass(frozen=True)
class Handle:
    offset: int
    size: int

    @property
    def end(self) -> int:
        """First byte after the block's trailer."""
        return self.offset + self.size + rf.BLOCK_TRAILER_SIZE


def read_handle(buf: bytes | memoryview, pos: int, limit: int, *, path: str | None = None,
                base: int = 0) -> tuple[Handle, int]:
    off, p = rf.read_varint(buf, pos, limit, what="a block handle offset", path=path, base=base)
    size, p = rf.read_varint(buf, p, limit, what="a block handle size", path=path, base=base)
    return Handle(off, size), p


class ChecksumMismatch(FormatError):
    """A block whose stored checksum differs from the one computed over its bytes."""

    def __init__(self, path: str | None, offset: int, size: int, stored: int, computed: int):
        self.block_offset, self.block_size, self.stored, self.computed = offset, size, stored, computed
        super().__init__(f"block checksum {stored:#010x} (block of {size} bytes)", f"{computed:#010x}",
                         path=path, offset=offset)

    def __reduce__(self):
        return (ChecksumMismatch, (self.path, self.block_offset, self.block_size, self.stored, self.computed))


def read_block(data: bytes | memoryview, h: Handle, checksum_type: int, *, path: str | None = None,
               base_context_checksum: int = 0, what: str = "a block", verify: bool = True) -> bytes:
    """The uncompressed contents of the block at ``h``, its trailer checksum verified first."""
    if h.size > len(data) or h.offset > len(data) - h.size - rf.BLOCK_TRAILER_SIZE:
        raise FormatError(f"{what} of {h.size} bytes plus a {rf.BLOCK_TRAILER_SIZE}-byte trailer inside the file",
                          f"a file of {len(data)} bytes", path=path, offset=h.offset)
    body = memoryview(data)[h.offset:h.offset + h.size + 1]   # contents + compression type byte, not copied
    ctype, checksum = rf.unpack_trailer(data, h.offset + h.size)
    if verify and checksum_type != rf.ChecksumType.NONE:
        computed = rf.builtin_checksum(checksum_type, body)
        stored = rf.stored_checksum(checksum - rf.context_modifier(base_context_checksum, h.offset))
        if stored != computed:
            raise ChecksumMismatch(path, h.offset, h.size, stored, computed)
    return decompress(ctype, body[:-1], path=path, offset=h.offset, what=what)


@dataclass
class Block:
    """A decoded block: its bytes, where the entries end and the restart offsets."""
    raw: bytes
    limit: int                 # entries live in raw[:limit]
    restarts: list[int]
    value_delta: bool          # index blocks of format_version >= 4: handles delta-encoded, no value length
    path: str | None = None
    base: int = 0              # file offset of the block, for messages (offsets inside are of its contents)

    def entries(self, start: int = 0) -> Iterator[tuple[bytes, bytes | Handle, int]]:
        """(key, value, entry offset) from ``start`` (a restart offset) to the end of the block.

        With ``value_delta`` the value is a Handle; otherwise the value bytes.
        """
        raw, limit, p, key, prev = self.raw, self.limit, start, b"", None
        path, base = self.path, self.base
        while p < limit:
            at = p
            shared, p = rf.read_varint(raw, p, limit, rf.VARINT32_MAX_BYTES, what="an entry's shared length",
                                       path=path, base=base)
            non_shared, p = rf.read_varint(raw, p, limit, rf.VARINT32_MAX_BYTES,
                                           what="an entry's key length", path=path, base=base)
            if not self.value_delta:
                vlen, p = rf.read_varint(raw, p, limit, rf.VARINT32_MAX_BYTES, what="an entry's value length",
                                         path=path, base=base)
            if shared > len(key) or non_shared > limit - p:
                raise FormatError(f"a key sharing at most {len(key)} bytes and fitting the block",
                                  f"shared {shared}, own {non_shared} with {limit - p} bytes left",
                                  path=path, offset=base + at)
            key = key[:shared] + raw[p:p + non_shared]
            p += non_shared
            if self.value_delta:
                if shared == 0 or prev is None:
                    prev, p = read_handle(raw, p, limit, path=path, base=base)
                else:
                    delta, p = rf.read_varint(raw, p, limit, what="a delta-encoded block size", path=path, base=base)
                    delta = rf.unzigzag(delta)
                    prev = Handle(prev.end, prev.size + delta)
                yield key, prev, at
            else:
                if vlen > limit - p:
                    raise FormatError(f"a value of {vlen} bytes inside the block", f"{limit - p} bytes left",
                                      path=path, offset=base + at)
                yield key, raw[p:p + vlen], at
                p += vlen

    def restart_key(self, i: int) -> bytes:
        """The whole key at restart point ``i`` (it shares nothing with the key before it)."""
        for key, _v, _at in self.entries(self.restarts[i]):
            return key
        raise FormatError("an entry at a restart point", "the end of the block", path=self.path,
                          offset=self.base + self.restarts[i])


def parse_block(raw: bytes, *, value_delta: bool = False, path: str | None = None, base: int = 0) -> Block:
    """Split a block's contents into entries and restart array (with a data-block hash index skipped)."""
    n = len(raw)
    foot = rf.BLOCK_FOOTER.sizeof()
    if n < foot:
        raise FormatError("a block of at least its 4-byte restart count", f"{n} bytes", path=path, offset=base)
    packed = rf.BLOCK_FOOTER.parse(raw[n - foot:])
    end = n - foot
    if packed & (rf.UNIFORM_KEYS_BIT | rf.SEPARATED_KV_BIT) or (packed & ~rf.HASH_INDEX_BIT) > rf.MAX_NUM_RESTARTS:
        raise FormatError("a block footer with no feature bits beyond the hash index", f"{packed:#010x}",
                          path=path, offset=base + end)
    if packed & rf.HASH_INDEX_BIT:
        hb = rf.HASH_BUCKET_COUNT.sizeof()
        buckets = rf.HASH_BUCKET_COUNT.parse(raw[end - hb:end]) if end >= hb else -1
        if buckets < 0 or buckets > end - hb:
            raise FormatError("a hash index that fits the block", f"{buckets} buckets", path=path, offset=base + end)
        end -= hb + buckets
    count = packed & ~rf.HASH_INDEX_BIT
    rsize = rf.RESTART.sizeof()
    if count == 0 or count > end // rsize:
        raise FormatError(f"1..{end // rsize} restart points", str(count), path=path, offset=base + end)
    limit = end - count * rsize
    restarts = rf.unpack_restarts(raw, limit, count)
    if restarts[0] != 0 or any(b <= a for a, b in zip(restarts, restarts[1:])) or restarts[-1] > max(0, limit - 1):
        raise FormatError(f"ascending restart offsets from 0 below {limit}", str(restarts[:4])[:60],
                          path=path, offset=base + limit)
    return Block(raw, limit, restarts, value_delta, path, base)


def seek(block: Block, target: bytes, key_of=lambda k: k) -> Iterator[tuple[bytes, bytes | Handle, int]]:
    """Entries from the first whose ``key_of(key) >= key_of(target)`` (keys compared as ``key_of`` maps them)."""
    goal = key_of(target)
    # The last restart point whose key is < goal: the entry sought is in its interval or after it.
    i = max(0, bisect_left(_RestartKeys(block, key_of), goal) - 1)
    found = False
    for key, value, at in block.entries(block.restarts[i]):
        if found or key_of(key) >= goal:
            found = True
            yield key, value, at


class _RestartKeys:
    """The restart-point keys of a block, decoded lazily for bisect."""

    def __init__(self, block: Block, key_of):
        self.block, self.key_of = block, key_of

    def __len__(self) -> int:
        return len(self.block.restarts)

    def __getitem__(self, i: int):
        return self.key_of(self.block.restart_key(i))
