"""A metadata folder's closed, empty ledgers found in jitted batches: a ledger closed before its first
entry places nothing on any disk and only needs to be known (its key) and to name its bookies, so it
needs no metadata object. Ledgers with entries are parsed in full.

One kernel call takes a slice of a chunk's file names: it opens each ``<hex id>.bin`` (libc's
openat and read, beside the folder's descriptor), reads it and walks its format 3 bytes (the header, the
varint32 length, the LedgerMetadataFormat fields: ``formats/metadata.py`` and the .proto declare
them). A file it takes is one whose bytes the full parser (``parse_metadata``) accepts as a CLOSED
ledger whose every ensemble starts past its last entry. Anything else, or anything unusual (another
name form, a read that fails, another format, a field repeated or unknown, a string not ASCII, a file
of a page or more), is left to the full parser, which gives its error or its rows as before: the
kernel only ever takes what it is sure of. The metadata service's bulk read gives the same bytes a
page at a time; the same walk takes a page's closed, empty ledgers (``closed_empty_blobs``).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.libc_calls import c_strings
from bkdisk.diskio.libc_calls import close as libc_close
from bkdisk.diskio.libc_calls import openat as libc_openat
from bkdisk.diskio.libc_calls import read as libc_read
from bkdisk.diskio.mapped import OPEN_FLAGS
from bkdisk.formats.ledger_metadata import INT32
from bkdisk.formats.metadata import DIGEST_TYPES, HEADER_PREFIX, STATES
from bkdisk.formats.proto import LedgerMetadataFormat

_F = {f.name: f.number for f in LedgerMetadataFormat.DESCRIPTOR.fields}
_SEG = {f.name: f.number for f in LedgerMetadataFormat.DESCRIPTOR.fields_by_name["segment"].message_type.fields}
_CUSTOM = {f.name: f.number
           for f in LedgerMetadataFormat.DESCRIPTOR.fields_by_name["customMetadata"].message_type.fields}
F_QUORUM, F_ENSEMBLE, F_LENGTH, F_LAST = _F["quorumSize"], _F["ensembleSize"], _F["length"], _F["lastEntryId"]
F_STATE, F_SEGMENT, F_DIGEST, F_PASSWORD = _F["state"], _F["segment"], _F["digestType"], _F["password"]
F_ACK, F_CTIME, F_CUSTOM, F_CTOKEN = _F["ackQuorumSize"], _F["ctime"], _F["customMetadata"], _F["cToken"]
S_MEMBER, S_FIRST = _SEG["ensembleMember"], _SEG["firstEntryId"]
C_KEY, C_VALUE = _CUSTOM["key"], _CUSTOM["value"]
REQUIRED = (1 << F_QUORUM) | (1 << F_ENSEMBLE) | (1 << F_LENGTH) | (1 << F_STATE)
N_STATES = len(STATES)                  # enum values 1..N
N_DIGESTS = len(DIGEST_TYPES)
CLOSED = LedgerMetadataFormat.State.Value("CLOSED")
HEADER_V3 = np.frombuffer(HEADER_PREFIX + b"3\n", np.uint8).copy()
SUFFIX = np.frombuffer(b".bin", np.uint8).copy()   # the preferred form: no other file of the ledger wins
MAX_HEX = 16                            # ids of one 64-bit ledger (scoped ids take the full parser)

SLOT = 4096          # a file this size or more is left to the full parser
MAX_MEMBERS = 256    # ensemble members of one file the kernel keeps
MAX_NAMES = 4096     # distinct bookie names one call keeps
ARENA = 1 << 18      # their bytes
TABLE = 1 << 13      # hash slots over them
THREADS = 4          # concurrent calls: a folder out of the page cache costs a device read a file

TAKEN, LEFT = 0, 1


@inline_kernel
def _varint(b, p, end):
    """(value, position after it), position -1 when malformed or past ``end`` (as upb: 10 bytes at most)."""
    v = np.uint64(0)
    for k in range(10):
        if p >= end:
            return v, -1
        x = b[p]
        p += 1
        if k == 9 and x > 1:
            return v, -1
        v |= np.uint64(x & 0x7F) << np.uint64(7 * k)
        if x < 0x80:
            return v, p
    return v, -1


@inline_kernel
def _ascii(b, p, end):
    for i in range(p, end):
        if b[i] >= 0x80:
            return False
    return True


@inline_kernel
def _closed_empty(b, n, spans):
    """The number of member spans (start, length) of ``b[:n]`` when it is a format 3 CLOSED ledger
    whose every ensemble starts past its last entry, else -1."""
    h = HEADER_V3.size
    if n < h:
        return -1
    for i in range(h):
        if b[i] != HEADER_V3[i]:
            return -1
    size, p = _varint(b, h, min(n, h + 5))
    if p < 0 or (p - h > 1 and b[p - 1] == 0) or size > np.uint64(INT32[1]) or np.int64(size) != n - p:
        return -1
    seen = 0
    state = np.uint64(0)
    last = np.int64(0)
    least = np.int64(0)
    segments = 0
    m = 0
    while p < n:
        tag = b[p]
        p += 1
        if tag >= 0x80:
            return -1
        field, wire = tag >> 3, tag & 7
        if field == F_SEGMENT or field == F_CUSTOM:
            if wire != 2:
                return -1
            ln, p = _varint(b, p, n)
            if p < 0 or ln > np.uint64(n - p):
                return -1
            end = p + np.int64(ln)
            if field == F_SEGMENT:
                has_first = False
                first = np.int64(0)
                while p < end:
                    t = b[p]
                    p += 1
                    if t == (S_MEMBER << 3) | 2:
                        ln, p = _varint(b, p, end)
                        if p < 0 or ln > np.uint64(end - p) or m == MAX_MEMBERS:
                            return -1
                        q = p + np.int64(ln)
                        if not _ascii(b, p, q):
                            return -1
                        spans[m, 0], spans[m, 1] = p, q - p
                        m += 1
                        p = q
                    elif t == (S_FIRST << 3) and not has_first:
                        v, p = _varint(b, p, end)
                        if p < 0:
                            return -1
                        first, has_first = np.int64(v), True
                    else:
                        return -1
                if not has_first:
                    return -1
                least = first if segments == 0 or first < least else least
                segments += 1
            else:
                got = 0
                while p < end:
                    t = b[p]
                    p += 1
                    if t != (C_KEY << 3) | 2 and t != (C_VALUE << 3) | 2:
                        return -1
                    bit = 1 << (t >> 3)
                    if got & bit:
                        return -1
                    got |= bit
                    ln, p = _varint(b, p, end)
                    if p < 0 or ln > np.uint64(end - p):
                        return -1
                    q = p + np.int64(ln)
                    if t >> 3 == C_KEY and not _ascii(b, p, q):
                        return -1
                    p = q
            continue
        if field < 1 or field > 12 or (seen >> field) & 1:
            return -1
        seen |= 1 << field
        if field == F_PASSWORD:
            if wire != 2:
                return -1
            ln, p = _varint(b, p, n)
            if p < 0 or ln > np.uint64(n - p):
                return -1
            p += np.int64(ln)
            continue
        if wire != 0:
            return -1
        v, p = _varint(b, p, n)
        if p < 0:
            return -1
        if field == F_STATE:
            if v < 1 or v > N_STATES:
                return -1
            state = v
        elif field == F_DIGEST:
            if v < 1 or v > N_DIGESTS:
                return -1
        elif field == F_LAST:
            last = np.int64(v)
    if seen & REQUIRED != REQUIRED or state != CLOSED or (segments > 0 and least <= last):
        return -1
    return m


@inline_kernel
def _keep_names(b, spans, m, arena, used, offs, lens, count, table):
    """Add the member names of ``spans[:m]`` to the distinct names (``arena``); False when full."""
    for k in range(m):
        p, ln = spans[k, 0], spans[k, 1]
        h = np.uint64(14695981039346656037)
        for i in range(p, p + ln):
            h = (h ^ np.uint64(b[i])) * np.uint64(1099511628211)
        s = np.int64(h & np.uint64(TABLE - 1))
        while True:
            j = table[s]
            if j < 0:
                if count[0] == MAX_NAMES or used[0] + ln > arena.size:
                    return False
                j = count[0]
                offs[j], lens[j] = used[0], ln
                arena[used[0]:used[0] + ln] = b[p:p + ln]
                used[0] += ln
                count[0] += 1
                table[s] = j
                break
            if lens[j] == ln:
                same = True
                for i in range(ln):
                    if arena[offs[j] + i] != b[p + i]:
                        same = False
                        break
                if same:
                    break
            s = (s + 1) & (TABLE - 1)
    return True


@inline_kernel
def _ledger_of_name(names, a, z):
    """The ledger a name ``<1-16 lower-case hex digits>.bin`` stands for (as int64 bits), else -1 and False."""
    k = z - a - SUFFIX.size
    if k < 1 or k > MAX_HEX:
        return np.int64(-1), False
    for i in range(SUFFIX.size):
        if names[a + k + i] != SUFFIX[i]:
            return np.int64(-1), False
    v = np.uint64(0)
    for i in range(a, a + k):
        c = names[i]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        else:
            return np.int64(-1), False
        v = (v << np.uint64(4)) | np.uint64(d)
    return np.int64(v), True


@kernel
def _classify(dirfd, flags, names, starts, ends, lo, hi, status, ledgers, arena, used, offs, lens, count, table):
    buf = np.empty(SLOT, np.uint8)
    spans = np.empty((MAX_MEMBERS, 2), np.int64)
    addr = np.int64(buf.ctypes.data)
    base = np.int64(names.ctypes.data)
    for i in range(lo, hi):
        status[i] = LEFT
        lid, ok = _ledger_of_name(names, starts[i], ends[i])
        if not ok:
            continue
        fd = libc_openat(np.int32(dirfd), base + starts[i], np.int32(flags))
        if fd < 0:
            continue
        n = libc_read(fd, addr, np.uint64(SLOT))
        libc_close(np.int32(fd))
        if n < 0 or n >= SLOT:
            continue
        m = _closed_empty(buf, n, spans)
        if m < 0 or not _keep_names(buf, spans, m, arena, used, offs, lens, count, table):
            continue
        status[i] = TAKEN
        ledgers[i] = lid


@kernel
def _classify_buffers(data, starts, ends, status, arena, used, offs, lens, count, table):
    spans = np.empty((MAX_MEMBERS, 2), np.int64)
    for i in range(starts.size):
        status[i] = LEFT
        m = _closed_empty(data[starts[i]:ends[i]], ends[i] - starts[i], spans)
        if m >= 0 and _keep_names(data[starts[i]:ends[i]], spans, m, arena, used, offs, lens, count, table):
            status[i] = TAKEN


class _Names:
    """A call's distinct bookie names: the kernel's arena and its hash table."""

    def __init__(self) -> None:
        self.arena, self.used = np.empty(ARENA, np.uint8), np.zeros(1, np.int64)
        self.offs, self.lens = np.empty(MAX_NAMES, np.int64), np.empty(MAX_NAMES, np.int64)
        self.count, self.table = np.zeros(1, np.int64), np.full(TABLE, -1, np.int64)

    def args(self) -> tuple:
        return self.arena, self.used, self.offs, self.lens, self.count, self.table

    def names(self) -> set[str]:
        return {self.arena[self.offs[j]:self.offs[j] + self.lens[j]].tobytes().decode("ascii")
                for j in range(self.count[0])}


def closed_empty_blobs(blobs: list[bytes]) -> tuple[np.ndarray, set[str]]:
    """Of serialized metadata ``blobs`` (a bulk read's page): which the kernel takes (a bool each)
    and the bookies those name; the others are for the full parser."""
    if not blobs:
        return np.zeros(0, bool), set()
    data = np.frombuffer(b"".join(blobs), np.uint8)
    lengths = np.fromiter(map(len, blobs), np.int64, len(blobs))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    status = np.empty(len(blobs), np.int8)
    kept = _Names()
    _classify_buffers(data, starts, ends, status, *kept.args())
    return status == TAKEN, kept.names()


def closed_empty_ledgers(folder: str, names: list[str], threads: int = THREADS
                         ) -> tuple[np.ndarray, set[str], list[str]]:
    """Of ``names`` (files of ``folder``): the ledgers (int64 ids, scope 0) of the files the kernel
    takes, the bookies their ensembles name, and the names left to the full parser, in their order."""
    if not names:
        return np.empty(0, np.int64), set(), []
    try:
        dirfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return np.empty(0, np.int64), set(), list(names)   # the full parser says why
    try:
        joined, starts, ends = c_strings(names)
        status = np.empty(len(names), np.int8)
        ledgers = np.empty(len(names), np.int64)
        step = -(-len(names) // max(1, threads))

        def call(lo: int) -> set[str]:
            kept = _Names()
            _classify(dirfd, OPEN_FLAGS, joined, starts, ends, lo, min(lo + step, len(names)), status, ledgers,
                      *kept.args())
            return kept.names()

        with ThreadPoolExecutor(threads) as pool:
            named = set().union(*pool.map(call, range(0, len(names), step)))
    finally:
        os.close(dirfd)
    taken = status == TAKEN
    return ledgers[taken], named, [names[i] for i in np.flatnonzero(~taken)]
