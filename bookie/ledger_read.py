"""A ledger's entries in id order from any intact copy on a set of bookie disks (``bkdisk read-ledger``).

Every disk's locations of the ledger (bookie/ledger_copies.py) are merged by entry id; an entry's
copies are read and their digests verified (digests.verify, with the ledger's digest type and
password when metadata gives them; else the type is sniffed, and HMAC or DUMMY copies stay not
verified) a chunk of entries at a time, so that memory holds one chunk whatever the ledger's size.
An id with no intact copy (none stored, or every copy damaged) is lost. specs/read-ledger.md.
"""
from __future__ import annotations

import hashlib
import heapq
import itertools
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np

from bkdisk.bookie.inventory import verified_status
from bkdisk.bookie.ledger_copies import CopyReader, Disk, locations
from bkdisk.bookie.unindexed_copies import UnindexedSearch
from bkdisk.digests.kernels import DIGEST_BAD, DIGEST_OK
from bkdisk.digests.plan import DigestPlan
from bkdisk.digests.verify import verify_entry_digests
from bkdisk.entrylogs.arrays import ENTRY_DTYPE
from bkdisk.formats.codec import build_struct
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType
from bkdisk.formats.entry import (
    ENTRY_V1_HEADER,
    ENTRY_V1_HEADER_SIZE,
    ENTRY_V2_HEADER,
    ENTRY_V2_HEADER_SIZE,
    is_v2,
)
from bkdisk.formats.entrylog import ENTRY_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata

CHUNK_ENTRIES = 1024        # entry ids verified together
CHUNK_BYTES = 32 << 20      # copies' bytes held at once (one entry larger than this is a chunk alone)


@dataclass
class Copy:
    bookie: str
    data: bytes
    fmt: int = 0            # 1 or 2; 0: the header does not name this entry (not a copy of it)
    length: int = -1        # the cumulative ledger length its header carries
    status: int = 0         # DIGEST_OK / DIGEST_BAD / DIGEST_UNKNOWN (not verified)
    digest_type: DigestType | None = None
    payload_len: int = -1


@dataclass
class EntryRead:
    """One entry id's outcome: the copy used (None: lost), every copy's bookie and verdict."""

    entry_id: int
    copies: list[Copy] = field(default_factory=list)
    used: Copy | None = None
    payload: bytes | None = None

    @property
    def lost(self) -> bool:
        return self.used is None

    @property
    def intact(self) -> list[Copy]:
        return [c for c in self.copies if _intact(c)]

    @property
    def verified(self) -> bool:
        return self.used is not None and self.used.status == DIGEST_OK

    def to_json(self) -> dict:
        import base64
        p = self.payload
        return {
            "entry_id": self.entry_id,
            "lost": self.lost,
            "payload_base64": None if p is None else base64.b64encode(p).decode("ascii"),
            "payload_sha256": None if p is None else hashlib.sha256(p).hexdigest(),
            "bookie": None if self.used is None else self.used.bookie,
            "copies": [c.bookie for c in self.copies],
            "intact_copies": [c.bookie for c in self.intact],
            "digest_type": None if self.used is None or self.used.digest_type is None else self.used.digest_type.name,
            "digest_verified": self.verified,
        }


def _intact(c: Copy) -> bool:
    """A copy framed as this entry whose digest verified, or could not be verified (HMAC without the
    password, DUMMY, a type not decided): never one whose digest is wrong."""
    return c.fmt != 0 and c.status != DIGEST_BAD and c.payload_len >= 0


@dataclass
class LedgerRead:
    """What read-ledger found: each disk whose index was damaged (and why), entries read and lost."""

    scanned: list[tuple[str, str]] = field(default_factory=list)    # (disk root, reason)
    entries: int = 0
    lost: int = 0
    held_anywhere: bool = False
    unreadable: dict[str, str] = field(default_factory=dict)         # entry log -> why it could not be read
    disagree: list[int] = field(default_factory=list)   # entries whose intact copies, none verified, differ
    # (disk root, first id): a disk the metadata gives ids no index holds, from that one on; its logs searched
    searched: list[tuple[str, int]] = field(default_factory=list)


def read_ledger(disks: list[Disk], lid: LedgerId, metadata: LedgerMetadata | None, first: int = 0,
                last: int | None = None, done: LedgerRead | None = None,
                password: bytes | None = None) -> Iterator[EntryRead]:
    """Each entry id from ``first`` in order, to ``last`` (inclusive), else to the highest id any disk
    holds; never past the metadata's last entry when it is CLOSED (no entry of the ledger is there).
    ``password``: the ledger's (its master key matched) for its HMAC digests when the metadata gives none."""
    done = done if done is not None else LedgerRead()
    if metadata is not None and metadata.is_closed:
        last = metadata.last_entry_id if last is None else min(last, metadata.last_entry_id)
    key = (lid.scope, lid.ledger)
    known = {}
    if metadata is not None and metadata.digest_type is not None:
        known[key] = DigestType.parse(metadata.digest_type)
    if metadata is not None and metadata.password is not None:
        password = metadata.password
    plan = DigestPlan(known=known, passwords={key: password} if password is not None else {})
    state = _Lengths()
    with ExitStack() as stack:
        reader = CopyReader()
        reader.unreadable = done.unreadable
        stack.callback(reader.close)
        # The entry before ``first`` is read too, never given: its cumulative length gives the payload
        # length of ``first``'s copies when their digests cannot be verified.
        lead = first - 1 if first > 0 else first
        streams, scanned = [], set()
        for n, disk in enumerate(disks):
            it, why = locations(disk, lid, stack, lead, last)
            if why is not None:
                done.scanned.append((disk.root, why))
                scanned.add(n)
            streams.append(_tagged(it, n))
        search = UnindexedSearch(disks, lid, metadata, done.searched, scanned) \
            if metadata is not None and metadata.ensembles else None

        def gap(a: int, b: int, searched: bool = True) -> Iterator[tuple[EntryRead, int]]:
            """The ids ``a``..``b`` no disk's index holds, each with the copies a search of the disks the
            metadata places it on found (and the bytes they hold)."""
            for lo in range(a, b + 1, CHUNK_ENTRIES):   # (a chunk's locations at a time)
                hi = min(b, lo + CHUNK_ENTRIES - 1)
                found = search.copies(max(lo, first), hi) if search is not None and searched else {}
                for i in range(lo, hi + 1):
                    e = EntryRead(i)
                    for n, path, pos in found.get(i, ()):
                        e.copies.append(Copy(disks[n].bookie_id, reader.record(path, pos) or b""))
                    yield e, sum(len(c.data) for c in e.copies)

        chunk: list[EntryRead] = []
        held = 0

        def put(items) -> Iterator[EntryRead]:
            """Add ``items`` (entry, bytes its copies hold) to the chunk, settling it whenever it is full."""
            nonlocal chunk, held
            for e, size in items:
                if chunk and (len(chunk) >= CHUNK_ENTRIES or held >= CHUNK_BYTES):
                    yield from _settle(chunk, lid, plan, state, done, first)
                    chunk, held = [], 0
                chunk.append(e)
                held += size

        nxt = lead
        for eid, n, path, pos in heapq.merge(*streams):
            if eid < lead:
                continue
            if last is not None and eid > last:
                break
            done.held_anywhere = True
            if not chunk or chunk[-1].entry_id != eid:
                yield from put(itertools.chain(gap(nxt, eid - 1), [(EntryRead(eid), 0)]))
                nxt = eid + 1
            data = reader.record(path, pos)
            chunk[-1].copies.append(Copy(disks[n].bookie_id, data or b""))
            held += len(data or b"")
        if last is not None:
            # (past the last id any disk holds, only a CLOSED ledger's were all written)
            yield from put(gap(nxt, last, searched=metadata is not None and metadata.is_closed))
        yield from _settle(chunk, lid, plan, state, done, first)


def _tagged(it, n: int):
    """(entry id, disk number, log path, position): merged by entry id, then disk order."""
    for eid, path, pos in it:
        yield eid, n, path, pos


@dataclass
class _Lengths:
    """What earlier entries tell about a later one's payload when its digest type stays unknown."""

    prev_entry: int = -2
    prev_length: int = -1
    digest_length: int = -1


def _settle(chunk: list[EntryRead], lid: LedgerId, plan: DigestPlan, state: _Lengths,
            done: LedgerRead, first: int) -> Iterator[EntryRead]:
    _verify(chunk, lid, plan)
    for e in chunk:
        for c in e.copies:
            if c.fmt and c.status not in (DIGEST_OK, DIGEST_BAD):
                _payload_from_lengths(c, e.entry_id, state)
        ok = [c for c in e.copies if _intact(c)]
        e.used = next((c for c in ok if c.status == DIGEST_OK), ok[0] if ok else None)
        if e.used is not None:
            c = e.used
            hdr = ENTRY_V2_HEADER_SIZE if c.fmt == 2 else ENTRY_V1_HEADER_SIZE
            e.payload = c.data[len(c.data) - c.payload_len:]
            if c.status != DIGEST_OK and e.entry_id >= first and \
                    any(o.data[len(o.data) - o.payload_len:] != e.payload for o in ok if o is not c):
                done.disagree.append(e.entry_id)   # (which copy is right is unknown: the first disk's is given)
            state.prev_entry, state.prev_length = e.entry_id, c.length
            state.digest_length = len(c.data) - hdr - c.payload_len
        for c in e.copies:
            c.data = b""         # the chunk's bytes go with it
        if e.entry_id < first:   # (the entry read for its length only)
            continue
        done.entries += 1
        done.lost += e.lost
        yield e


def _payload_from_lengths(c: Copy, entry_id: int, state: _Lengths) -> None:
    """The payload length of a copy whose digest was not verified, from the cumulative lengths (entry 0's
    is its length; else the previous entry's length subtracted), or from the digest length an earlier
    entry showed; whatever the verify step inferred otherwise. A copy whose bytes leave a digest of no
    type's length, or of another length than the ledger's earlier entries, is framed wrong (its size
    prefix damaged: the payload's place in it is unknown) and is not intact."""
    hdr = ENTRY_V2_HEADER_SIZE if c.fmt == 2 else ENTRY_V1_HEADER_SIZE
    if entry_id == 0:
        plen = c.length
    elif state.prev_entry == entry_id - 1 and state.prev_length >= 0:
        plen = c.length - state.prev_length
    elif state.digest_length >= 0:
        plen = len(c.data) - hdr - state.digest_length
    else:
        return   # (what the verify step inferred stands)
    dlen = len(c.data) - hdr - plen
    ok = 0 <= plen and dlen in DIGEST_LENGTH.values() and state.digest_length in (-1, dlen)
    c.payload_len = plen if ok else -1


def _verify(chunk: list[EntryRead], lid: LedgerId, plan: DigestPlan) -> None:
    """Frame every copy of the chunk and verify its digest: one verify_entry_digests call, so that a
    ledger whose type is sniffed in it has every copy of the chunk checked with that type."""
    framed: list[Copy] = []
    rows = []
    prefix = ENTRY_SIZE.sizeof()
    at = 0
    for e in chunk:
        for c in e.copies:
            head = _header(c.data)
            if head is None or (head[1], head[2], head[3]) != (lid.scope, lid.ledger, e.entry_id):
                continue
            c.fmt, c.length = head[0], head[5]
            rows.append((at, len(c.data), c.fmt, lid.scope, lid.ledger, e.entry_id, head[4], c.length))
            framed.append(c)
            at += prefix + len(c.data)
    if not framed:
        return
    buf = bytearray(at)
    for (off, size, *_rest), c in zip(rows, framed):
        buf[off:off + prefix] = build_struct(ENTRY_SIZE, size, what="an entry size prefix")
        buf[off + prefix:off + prefix + size] = c.data
    entries = np.array(rows, dtype=ENTRY_DTYPE)
    out, _hashes = verify_entry_digests(np.frombuffer(bytes(buf), np.uint8), entries, plan)
    status = verified_status(out)       # a DUMMY copy carries no digest: not verified
    for c, r, st in zip(framed, out.tolist(), status.tolist()):
        code, _src, _status, plen = r
        c.status, c.payload_len = st, plen
        c.digest_type = DigestType(code) if code else None


def _header(data: bytes) -> tuple[int, int, int, int, int, int] | None:
    """(format, scope, ledger, entry, lac, length) of a stored entry; None when too short for one."""
    if not data:
        return None
    if is_v2(data[0]):
        if len(data) < ENTRY_V2_HEADER_SIZE:
            return None
        h = ENTRY_V2_HEADER.parse(data[:ENTRY_V2_HEADER_SIZE])
        return 2, h.scope_id, h.ledger_id, h.entry_id, h.last_add_confirmed, h.length
    if len(data) < ENTRY_V1_HEADER_SIZE:
        return None
    h = ENTRY_V1_HEADER.parse(data[:ENTRY_V1_HEADER_SIZE])
    return 1, 0, h.ledger_id, h.entry_id, h.last_add_confirmed, h.length
