"""A BlockBasedTable SST file: footer, metaindex, properties, index, data blocks and range deletions."""
from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.codec import parse_struct
from bkdisk.formats.errors import FormatError, shown
from bkdisk.rocksdbfiles.block import Block, ChecksumMismatch, Handle, parse_block, read_block, read_handle, seek
from bkdisk.rocksdbfiles.kernels import decode_entries

_CACHE_BLOCKS = 32     # decoded blocks kept per table (a 64 KiB block decodes in ~0.1 ms)


@dataclass(frozen=True)
class Footer:
    checksum_type: int
    format_version: int
    metaindex: Handle
    index: Handle | None          # None for format_version >= 6 (then it is in the metaindex)
    base_context_checksum: int


@dataclass(frozen=True)
class Record:
    """One internal entry of a table or the memtable."""
    user_key: bytes
    sequence: int
    vtype: int
    value: bytes


def parse_footer(data: bytes | memoryview, *, path: str | None = None) -> Footer:
    """The footer in the last FOOTER_SIZE bytes, its magic, version and (v6+) own checksum checked."""
    n = len(data)
    if n < rf.FOOTER_SIZE:
        raise FormatError(f"an SST file of at least its {rf.FOOTER_SIZE}-byte footer", f"{n} bytes", path=path,
                          offset=0)
    at = n - rf.FOOTER_SIZE
    raw = bytes(data[at:])
    f = parse_struct(rf.FOOTER, raw, what="an SST footer", path=path, offset=at)
    magic_at = n - rf.FOOTER.subcons[-1].sizeof()
    if f.magic == rf.LEGACY_BLOCK_BASED_TABLE_MAGIC:
        raise FormatError("a block-based table of format_version >= 2", "the legacy (version 0/1) magic",
                          path=path, offset=magic_at)
    if f.magic != rf.BLOCK_BASED_TABLE_MAGIC:
        raise FormatError(f"the block-based table magic {rf.BLOCK_BASED_TABLE_MAGIC:#018x}", f"{f.magic:#018x}",
                          path=path, offset=magic_at)
    if f.format_version not in rf.FORMAT_VERSIONS:
        raise FormatError(f"format_version {rf.FORMAT_VERSIONS.start}..{rf.FORMAT_VERSIONS.stop - 1}",
                          str(f.format_version), path=path, offset=at + rf.FOOTER_FORMAT_VERSION_AT)
    if f.checksum_type not in rf.ChecksumType._value2member_map_:
        raise FormatError("a checksum type 0..4", str(f.checksum_type), path=path, offset=at)
    if f.format_version >= 6:
        p2 = parse_struct(rf.FOOTER_V6_PART2, f.part2, what="a format_version 6 footer", path=path, offset=at + 1)
        if p2.reserved != 0 or p2.base_context_checksum == 0:
            raise FormatError("a v6 footer with zero reserved bytes and a base context checksum",
                              shown(f.part2[8:]), path=path, offset=at + 1)
        if f.checksum_type != rf.ChecksumType.NONE:
            ck_end = rf.FOOTER_CHECKSUM_AT + rf.FOOTER_CHECKSUM_SIZE
            zeroed = raw[:rf.FOOTER_CHECKSUM_AT] + bytes(rf.FOOTER_CHECKSUM_SIZE) + raw[ck_end:]
            want = rf.stored_checksum(rf.builtin_checksum(f.checksum_type, zeroed)
                                      + rf.context_modifier(p2.base_context_checksum, at))
            if want != p2.footer_checksum:
                raise ChecksumMismatch(path, at, rf.FOOTER_SIZE, p2.footer_checksum, want)
        meta_end = at - rf.BLOCK_TRAILER_SIZE
        if p2.metaindex_size > meta_end:
            raise FormatError("a metaindex inside the file", f"{p2.metaindex_size} bytes", path=path, offset=at + 13)
        return Footer(f.checksum_type, f.format_version, Handle(meta_end - p2.metaindex_size, p2.metaindex_size),
                      None, p2.base_context_checksum)
    meta, p = read_handle(f.part2, 0, len(f.part2), path=path, base=at + 1)
    index, _ = read_handle(f.part2, p, len(f.part2), path=path, base=at + 1)
    return Footer(f.checksum_type, f.format_version, meta, index, 0)


def user_key_of(ikey: bytes) -> bytes:
    return ikey[:-rf.INTERNAL_KEY_FOOTER_SIZE]


@dataclass
class SstFile:
    """An open SST file over a read-only byte view (an mmap); blocks are decoded on demand."""
    path: str
    data: bytes | memoryview
    footer: Footer = field(init=False)
    properties: dict[bytes, bytes] = field(init=False)
    metaindex: dict[bytes, Handle] = field(init=False)
    index_keys: list[bytes] = field(init=False)     # user keys of the index separators, ascending
    index_handles: list[Handle] = field(init=False)

    def __post_init__(self) -> None:
        self.footer = parse_footer(self.data, path=self.path)
        self._cache: OrderedDict[int, Block] = OrderedDict()
        meta = self._block(self.footer.metaindex, "the metaindex block")
        self.metaindex = {}
        for key, value, at in meta.entries():
            assert isinstance(value, bytes), "a block read without value_delta holds value bytes"
            self.metaindex[key], _ = read_handle(value, 0, len(value), path=self.path, base=meta.base + at)
        self.properties = {}
        if rf.PROPERTIES_BLOCK in self.metaindex:
            self.properties = {k: v for k, v, _ in self._block(self.metaindex[rf.PROPERTIES_BLOCK],
                                                                 "the properties block").entries()
                               if isinstance(v, bytes)}   # (a block read without value_delta: every value)
        index_handle = self.footer.index or self.metaindex.get(rf.INDEX_BLOCK)
        if index_handle is None:
            raise FormatError("a metaindex naming the index block", "no 'rocksdb.index' entry", path=self.path,
                              offset=self.footer.metaindex.offset)
        idx_type = self.properties.get(rf.PROP_INDEX_TYPE)
        if idx_type is not None and (len(idx_type) != 4 or rf.FIXED_PROPERTY.parse(idx_type)
                                     != rf.INDEX_TYPE_BINARY_SEARCH):
            raise FormatError("a binary-search index (index type 0)", shown(idx_type), path=self.path,
                              offset=index_handle.offset)
        self.index_is_user_key = self.properties.get(rf.PROP_INDEX_KEY_IS_USER_KEY, b"\x00") not in (b"\x00", b"")
        delta = self.properties.get(rf.PROP_INDEX_VALUE_DELTA, b"\x00") not in (b"\x00", b"")
        index = self._block(index_handle, "the index block", value_delta=delta, cache=False)
        self.index_keys, self.index_handles = [], []
        for key, value, at in index.entries():
            # (with value_delta the block gives each handle; else its encoded bytes)
            handle = value if isinstance(value, Handle) else \
                read_handle(value, 0, len(value), path=self.path, base=index.base + at)[0]
            self.index_keys.append(key if self.index_is_user_key else self._user_key(key, index.base + at))
            self.index_handles.append(handle)
        if any(b < a for a, b in zip(self.index_keys, self.index_keys[1:])):
            raise FormatError("index keys in ascending order", "a key below the one before it", path=self.path,
                              offset=index_handle.offset)

    def _user_key(self, ikey: bytes, offset: int) -> bytes:
        if len(ikey) < rf.INTERNAL_KEY_FOOTER_SIZE:
            raise FormatError("an internal key of at least 8 bytes", f"{len(ikey)} bytes", path=self.path,
                              offset=offset)
        return user_key_of(ikey)

    def verify_meta_blocks(self) -> list[FormatError]:
        """Each block the metaindex names (a filter among them: never read otherwise), its checksum
        verified and its contents decompressed, as RocksDB's table verification reads them."""
        failed = []
        for name, h in self.metaindex.items():
            try:
                read_block(self.data, h, self.footer.checksum_type, path=self.path,
                           what=f"the {name.decode('latin-1')!r} block",
                           base_context_checksum=self.footer.base_context_checksum)
            except FormatError as e:
                failed.append(e)
        return failed

    def _block(self, h: Handle, what: str, value_delta: bool = False, cache: bool = True) -> Block:
        b = self._cache.get(h.offset) if cache else None
        if b is None:
            raw = read_block(self.data, h, self.footer.checksum_type, path=self.path, what=what,
                             base_context_checksum=self.footer.base_context_checksum)
            b = parse_block(raw, value_delta=value_delta, path=self.path, base=h.offset)
            if cache:
                self._cache[h.offset] = b
                if len(self._cache) > _CACHE_BLOCKS:
                    self._cache.popitem(last=False)
        return b

    @property
    def format_version(self) -> int:
        return self.footer.format_version

    @property
    def compression(self) -> str:
        return self.properties.get(rf.PROP_COMPRESSION, b"").decode("ascii", "replace")

    def num_entries(self) -> int | None:
        v = self.properties.get(rf.PROP_NUM_ENTRIES)
        return None if v is None else rf.read_varint(v, 0, len(v), path=self.path)[0]

    def data_block(self, i: int) -> Block:
        return self._block(self.index_handles[i], f"data block {i}")

    def _records(self, block: Block, entries) -> Iterator[Record]:
        for ikey, value, at in entries:
            if len(ikey) < rf.INTERNAL_KEY_FOOTER_SIZE:
                raise FormatError("an internal key of at least 8 bytes", f"{len(ikey)} bytes", path=self.path,
                                  offset=block.base + at)
            yield Record(*rf.unpack_internal_key(ikey), value)

    def records(self) -> Iterator[Record]:
        """Every entry in key order (user key ascending, newest first within a key)."""
        for i in range(len(self.index_handles)):
            b = self.data_block(i)
            yield from self._records(b, b.entries())

    def get(self, user_key: bytes) -> Record | None:
        """The newest entry for ``user_key`` in this table (a deletion included), None if absent."""
        i = bisect_left(self.index_keys, user_key)
        while i < len(self.index_handles):
            b = self.data_block(i)
            for r in self._records(b, seek(b, user_key + bytes(rf.INTERNAL_KEY_FOOTER_SIZE), user_key_of)):
                return r if r.user_key == user_key else None
            i += 1       # only when every key of block i is below user_key: its separator was not tight
        return None

    def range_deletions(self) -> list[tuple[bytes, bytes, int]]:
        """(begin, end, sequence) of each range tombstone: keys in [begin, end) older than it are deleted."""
        h = self.metaindex.get(rf.RANGE_DEL_BLOCK)
        if h is None:
            return []
        b = self._block(h, "the range deletion block", cache=False)
        return [(r.user_key, r.value, r.sequence) for r in self._records(b, b.entries())]

    def block_key_range(self, i: int) -> tuple[bytes | None, bytes]:
        """User keys bounding data block ``i`` from the index alone: (separator before it, its own)."""
        return (self.index_keys[i - 1] if i else None), self.index_keys[i]

    def block_columns(self, i: int) -> tuple[np.ndarray, ...]:
        """Data block ``i`` through the jitted decoder: (arena, key offsets, key lengths, value offsets,
        value lengths), offsets into the arena and into ``raw`` (the block's contents, returned last)."""
        b = self.data_block(i)
        raw = np.frombuffer(b.raw, np.uint8)
        arena, koff, klen, voff, vlen = decode_entries(raw, b.limit, path=self.path, base=b.base)
        return arena, koff, klen, voff, vlen, raw

    def fixed_columns(self, i: int, key_size: int, value_size: int, padded: bool = False):
        """(user keys (n, key_size), packed sequence/type (n,), values (n, value_size), value lengths) of
        data block ``i`` when every internal key is ``key_size + 8`` bytes; a value of another length (a
        deletion's) reads as zeros; with ``padded`` a shorter one is kept, zeros after it."""
        arena, _koff, klen, voff, vlen, raw = self.block_columns(i)
        ik = key_size + rf.INTERNAL_KEY_FOOTER_SIZE
        if len(klen) and (klen != ik).any():
            at = int(np.flatnonzero(klen != ik)[0])
            raise FormatError(f"internal keys of {ik} bytes", f"{int(klen[at])} bytes (entry {at})", path=self.path,
                              offset=self.index_handles[i].offset)
        keys = arena.reshape(-1, ik)
        values = np.zeros((len(klen), value_size), np.uint8)
        rows = np.flatnonzero(vlen == value_size)
        if len(rows):
            values[rows] = raw[voff[rows, None] + np.arange(value_size)]
        if padded:
            for r in np.flatnonzero(vlen < value_size).tolist():
                values[r, :vlen[r]] = raw[voff[r]:voff[r] + vlen[r]]
        return keys[:, :key_size], rf.footer_column(keys), values, vlen
