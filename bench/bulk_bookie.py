"""A bench bookie of many small entries, built in bulk: tens of millions of entries in minutes.

bookie.writer packages each entry through its declaration, one Python step per entry (about 45 us: a
16 GiB bookie of 500-byte entries would take hours); here a jitted loop packages a batch of V1
entries at a time, each a size prefix, the header at the offsets formats/entry.py declares,
the digest (CRC32C or CRC32, the CRC kernel of digests/crc_kernels.py) and a payload cut from a random
pool, and the batch
is appended whole to the entry log and to the journal (a size-prefixed entry is a journal record: both
prefixes are the same 4-byte big-endian length, checked below). Cookies, lastMark, lastId, ledgers
maps and the ``.idx`` files come from the project's writers.

By default the entries interleave as a busy bookie's do (each add lands in the current log as it
arrives: each entry goes to a random ledger, ids spread over the 64-bit range, about one ledger in
eleven CRC32); ``contiguous`` writes each ledger's entries as one run, ids 1..N, all CRC32C.
tests/test_bench_bulk_bookie.py holds the entries equal to package_entry's, the layout interleaved and
the bookie clean under bookie-fsck.
"""
from __future__ import annotations

import os

import numpy as np

from bkdisk.digests.crc_kernels import POLY_CRC32, POLY_CRC32C, crc_update
from bkdisk.diskio import config
from bkdisk.diskio.config import kernel
from bkdisk.diskio.distinct import run_starts
from bkdisk.entrylogs.writer import write_preallocated
from bkdisk.formats import entrylog as fe
from bkdisk.formats import journal as fj
from bkdisk.formats.cookie import Cookie, serialize_cookie
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType, master_key
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, V1_ENTRY_AT, V1_LAC_AT, V1_LEDGER_AT, V1_LENGTH_AT
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import IndexHeader
from bkdisk.formats.lastmark import LastMark, build_last_mark, last_mark_name
from bkdisk.formats.paths import CURRENT_DIR, entry_log_name, index_relpath, journal_name
from bkdisk.indexfiles.writer import index_bytes
from bkdisk.journal.writer import JournalWriter

PASSWORD = b"bench"
DIGEST = DIGEST_LENGTH[DigestType.CRC32C]
CRC32_DIGEST = DIGEST_LENGTH[DigestType.CRC32]
PREFIX = fe.SIZE_PREFIX_SIZE
OVERHEAD = PREFIX + ENTRY_V1_HEADER_SIZE + DIGEST   # bytes around each payload in a log
LOG_LIMIT = 512 << 20
JOURNAL_LIMIT = 2 << 30
PAGE = 8192
BATCH_BYTES = 64 << 20   # entries packaged at once (whole ledgers)


@kernel
def _put_be(out, p, v, n):
    for i in range(n):
        out[p + n - 1 - i] = np.uint8(v & 0xFF)
        v >>= 8


@kernel
def _pack(pool, starts, sizes, ledgers, entries, lengths, digests, at, out, variant, header, ledger_at, entry_at,
          lac_at, length_at, prefix):
    """Each entry i at ``out[at[i]:]``: size prefix, V1 header, digest of header and payload (CRC32C in 4
    bytes, or CRC32 in 8 when ``digests[i]`` is 8), payload."""
    m = np.uint64(0xFFFFFFFF)
    for i in range(sizes.size):
        p = at[i]
        n = sizes[i]
        d = digests[i]
        poly = POLY_CRC32 if d == 8 else POLY_CRC32C
        _put_be(out, p, np.int64(header + d + n), prefix)
        h = p + prefix
        _put_be(out, h + ledger_at, ledgers[i], 8)
        _put_be(out, h + entry_at, entries[i], 8)
        _put_be(out, h + lac_at, entries[i] - 1, 8)
        _put_be(out, h + length_at, lengths[i], 8)
        body = h + header + d
        out[body:body + n] = pool[starts[i]:starts[i] + n]
        c = crc_update(m, out, h, header, poly, variant)
        c = crc_update(c, out, body, n, poly, variant) ^ m
        _put_be(out, h + header, np.int64(c), d)   # CRC32: a long whose upper half is zero


def pack_entries(pool: np.ndarray, starts: np.ndarray, sizes: np.ndarray, ledgers: np.ndarray,
                 entries: np.ndarray, lengths: np.ndarray,
                 crc32: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(size-prefixed V1 entries back to back, offset of each prefix); entry i is CRC32 where ``crc32[i]``,
    else CRC32C."""
    digests = np.where(crc32, CRC32_DIGEST, DIGEST) if crc32 is not None else np.full(len(sizes), DIGEST)
    rec = sizes.astype(np.int64) + OVERHEAD - DIGEST + digests
    at = np.concatenate([[0], np.cumsum(rec)[:-1]]).astype(np.int64)
    out = np.empty(int(rec.sum()), np.uint8)
    _pack(pool, starts.astype(np.int64), sizes.astype(np.int64), ledgers.astype(np.int64), entries.astype(np.int64),
          lengths.astype(np.int64), digests.astype(np.int64), at, out, config.crc_variant(), ENTRY_V1_HEADER_SIZE,
          V1_LEDGER_AT, V1_ENTRY_AT, V1_LAC_AT, V1_LENGTH_AT, PREFIX)
    return out, at


class _Log:
    def __init__(self, cur: str, log_id: int):
        self.log_id, self.path = log_id, os.path.join(cur, entry_log_name(log_id))
        self.f = open(self.path, "wb")
        self.f.write(fe.build_header(fe.HEADER_V1))
        self.position = fe.HEADER_SIZE
        self.ledger_bytes: dict[tuple[int, int], int] = {}

    def append(self, data: np.ndarray, ledgers: np.ndarray, rec: np.ndarray) -> None:
        self.f.write(memoryview(data))
        self.position += len(data)
        u, sums = np.unique(ledgers, return_inverse=True)
        for lg, b in zip(u.tolist(), np.bincount(sums, weights=rec).astype(np.int64).tolist()):
            self.ledger_bytes[(0, lg)] = self.ledger_bytes.get((0, lg), 0) + b

    def close(self, roll: bool) -> None:
        if roll:
            offset = self.position
            self.f.write(fe.build_ledgers_map(self.ledger_bytes))
            self.f.seek(0)
            self.f.write(fe.build_header(fe.HEADER_V1, offset, len(self.ledger_bytes)))
        self.f.close()


def write_sparse_index(path: str, header: IndexHeader, locations: np.ndarray) -> None:
    """write_index's file (header, whole pages), its zero tail left a hole: the same bytes read back in a
    block of disk instead of three, so a bench bookie of millions of ledgers fits the disk."""
    data = index_bytes(header, locations, PAGE)
    used = len(data.rstrip(b"\0"))
    with open(path, "wb") as f:
        f.write(data[:used])
        f.truncate(len(data))


LAYOUTS = ("interleaved", "contiguous")
STORAGES = ("index-files", "rocksdb")   # Interleaved/SortedLedgerStorage's .idx files, or DbLedgerStorage
CRC32_SHARE = 1 / 11   # of the interleaved layout's ledgers (the rest CRC32C)


def _spread_ids(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` distinct ledger ids across the range a V1 entry holds (1 .. 2^63 - 1), as a cluster's id
    generator hands them out over its life."""
    ids = np.unique(rng.integers(1, 1 << 63, n, dtype=np.int64))
    while len(ids) < n:
        ids = np.unique(np.concatenate([ids, rng.integers(1, 1 << 63, n - len(ids), dtype=np.int64)]))
    return rng.permutation(ids)


class _Batches:
    """Batches of entries in the order they reach the logs: (ledger of each entry as an index into the
    ledgers, payload sizes).

    ``interleaved``: as a busy bookie's adds arrive, each entry goes to a random ledger among the open
    ones (every ledger is open for the whole bookie), so a log holds runs of many ledgers at once;
    ``contiguous``: each ledger's entries one run, the ledgers in id order."""

    def __init__(self, rng: np.random.Generator, layout: str, n_ledgers: int, lo: int, hi: int, target: int):
        self.rng, self.layout, self.n, self.lo, self.hi, self.target = rng, layout, n_ledgers, lo, hi, target
        self.per_entry = (lo + hi) / 2 + OVERHEAD

    def __iter__(self):
        rng, lo, hi = self.rng, self.lo, self.hi
        if self.layout == "contiguous":
            per_ledger = self.target // self.n
            per_batch = max(1, BATCH_BYTES // max(per_ledger, 1))
            per_count = max(1, round(per_ledger / self.per_entry))
            for first in range(0, self.n, per_batch):
                labels = np.repeat(np.arange(first, min(first + per_batch, self.n), dtype=np.int64), per_count)
                yield labels, rng.integers(lo, hi + 1, len(labels))
            return
        written = 0
        while written < self.target:
            sizes = rng.integers(lo, hi + 1, max(1, int(BATCH_BYTES // self.per_entry)))
            ends = np.cumsum(sizes + OVERHEAD) + written
            sizes = sizes[:max(1, int(np.searchsorted(ends, self.target)) + 1)]   # up to the target
            written = int(ends[len(sizes) - 1])
            yield rng.integers(0, self.n, len(sizes)).astype(np.int64), sizes


def _in_ledger_order(labels: np.ndarray, sizes: np.ndarray, next_entry: np.ndarray,
                     bytes_so_far: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(entry id, the ledger's length with this entry) of each entry of a batch, its ledger's entries
    numbered on from ``next_entry`` in arrival order; both counters moved past the batch."""
    order = np.argsort(labels, kind="stable")
    lab = labels[order]
    heads = run_starts(np.zeros_like(lab), lab)
    run = np.repeat(heads, np.diff(np.append(heads, len(lab))))
    rank = np.arange(len(lab)) - run
    sums = np.cumsum(sizes[order])
    within = sums - (sums[run] - sizes[order][run])
    entries, lengths = np.empty(len(lab), np.int64), np.empty(len(lab), np.int64)
    entries[order] = next_entry[lab] + rank
    lengths[order] = bytes_so_far[lab] + within
    last = np.append(heads[1:], len(lab)) - 1
    next_entry[lab[last]] = entries[order][last] + 1
    bytes_so_far[lab[last]] = lengths[order][last]
    return entries, lengths


def build(root: str, size_gib: float, n_ledgers: int, lo: int, hi: int, seed: int,
          layout: str = "interleaved", *, bookie_id: str = "bench-bookie:3181", log_limit: int | None = None,
          journal_entries: bool = True, storage: str = "index-files") -> dict:
    """Write the bookie under ``root`` (journal/, ledgers/); returns counts.

    ``interleaved`` (the default): entries given to random ledgers as they arrive, ledger ids spread over
    the 64-bit range, about one ledger in eleven CRC32 and the rest CRC32C; ``contiguous``: each ledger's
    entries one run, ids 1..N, all CRC32C. ``log_limit``: entry-log bytes before a log rolls (LOG_LIMIT).
    ``journal_entries`` False: the journal holds the ledgers' keys only, as a bookie's once the journals
    holding its entries were garbage-collected (a cluster of bench disks then fits in half the space).
    ``storage`` "rocksdb": DbLedgerStorage's ``locations`` and ``ledgers`` databases instead of ``.idx`` files."""
    assert fe.ENTRY_SIZE.build(1234) == fj.RECORD_LENGTH.build(1234), "a size prefix is not a journal record length"
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    if storage not in STORAGES:
        raise ValueError(f"storage {storage!r}: expected one of {', '.join(STORAGES)}")
    log_limit = log_limit or LOG_LIMIT
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 256, 64 << 20, dtype=np.uint8)
    jdir, ldir = os.path.join(root, "journal"), os.path.join(root, "ledgers")
    jcur, lcur = os.path.join(jdir, CURRENT_DIR), os.path.join(ldir, CURRENT_DIR)
    for d in (jcur, lcur):
        os.makedirs(d, exist_ok=True)
    cookie = serialize_cookie(Cookie(5, bookie_id, (os.path.abspath(jdir),), (os.path.abspath(ldir),),
                                     "bkdisk-bench-instance", None))
    for d in (jcur, lcur):
        with open(os.path.join(d, "VERSION"), "wb") as f:
            f.write(cookie)
    if layout == "contiguous":
        ids, crc32 = np.arange(1, n_ledgers + 1, dtype=np.int64), np.zeros(n_ledgers, bool)
    else:
        ids, crc32 = _spread_ids(rng, n_ledgers), rng.random(n_ledgers) < CRC32_SHARE
    key = master_key(PASSWORD)
    journal_id = 0x1A200000000
    journal = JournalWriter(os.path.join(jcur, journal_name(journal_id)), alignment=512, prealloc_size=16 << 20,
                            group_bytes=1 << 62)
    log = _Log(lcur, 0)
    total_entries = total_bytes = 0
    next_entry, bytes_so_far = np.zeros(n_ledgers, np.int64), np.zeros(n_ledgers, np.int64)
    kept_labels, kept_locs = [], []
    for labels, sizes in _Batches(rng, layout, n_ledgers, lo, hi, int(size_gib * (1 << 30))):
        opened = labels[next_entry[labels] == 0]
        opened = opened[np.sort(np.unique(opened, return_index=True)[1])]   # in order of first entry
        entries, lengths = _in_ledger_order(labels, sizes, next_entry, bytes_so_far)
        ledgers = ids[labels]
        starts = rng.integers(0, len(pool) - hi, len(sizes))
        data, at = pack_entries(pool, starts, sizes, ledgers, entries, lengths, crc32[labels])
        rec = np.diff(np.append(at, len(data)))
        if journal.position > JOURNAL_LIMIT:
            journal.flush_group()
            journal.close()
            journal_id += 1
            journal = JournalWriter(os.path.join(jcur, journal_name(journal_id)), alignment=512,
                                    prealloc_size=16 << 20, group_bytes=1 << 62)
        for lid in ids[opened].tolist():
            journal.append(fj.build_ledger_key_body(lid, key, 0))
        if journal_entries:
            journal.append_framed(data)   # the same records: a length prefix, then the entry
        journal.flush_group()
        locs = np.empty(len(sizes), np.uint64)
        i = 0
        while i < len(sizes):   # as many entries as fit in the current log, then roll
            room = log_limit - log.position
            j = i + int(np.searchsorted(np.cumsum(rec[i:]), room, side="right"))
            if j == i:
                if log.position > fe.HEADER_SIZE:
                    log.close(roll=True)
                    log = _Log(lcur, log.log_id + 1)
                    continue
                j = i + 1
            base = log.position - int(at[i])
            log.append(data[at[i]:at[j - 1] + rec[j - 1]], ledgers[i:j], rec[i:j])
            locs[i:j] = (np.uint64(log.log_id) << np.uint64(32)) | (at[i:j] + base + PREFIX).astype(np.uint64)
            i = j
        kept_labels.append(labels.astype(np.int32))
        kept_locs.append(locs)
        total_entries += len(sizes)
        total_bytes += int(rec.sum())
    log.close(roll=False)
    write_preallocated(os.path.join(lcur, entry_log_name(log.log_id + 1)))
    with open(os.path.join(lcur, "lastId"), "w") as f:
        f.write(f"{log.log_id + 1:x}\n")
    mark = journal.flush_group()
    journal.close()
    with open(os.path.join(lcur, last_mark_name(0, 1)), "wb") as f:
        f.write(build_last_mark(LastMark(journal_id, mark)))
    write = _write_databases if storage == "rocksdb" else _write_indexes
    write(lcur, ids, key, np.concatenate(kept_labels), np.concatenate(kept_locs))
    return {"entries": total_entries, "bytes": total_bytes, "logs": log.log_id + 1,
            "journals": journal_id - 0x1A200000000 + 1, "crc32_ledgers": int(crc32[next_entry > 0].sum())}


def _write_indexes(lcur: str, ids: np.ndarray, key: bytes, labels: np.ndarray, locs: np.ndarray) -> None:
    """Each ledger's ``.idx``: its locations in entry-id order (the order they were written in)."""
    order = np.argsort(labels, kind="stable")
    labels, locs = labels[order], locs[order]
    heads = run_starts(np.zeros_like(labels), labels)
    header = IndexHeader(1, key, 0, None)
    made: set[str] = set()
    for a, b in zip(heads.tolist(), np.append(heads[1:], len(labels)).tolist()):
        p = os.path.join(lcur, index_relpath(LedgerId(0, int(ids[labels[a]]))))
        folder = os.path.dirname(p)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        write_sparse_index(p, header, locs[a:b])


def _write_databases(lcur: str, ids: np.ndarray, key: bytes, labels: np.ndarray, locs: np.ndarray) -> None:
    """DbLedgerStorage's ``locations`` (every entry) and ``ledgers`` (every ledger that has an entry)."""
    from bkdisk.bookie.db_index_writer import write_db_indexes
    from bkdisk.bookie.model import LedgerSpec
    order = np.argsort(labels, kind="stable")   # each ledger's entries in arrival order: ids 0, 1, ...
    labels, locs = labels[order], locs[order]
    heads = run_starts(np.zeros_like(labels), labels)
    entry_ids = np.arange(len(labels)) - np.repeat(heads, np.diff(np.append(heads, len(labels))))
    lids = [LedgerId(0, int(i)) for i in ids.tolist()]
    locations = {(lids[lab], eid): loc for lab, eid, loc in zip(labels.tolist(), entry_ids.tolist(), locs.tolist())}
    ledgers = [LedgerSpec(int(ids[lab]), [], password=PASSWORD) for lab in labels[heads].tolist()]
    del key   # write_db_indexes derives each ledger's master key from PASSWORD, as _write_indexes' ``key`` is
    write_db_indexes(lcur, ledgers, locations, lambda ledger: None)
