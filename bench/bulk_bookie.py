"""A bench bookie of many small entries, built in bulk: tens of millions of entries in minutes.

bookie.writer packages each entry through its declaration, one Python step per entry (about 45 us: a
16 GiB bookie of 500-byte entries would take hours); here a jitted loop packages a batch of V1
CRC32C entries at a time, each a size prefix, the header at the offsets formats/entry.py declares,
the digest (the CRC kernel of diskio/crc_kernels.py) and a payload cut from a random pool, and the batch
is appended whole to the entry log and to the journal (a size-prefixed entry is a journal record: both
prefixes are the same 4-byte big-endian length, checked below). Cookies, lastMark, lastId, ledgers
maps and the ``.idx`` files come from the project's writers. tests/test_bench_bulk_bookie.py holds
the entries equal to package_entry's and the bookie clean under bookie-fsck.
"""
from __future__ import annotations

import os

import numpy as np

from bkdisk.diskio import config
from bkdisk.diskio.config import kernel
from bkdisk.diskio.crc_kernels import POLY_CRC32C, crc_update
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
def _pack(pool, starts, sizes, ledgers, entries, lengths, at, out, variant, header, ledger_at, entry_at, lac_at,
          length_at, prefix):
    """Each entry i at ``out[at[i]:]``: size prefix, V1 header, CRC32C of header and payload, payload."""
    m = np.uint64(0xFFFFFFFF)
    for i in range(sizes.size):
        p = at[i]
        n = sizes[i]
        _put_be(out, p, np.int64(header + 4 + n), prefix)
        h = p + prefix
        _put_be(out, h + ledger_at, ledgers[i], 8)
        _put_be(out, h + entry_at, entries[i], 8)
        _put_be(out, h + lac_at, entries[i] - 1, 8)
        _put_be(out, h + length_at, lengths[i], 8)
        body = h + header + 4
        out[body:body + n] = pool[starts[i]:starts[i] + n]
        c = crc_update(m, out, h, header, POLY_CRC32C, variant)
        c = crc_update(c, out, body, n, POLY_CRC32C, variant) ^ m
        _put_be(out, h + header, np.int64(c), 4)


def pack_entries(pool: np.ndarray, starts: np.ndarray, sizes: np.ndarray, ledgers: np.ndarray,
                 entries: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(size-prefixed V1 CRC32C entries back to back, offset of each prefix)."""
    rec = sizes.astype(np.int64) + OVERHEAD
    at = np.concatenate([[0], np.cumsum(rec)[:-1]]).astype(np.int64)
    out = np.empty(int(rec.sum()), np.uint8)
    _pack(pool, starts.astype(np.int64), sizes.astype(np.int64), ledgers.astype(np.int64), entries.astype(np.int64),
          lengths.astype(np.int64), at, out, config.crc_variant(), ENTRY_V1_HEADER_SIZE, V1_LEDGER_AT, V1_ENTRY_AT,
          V1_LAC_AT, V1_LENGTH_AT, PREFIX)
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


def build(root: str, size_gib: float, n_ledgers: int, lo: int, hi: int, seed: int) -> dict:
    """Write the bookie under ``root`` (journal/, ledgers/); returns counts."""
    assert fe.ENTRY_SIZE.build(1234) == fj.RECORD_LENGTH.build(1234), "a size prefix is not a journal record length"
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 256, 64 << 20, dtype=np.uint8)
    jdir, ldir = os.path.join(root, "journal"), os.path.join(root, "ledgers")
    jcur, lcur = os.path.join(jdir, CURRENT_DIR), os.path.join(ldir, CURRENT_DIR)
    for d in (jcur, lcur):
        os.makedirs(d, exist_ok=True)
    cookie = serialize_cookie(Cookie(5, "bench-bookie:3181", (os.path.abspath(jdir),), (os.path.abspath(ldir),),
                                     "bkdisk-bench-instance", None))
    for d in (jcur, lcur):
        with open(os.path.join(d, "VERSION"), "wb") as f:
            f.write(cookie)
    per_ledger = int(size_gib * (1 << 30)) // n_ledgers
    key = master_key(PASSWORD)
    header = IndexHeader(1, key, 0, None)
    journal_id = 0x1A200000000
    journal = JournalWriter(os.path.join(jcur, journal_name(journal_id)), alignment=512, prealloc_size=16 << 20,
                            group_bytes=1 << 62)
    log = _Log(lcur, 0)
    made: set[str] = set()
    total_entries = total_bytes = 0
    per_batch = max(1, BATCH_BYTES // max(per_ledger, 1))
    per_count = max(1, round(per_ledger / ((lo + hi) / 2 + OVERHEAD)))
    for first in range(0, n_ledgers, per_batch):
        ids = np.arange(first + 1, min(first + per_batch, n_ledgers) + 1, dtype=np.int64)
        counts = np.full(len(ids), per_count, np.int64)
        sizes = rng.integers(lo, hi + 1, int(counts.sum()))
        ledgers = np.repeat(ids, counts)
        starts_of = np.concatenate([[0], np.cumsum(counts)[:-1]])
        entries = np.arange(len(sizes)) - np.repeat(starts_of, counts)
        ends = np.cumsum(sizes)
        lengths = ends - np.repeat(ends[starts_of] - sizes[starts_of], counts)   # the ledger's bytes so far
        starts = rng.integers(0, len(pool) - hi, len(sizes))
        data, at = pack_entries(pool, starts, sizes, ledgers, entries, lengths)
        rec = sizes.astype(np.int64) + OVERHEAD
        if journal.position > JOURNAL_LIMIT:
            journal.flush_group()
            journal.close()
            journal_id += 1
            journal = JournalWriter(os.path.join(jcur, journal_name(journal_id)), alignment=512,
                                    prealloc_size=16 << 20, group_bytes=1 << 62)
        for lid in ids.tolist():
            journal.append(fj.build_ledger_key_body(lid, key, 0))
        journal.append_framed(data)   # the same records: a length prefix, then the entry
        journal.flush_group()
        locs = np.empty(len(sizes), np.uint64)
        i = 0
        while i < len(sizes):   # as many entries as fit in the current log, then roll
            room = LOG_LIMIT - log.position
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
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for k, lid in enumerate(ids.tolist()):
            p = os.path.join(lcur, index_relpath(LedgerId(0, lid)))
            folder = os.path.dirname(p)
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            write_sparse_index(p, header, locs[bounds[k]:bounds[k + 1]])
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
    return {"entries": total_entries, "bytes": total_bytes, "logs": log.log_id + 1,
            "journals": journal_id - 0x1A200000000 + 1}
