"""Writers for tests and benchmarks only: log framing (WAL, MANIFEST), write batches and BlockBasedTable
SSTs, built from the declarations in formats/rocksdb.py.

A bookie's databases are never written by bkdisk. These build damaged or large inputs; tests prove
the data blocks they write are byte-identical to the ones RocksDB wrote in the golden corpora.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c
import lz4.block
import snappy

from bkdisk.formats import rocksdb as rf
from bkdisk.rocksdbfiles.sst import Record

T = rf.LogRecordType
# RocksDB keeps a compressed block only when it is at most this many bytes per KiB of input.
MAX_COMPRESSED_BYTES_PER_KB = 896


def varint(n: int) -> bytes:
    return rf.VARINT.build(n)


def length_prefixed(b: bytes) -> bytes:
    return varint(len(b)) + b


# --- log files ------------------------------------------------------------------------------
def frame_log(payloads: list[bytes], *, log_number: int | None = None) -> bytes:
    """Log file bytes holding ``payloads`` as records, fragmented across 32 KiB blocks as RocksDB does
    (recyclable headers carrying ``log_number`` when it is given)."""
    recyclable = log_number is not None
    hsize = rf.RECYCLABLE_LOG_HEADER_SIZE if recyclable else rf.LOG_HEADER_SIZE
    out = bytearray()
    for payload in payloads:
        left, first = memoryview(payload), True
        while True:
            room = rf.LOG_BLOCK_SIZE - len(out) % rf.LOG_BLOCK_SIZE
            if room < hsize:
                out += bytes(room)          # the block's trailer
                room = rf.LOG_BLOCK_SIZE
            n = min(len(left), room - hsize)
            last = n == len(left)
            t = T.FULL if first and last else T.FIRST if first else T.LAST if last else T.MIDDLE
            if recyclable:
                t = T(t + (T.RECYCLABLE_FULL - T.FULL))
            out += _fragment(t, bytes(left[:n]), log_number)
            left, first = left[n:], False
            if last:
                break
    return bytes(out)


def _fragment(t: int, body: bytes, log_number: int | None) -> bytes:
    number_field = rf.RECYCLABLE_LOG_HEADER.subcons[-1]
    extra = b"" if log_number is None else number_field.build(rf.recycled_log_number(log_number))
    crc = rf.mask_crc(crc32c.crc32c(bytes([t]) + extra + body))
    return rf.LOG_HEADER.build(dict(checksum=crc, length=len(body), type=t)) + extra + body


def write_batch(sequence: int, ops: list[tuple[int, bytes, bytes]]) -> bytes:
    """A write batch of default-column-family operations (value type, key, value or range end)."""
    body = bytearray(rf.WRITE_BATCH_HEADER.build(dict(sequence=sequence, count=len(ops))))
    for vtype, key, value in ops:
        body.append(vtype)
        body += length_prefixed(key)
        if vtype in (rf.ValueType.VALUE, rf.ValueType.RANGE_DELETION, rf.ValueType.MERGE):
            body += length_prefixed(value)
    return bytes(body)


# --- SST files ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableOptions:
    compression: int = rf.Compression.LZ4
    checksum_type: int = rf.ChecksumType.XXHASH
    format_version: int = 2
    block_size: int = 65536
    restart_interval: int = 16
    index_restart_interval: int = 1
    base_context_checksum: int = 0x5EED1234     # used only by format_version >= 6


def build_block(entries: list[tuple[bytes, bytes]], restart_interval: int, *,
                value_delta_handles: list[tuple[int, int]] | None = None) -> bytes:
    """Block contents: shared-prefix entries, restart offsets, their count. With ``value_delta_handles``
    (index blocks of format_version >= 4) the values are handles, delta-encoded inside a restart interval."""
    out, restarts, prev = bytearray(), [], b""
    for i, (key, value) in enumerate(entries):
        if i % restart_interval == 0:
            restarts.append(len(out))
            shared = 0
        else:
            shared = 0
            limit = min(len(prev), len(key))
            while shared < limit and prev[shared] == key[shared]:
                shared += 1
        if value_delta_handles is not None:
            off, size = value_delta_handles[i]
            if shared == 0:
                value = varint(off) + varint(size)
            else:
                value = rf.VARSIGNED.build(size - value_delta_handles[i - 1][1])
            out += varint(shared) + varint(len(key) - shared) + key[shared:] + value
        else:
            out += varint(shared) + varint(len(key) - shared) + varint(len(value)) + key[shared:] + value
        prev = key
    restarts = restarts or [0]
    for r in restarts:
        out += rf.RESTART.build(r)
    out += rf.BLOCK_FOOTER.build(len(restarts))
    return bytes(out)


def compress(ctype: int, raw: bytes) -> tuple[int, bytes]:
    """(type actually stored, bytes): a block that does not shrink enough is stored uncompressed."""
    if ctype == rf.Compression.NONE:
        return ctype, raw
    if ctype == rf.Compression.SNAPPY:
        c = snappy.compress(raw)
    elif ctype in (rf.Compression.LZ4, rf.Compression.LZ4HC):
        c = varint(len(raw)) + lz4.block.compress(raw, store_size=False)
    else:
        raise ValueError(f"the writer does not compress with type {ctype}")
    if len(c) * 1024 > len(raw) * MAX_COMPRESSED_BYTES_PER_KB:
        return rf.Compression.NONE, raw
    return ctype, c


class _File:
    def __init__(self, opts: TableOptions):
        self.buf, self.opts = bytearray(), opts

    def block(self, raw: bytes, ctype: int) -> tuple[int, int]:
        stored_type, body = compress(ctype, raw)
        off = len(self.buf)
        ck = rf.builtin_checksum(self.opts.checksum_type, body + bytes([stored_type]))
        if self.opts.format_version >= 6:
            ck = rf.stored_checksum(ck + rf.context_modifier(self.opts.base_context_checksum, off))
        self.buf += body + rf.BLOCK_TRAILER.build(dict(compression_type=stored_type, checksum=ck))
        return off, len(body)


def build_sst(records: list[Record], opts: TableOptions = TableOptions(),
              range_deletions: Sequence[tuple[bytes, bytes, int]] = ()) -> bytes:
    """An SST holding ``records`` (sorted by user key, newest first within a key); no filter block."""
    f = _File(opts)
    index: list[tuple[bytes, tuple[int, int]]] = []
    entries: list[tuple[bytes, bytes]] = []
    size = 0
    for r in records:
        ikey = rf.internal_key(r.user_key, r.sequence, r.vtype)
        entries.append((ikey, r.value))
        size += len(ikey) + len(r.value) + 3
        if size >= opts.block_size:
            index.append((ikey, f.block(build_block(entries, opts.restart_interval), opts.compression)))
            entries, size = [], 0
    if entries:
        index.append((entries[-1][0], f.block(build_block(entries, opts.restart_interval), opts.compression)))
    delta = opts.format_version >= 4
    idx_entries = [(k, b"" if delta else varint(o) + varint(s)) for k, (o, s) in index]
    index_raw = build_block(idx_entries, opts.index_restart_interval,
                            value_delta_handles=[h for _k, h in index] if delta else None)
    index_handle = f.block(index_raw, rf.Compression.NONE)
    meta: list[tuple[bytes, bytes]] = []
    if range_deletions:
        rd = [(rf.internal_key(b, s, rf.ValueType.RANGE_DELETION), e) for b, e, s in range_deletions]
        o, s = f.block(build_block(sorted(rd), 1), rf.Compression.NONE)
        meta.append((rf.RANGE_DEL_BLOCK, varint(o) + varint(s)))
    props = {rf.PROP_NUM_ENTRIES: varint(len(records)), rf.PROP_INDEX_KEY_IS_USER_KEY: varint(0),
             rf.PROP_INDEX_VALUE_DELTA: varint(int(delta)), rf.PROP_INDEX_TYPE: rf.FIXED_PROPERTY.build(0),
             rf.PROP_COMPARATOR: b"leveldb.BytewiseComparator",
             rf.PROP_COMPRESSION: {0: b"NoCompression", 1: b"Snappy", 4: b"LZ4", 5: b"LZ4HC"}[opts.compression]}
    o, s = f.block(build_block(sorted(props.items()), 1), rf.Compression.NONE)
    meta.append((rf.PROPERTIES_BLOCK, varint(o) + varint(s)))
    if opts.format_version >= 6:
        meta.append((rf.INDEX_BLOCK, varint(index_handle[0]) + varint(index_handle[1])))
    mo, ms = f.block(build_block(sorted(meta), 1), rf.Compression.NONE)
    f.buf += _footer(opts, (mo, ms), index_handle, len(f.buf))
    return bytes(f.buf)


def _footer(opts: TableOptions, meta: tuple[int, int], index: tuple[int, int], at: int) -> bytes:
    if opts.format_version < 6:
        part2 = varint(meta[0]) + varint(meta[1]) + varint(index[0]) + varint(index[1])
        part2 += bytes(2 * rf.BLOCK_HANDLE_MAX - len(part2))
        return rf.FOOTER.build(dict(checksum_type=opts.checksum_type, part2=part2,
                                    format_version=opts.format_version, magic=rf.BLOCK_BASED_TABLE_MAGIC))

    def build(ck: int) -> bytes:
        p2 = rf.FOOTER_V6_PART2.build(dict(footer_checksum=ck, base_context_checksum=opts.base_context_checksum,
                                           metaindex_size=meta[1], unchecked=bytes(16), reserved=0))
        return rf.FOOTER.build(dict(checksum_type=opts.checksum_type, part2=p2, format_version=opts.format_version,
                                    magic=rf.BLOCK_BASED_TABLE_MAGIC))
    ck = rf.builtin_checksum(opts.checksum_type, build(0)) + rf.context_modifier(opts.base_context_checksum, at)
    return build(rf.stored_checksum(ck))


# --- MANIFEST -------------------------------------------------------------------------------
def version_edit(*, log_number: int, next_file_number: int, last_sequence: int,
                 files: Sequence[tuple[int, int, int, bytes, bytes, int, int]] = (),
                 deleted: Sequence[tuple[int, int]] = ()) -> bytes:
    """One version edit: comparator, numbers, files added (level, number, size, smallest and largest
    internal keys, smallest and largest sequence) as kNewFile2, files deleted (level, number)."""
    G = rf.Tag
    out = bytearray(varint(G.COMPARATOR) + length_prefixed(b"leveldb.BytewiseComparator"))
    out += varint(G.LOG_NUMBER) + varint(log_number) + varint(G.NEXT_FILE_NUMBER) + varint(next_file_number)
    out += varint(G.LAST_SEQUENCE) + varint(last_sequence)
    for level, number in deleted:
        out += varint(G.DELETED_FILE) + varint(level) + varint(number)
    for level, number, size, smallest, largest, sseq, lseq in files:
        out += varint(G.NEW_FILE2) + varint(level) + varint(number) + varint(size)
        out += length_prefixed(smallest) + length_prefixed(largest) + varint(sseq) + varint(lseq)
    return bytes(out)


def write_db(path: str | os.PathLike, tables: list[tuple[int, list[Record]]], opts: TableOptions = TableOptions(),
             wal: Sequence[bytes] = (),
             range_deletions: dict[int, list[tuple[bytes, bytes, int]]] | None = None) -> None:
    """A database dir for tests and benchmarks: one SST per (level, records), CURRENT, MANIFEST-000001
    and the WAL ``wal`` batches in a log numbered after the tables; ``range_deletions`` maps a table's
    position to the (begin, end, sequence) tombstones it holds."""
    os.makedirs(path, exist_ok=True)
    files, last = [], 0
    for i, (level, records) in enumerate(tables):
        number = 10 + i
        data = build_sst(records, opts, (range_deletions or {}).get(i, []))
        with open(os.path.join(path, f"{number:06d}.sst"), "wb") as f:
            f.write(data)
        seqs = [r.sequence for r in records]
        first, final = records[0], records[-1]
        files.append((level, number, len(data), rf.internal_key(first.user_key, first.sequence, first.vtype),
                      rf.internal_key(final.user_key, final.sequence, final.vtype), min(seqs), max(seqs)))
        last = max(last, max(seqs))
    log_number = 10 + len(tables)
    edit = version_edit(log_number=log_number, next_file_number=log_number + 1, last_sequence=last, files=files)
    with open(os.path.join(path, "MANIFEST-000001"), "wb") as f:
        f.write(frame_log([edit]))
    with open(os.path.join(path, "CURRENT"), "wb") as f:
        f.write(b"MANIFEST-000001\n")
    with open(os.path.join(path, f"{log_number:06d}.log"), "wb") as f:
        f.write(frame_log(list(wal)))
