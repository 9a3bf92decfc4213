"""The merged view of a database whose keys and values all have one size (DbLedgerStorage's ``locations``),
streamed in key order as column chunks: no Python object per key.

Sources are the WAL memtable, each level-0 table, and each deeper level (its tables in key order, one
at a time). Each source decodes a few data blocks at a time with the jitted kernels of kernels.py
(checksums and decompression by the codec packages, one call per block); a block the kernels do not
take (a hash index, damage) goes through the reference reader, which reports damage exactly as
``Database.fixed_items`` always has. The merge takes from every source the rows up to the smallest
last key any source holds, so memory is a chunk per source, whatever the database's size; pages of
the tables already read are dropped from the process's mappings as it goes.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from bkdisk.diskio.mapped import drop_pages
from bkdisk.formats import rocksdb as rf
from bkdisk.formats.errors import FormatError
from bkdisk.rocksdbfiles.block import read_block
from bkdisk.rocksdbfiles.kernels import block_limit, decode_fixed, live_rows, upper_bound
from bkdisk.rocksdbfiles.problem import Problem

if TYPE_CHECKING:
    from bkdisk.rocksdbfiles.db import Database
    from bkdisk.rocksdbfiles.sst import SstFile

V = rf.ValueType
CHUNK_ROWS = 1 << 16          # rows a source decodes before the merge takes them
MIN_ENTRY = 3                 # the three varints of an entry: no block holds more than len // 3 entries
_BAD_SIZE = 2                 # live_rows' mark of a live value of another size


class _Chunk:
    __slots__ = ("ikeys", "values", "vlen", "at")

    def __init__(self, ikeys: np.ndarray, values: np.ndarray, vlen: np.ndarray):
        self.ikeys, self.values, self.vlen, self.at = ikeys, values, vlen, 0


def _table_chunks(pos: int, t: SstFile, ks: int, vs: int, damaged: list, padded: bool
                  ) -> Iterator[_Chunk]:
    """Chunks of one table's rows in its order; a block that cannot be read is noted in ``damaged``
    as (table position, block, error) and left out."""
    ik = ks + rf.INTERNAL_KEY_FOOTER_SIZE
    cap = CHUNK_ROWS

    def fresh():
        return np.empty((cap, ik), np.uint8), np.empty((cap, vs), np.uint8), np.empty(cap, np.int64)

    keys, values, vlen = fresh()
    row = 0
    for i, h in enumerate(t.index_handles):
        try:
            raw = np.frombuffer(read_block(t.data, h, t.footer.checksum_type, path=t.path, what=f"data block {i}",
                                           base_context_checksum=t.footer.base_context_checksum), np.uint8)
        except FormatError as e:
            damaged.append((pos, i, e))
            continue
        limit = block_limit(raw)
        need = len(raw) // MIN_ENTRY + 1
        if row + need > cap:
            if row:         # the merge takes every row of a chunk before asking for the next: reused
                yield _Chunk(keys[:row], values[:row], vlen[:row])
                drop_pages(t.data, h.offset)
            if need > cap:
                cap = need
                keys, values, vlen = fresh()
            row = 0
        n, err, _bad = decode_fixed(raw, limit, keys, values, vlen, row, padded) if limit >= 0 else (0, 0, -1)
        if err < 0:
            row += n
            continue
        try:                  # the reference reader: the block's exact error, or its rows (a hash index)
            k, packed, v, vl = t.fixed_columns(i, ks, vs, padded)
        except FormatError as e:
            damaged.append((pos, i, e))
            continue
        m = len(vl)
        if row + m > cap:
            if row:
                yield _Chunk(keys[:row], values[:row], vlen[:row])
            if m > cap:
                cap = m
                keys, values, vlen = fresh()
            row = 0
        keys[row:row + m, :ks] = k
        keys[row:row + m, ks:] = packed.astype(rf.FOOTER_DTYPE).view(np.uint8).reshape(-1, rf.INTERNAL_KEY_FOOTER_SIZE)
        values[row:row + m], vlen[row:row + m] = v, vl
        row += m
    if row:
        yield _Chunk(keys[:row], values[:row], vlen[:row])
    drop_pages(t.data, len(t.data))


def _run_chunks(tables: list[tuple[int, SstFile]], ks: int, vs: int, damaged: list, padded: bool) -> Iterator[_Chunk]:
    for pos, t in tables:
        yield from _table_chunks(pos, t, ks, vs, damaged, padded)


def _memtable_chunk(db: Database, ks: int, vs: int, wrong: list, padded: bool) -> _Chunk | None:
    mem = []
    for r in db.memtable.values():
        if len(r.user_key) == ks:
            mem.append(r)
        else:
            wrong.append(_problem(db, f"WAL key {r.user_key.hex()}: {len(r.user_key)} bytes, not {ks}"))
    if not mem:
        return None
    mem.sort(key=lambda r: r.user_key)
    ikeys = np.frombuffer(b"".join(rf.internal_key(r.user_key, r.sequence, r.vtype) for r in mem),
                          np.uint8).reshape(-1, ks + rf.INTERNAL_KEY_FOOTER_SIZE)
    values = np.frombuffer(b"".join(r.value if len(r.value) == vs else r.value.ljust(vs, b"\0")
                                    if padded and len(r.value) < vs else bytes(vs) for r in mem),
                           np.uint8).reshape(-1, vs)
    return _Chunk(ikeys, values, np.array([len(r.value) for r in mem], np.int64))


def _problem(db: Database, detail: str, kind: str = "bad-key-size", key: bytes | None = None):
    return Problem(kind, db.path, None, detail, key=key)


def _first_key(t: SstFile) -> bytes | None:
    """The user key of a table's first entry (its first block read), None when it cannot be read."""
    try:
        for ikey, _v, _at in t.data_block(0).entries():
            return ikey[:-rf.INTERNAL_KEY_FOOTER_SIZE]
    except FormatError:
        return None
    return None


def _sources(db: Database, ks: int, vs: int, damaged: list, padded: bool) -> list[Iterator[_Chunk]]:
    """One chunk stream per level-0 table and per deeper level whose tables do not overlap."""
    by_level: dict[int, list[tuple[int, SstFile]]] = {}
    for pos, (level, _number, t) in enumerate(db.tables):
        by_level.setdefault(level, []).append((pos, t))
    out = []
    for level, tables in sorted(by_level.items()):
        if level > 0:
            tables = [pt for pt in tables if pt[1].index_keys]       # (a table without blocks adds nothing)
            maybe = [_first_key(t) for _p, t in tables]
            bounds = [b for b in maybe if b is not None]
            if len(bounds) == len(maybe):
                order = sorted(range(len(tables)), key=lambda i: bounds[i])
                tables = [tables[i] for i in order]
                firsts = [bounds[i] for i in order]
                # Disjoint, as a level's tables are: each one's last separator (at or above its last key)
                # below the next one's first key. Else (damage) each table is a source of its own.
                if all(a[1].index_keys[-1] < b for a, b in zip(tables, firsts[1:])):
                    out.append(_run_chunks(tables, ks, vs, damaged, padded))
                    continue
        out += [_run_chunks([pt], ks, vs, damaged, padded) for pt in tables]
    return out


def tombstone_fragments(tombs: list[tuple[bytes, bytes, int]], ks: int) -> tuple[np.ndarray, ...]:
    """Range tombstones as non-overlapping [begin, end) fragments of ``ks``-byte keys in key order, each
    with the largest sequence covering it: a key is deleted when its sequence is below its fragment's.
    ``end`` rows of an open fragment (to the last key) are flagged in ``open_end``."""
    cuts: set[bytes] = set()
    spans = []
    for b, e, s in tombs:
        cb, ce = rf.ceil_key(b, ks), rf.ceil_key(e, ks)
        if cb is None or (ce is not None and ce <= cb):
            continue
        spans.append((cb, ce, s))
        cuts.add(cb)
        if ce is not None:
            cuts.add(ce)
    points = sorted(cuts)
    index = {p: i for i, p in enumerate(points)}
    seq = np.zeros(len(points), np.uint64)          # of the fragment starting at each point
    for cb, ce, s in spans:
        lo, hi = index[cb], (index[ce] if ce is not None else len(points))
        np.maximum(seq[lo:hi], np.uint64(s), out=seq[lo:hi])
    keep = np.flatnonzero(seq > 0)
    begin = np.frombuffer(b"".join(points[i] for i in keep), np.uint8).reshape(-1, ks)
    nxt = [points[i + 1] if i + 1 < len(points) else None for i in keep.tolist()]
    end = np.frombuffer(b"".join(p or bytes(ks) for p in nxt), np.uint8).reshape(-1, ks)
    open_end = np.array([p is None for p in nxt], bool)
    return begin, end, open_end, seq[keep]


def iter_fixed(db: Database, key_size: int, value_size: int, padded: bool = False
               ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(user keys (n, key_size), values (n, value_size), value lengths) of every live key, in key order,
    a chunk at a time. With ``padded`` a value may be shorter than ``value_size`` (zeros after it).
    Problems (damaged blocks in table and block order, WAL keys of another size, live values of another
    size, or longer, in key order) are added to ``db.problems`` when the iteration ends."""
    ks, vs = key_size, value_size
    damaged: list = []
    wrong: list = []
    sizes: list = []
    sources = _sources(db, ks, vs, damaged, padded)
    mem = _memtable_chunk(db, ks, vs, wrong, padded)
    if mem is not None:
        sources.insert(0, iter([mem]))
    tb, te, topen, tseq = tombstone_fragments(db.range_tombstones, ks)
    current: list[_Chunk | None] = [None] * len(sources)
    last = np.zeros(ks, np.uint8)
    state = np.array([0, 0], np.int64)          # [a previous key exists, tombstone fragment cursor]
    open_sources: list[Iterator[_Chunk] | None] = list(sources)
    while True:
        for s, src in enumerate(open_sources):
            while src is not None and ((c := current[s]) is None or c.at == len(c.vlen)):
                current[s] = next(src, None)
                if current[s] is None:
                    open_sources[s] = src = None
        live = [c for c in current if c is not None]
        if not live:
            break
        bound = min(bytes(c.ikeys[-1, :ks]) for c in live)
        bound_arr = np.frombuffer(bound, np.uint8)
        parts = []
        for c in live:
            stop = upper_bound(c.ikeys, c.at, bound_arr)
            if stop > c.at:
                parts.append((c.ikeys[c.at:stop], c.values[c.at:stop], c.vlen[c.at:stop]))
                c.at = stop
        if len(parts) == 1:
            ikeys, values, vlen = parts[0]
        else:
            ikeys, values, vlen = (np.concatenate(x) for x in zip(*parts))
            packed = rf.footer_column(ikeys)
            order = np.lexsort((~packed,) + tuple(reversed(rf.key_words(ikeys[:, :ks]))))
            ikeys, values, vlen = ikeys[order], values[order], vlen[order]
        mark = np.empty(len(vlen), np.int8)
        out_keys, out_values = np.empty((len(vlen), ks), np.uint8), np.empty((len(vlen), vs), np.uint8)
        out_vlen = np.empty(len(vlen), np.int64)
        n = live_rows(ikeys, values, vlen, padded, last, state, tb, te, topen, tseq, mark, out_keys, out_values,
                      out_vlen)
        for row in np.flatnonzero(mark == _BAD_SIZE).tolist():
            key = ikeys[row, :ks].tobytes()
            sizes.append(_problem(db, f"key {key.hex()}: a value of {int(vlen[row])} bytes, not {vs}", "bad-value-size",
                                  key))
        yield out_keys[:n], out_values[:n], out_vlen[:n]
    for _pos, i, e in sorted(damaged, key=lambda d: (d[0], d[1])):
        db._block_problem(db.tables[_pos][2], i, e)
    db.problems += wrong + sizes
