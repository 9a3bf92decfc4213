"""Builds a complete bookie on disk from a BookieSpec: cookies, journals, lastMark, entry logs, .idx."""
from __future__ import annotations

import os
from collections import defaultdict

import numpy as np

from bkdisk.bookie.model import BookieSpec, LedgerSpec, WrittenBookie
from bkdisk.entrylogs.writer import EntryLogWriter, write_preallocated
from bkdisk.formats import entrylog as fe
from bkdisk.formats import journal as fj
from bkdisk.formats.cookie import Cookie, serialize_cookie
from bkdisk.formats.digests import compute_digest, master_key
from bkdisk.formats.entry import package_entry
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import STATE_FENCED, IndexHeader
from bkdisk.formats.journal import LAC_BODY
from bkdisk.formats.lastmark import LastMark, build_last_mark, last_mark_name
from bkdisk.formats.paths import CURRENT_DIR, entry_log_name, index_relpath, journal_name
from bkdisk.indexfiles.writer import write_index
from bkdisk.journal.writer import JournalWriter


def _write_order(spec: BookieSpec) -> list[tuple[LedgerSpec, int]]:
    if not spec.interleave:
        return [(l, i) for l in spec.ledgers for i in range(len(l.payloads))]
    order, i = [], 0
    live = list(spec.ledgers)
    while live:
        nxt = []
        for l in live:
            if i < len(l.payloads):
                order.append((l, i))
                nxt.append(l)
        live = [l for l in nxt if i + 1 < len(l.payloads)]
        i += 1
    return order


def lac_body(l: LedgerSpec) -> bytes:
    """The explicit-LAC body a client sends: ledger id, LAC, digest over those 16 bytes."""
    head = LAC_BODY.build(dict(ledger_id=l.ledger_id, lac=l.explicit_lac, digest=b""))
    return head + compute_digest(l.digest_type, head, b"", l.password)


class _Journals:
    """Rolls journal files in one journal dir as the journal thread does."""

    def __init__(self, spec: BookieSpec, cur: str):
        self.spec, self.cur = spec, cur
        self.files: list[str] = []
        self.next_id = spec.first_journal_id
        self.w = self._open()

    def _open(self) -> JournalWriter:
        s = self.spec
        self.id = self.next_id
        self.next_id += 1
        path = os.path.join(self.cur, journal_name(self.id))
        self.files.append(path)
        return JournalWriter(path, version=s.journal_version, alignment=s.journal_alignment,
                             prealloc_size=s.journal_prealloc_size, group_bytes=s.journal_group_bytes)

    def append(self, body: bytes) -> None:
        if self.w.position > self.spec.journal_max_size:
            self.w.flush_group()
            self.w.close()
            self.w = self._open()
        self.w.append(body)

    def close(self) -> tuple[int, int]:
        pos = self.w.flush_group()
        self.w.close()
        return self.id, pos


def write_bookie(spec: BookieSpec, root: str) -> WrittenBookie:
    """Write ``spec`` under ``root`` (dirs relative to it) and return what was written."""
    if (spec.journal_version >= 6) != (spec.index_version >= 1):
        # BookKeeper's ServerConfiguration.validate pairs these two versions.
        raise ValueError("journal version >= 6 goes with index version 1, older journals with index version 0")
    if spec.storage not in ("index-files", "rocksdb"):
        raise ValueError(f"storage {spec.storage!r}: 'index-files' or 'rocksdb'")
    if spec.storage == "rocksdb":
        if len(spec.ledger_dirs) != 1:
            # Each DbLedgerStorage dir has its own entry logger (log ids per dir, ledger L in dir L % n):
            # this writer's one logger over several dirs would not be one.
            raise ValueError("a DbLedgerStorage bookie is written with one ledger dir")
        from bkdisk.bookie.db_index_writer import check_ledgers
        check_ledgers(spec.ledgers)
    jdirs = [os.path.join(root, d) for d in spec.journal_dirs]
    ldirs = [os.path.join(root, d) for d in spec.ledger_dirs]
    for d in jdirs + ldirs:
        os.makedirs(os.path.join(d, CURRENT_DIR), exist_ok=True)
    # A bookie records its dirs as configured; a configuration names them absolutely.
    cookie = serialize_cookie(Cookie(spec.cookie_layout_version, spec.bookie_id,
                                     tuple(os.path.abspath(d) for d in jdirs),
                                     tuple(os.path.abspath(d) for d in ldirs), spec.instance_id, None))
    for d in jdirs + ldirs:
        with open(os.path.join(d, CURRENT_DIR, "VERSION"), "wb") as f:
            f.write(cookie)

    journals = [_Journals(spec, os.path.join(d, CURRENT_DIR)) for d in jdirs] if spec.write_journal else []
    seen: set[LedgerId] = set()
    locations: dict[tuple[LedgerId, int], int] = {}
    stored: dict[tuple[LedgerId, int], bytes] = {}
    log_files: list[str] = []
    log_id = spec.first_log_id
    log_dir_i = 0

    def new_log() -> EntryLogWriter:
        nonlocal log_dir_i
        path = os.path.join(ldirs[log_dir_i % len(ldirs)], CURRENT_DIR, entry_log_name(log_id))
        log_dir_i += 1
        log_files.append(path)
        return EntryLogWriter(path, log_id)

    log = new_log()
    lengths: dict[LedgerId, int] = defaultdict(int)
    total = 0

    def journal_for(l: LedgerSpec) -> _Journals | None:
        return journals[l.ledger_id % len(journals)] if journals else None

    order = _write_order(spec)
    remaining: defaultdict[LedgerId, int] = defaultdict(int)
    for l, _ in order:
        remaining[l.lid] += 1
    for l, i in order:
        lid = l.lid
        j = journal_for(l)
        if lid not in seen:
            seen.add(lid)
            if j:
                j.append(fj.build_ledger_key_body(l.ledger_id, master_key(l.password), l.scope_id))
        eid = l.first_entry + i if l.entry_ids is None else l.entry_ids[i]
        lengths[lid] += len(l.payloads[i])
        length = lengths[lid] if l.lengths is None else l.lengths[i]
        e = package_entry(ledger_id=l.ledger_id, entry_id=eid, last_add_confirmed=eid - 1, length=length,
                          payload=l.payloads[i], digest_type=l.digest_type, password=l.password,
                          scope_id=l.scope_id, format_version=l.format_version).to_bytes()
        if j:
            j.append(e)
        if log.position > fe.HEADER_SIZE and log.position + fe.SIZE_PREFIX_SIZE + len(e) > spec.entry_log_size_limit:
            log.close(roll=True)
            log_id += 1
            log = new_log()
        locations[(lid, eid)] = log.append(e, l.scope_id, l.ledger_id)
        stored[(lid, eid)] = e
        total += len(e)
        remaining[lid] -= 1
        if remaining[lid] == 0 and j:
            if l.explicit_lac is not None and spec.journal_version >= 6:
                j.append(fj.build_explicit_lac_body(l.ledger_id, lac_body(l), l.scope_id))
            if l.fenced:
                j.append(fj.build_fence_body(l.ledger_id, l.scope_id))
    log.close(roll=False)
    write_preallocated(os.path.join(ldirs[log_dir_i % len(ldirs)], CURRENT_DIR, entry_log_name(log_id + 1)))
    for d in ldirs:
        with open(os.path.join(d, CURRENT_DIR, "lastId"), "w") as text:
            text.write(f"{log_id + 1:x}\n")

    marks = [j.close() for j in journals]
    for ji, (jid, pos) in enumerate(marks):
        for d in ldirs:
            with open(os.path.join(d, CURRENT_DIR, last_mark_name(ji, len(marks))), "wb") as f:
                f.write(build_last_mark(LastMark(jid, pos)))

    if spec.storage == "rocksdb":
        from bkdisk.bookie.db_index_writer import write_db_indexes
        write_db_indexes(os.path.join(ldirs[0], CURRENT_DIR), spec.ledgers, locations, lac_body)
        index_files: dict[LedgerId, str] = {}
    else:
        index_files = _write_index_files(spec, ldirs, locations)
    return WrittenBookie(root, spec, [f for j in journals for f in j.files], log_files, index_files, locations,
                         stored, marks[0] if marks else (0, 0), total)


def _write_index_files(spec: BookieSpec, ldirs: list[str], locations: dict[tuple[LedgerId, int], int]
                       ) -> dict[LedgerId, str]:
    """One ``.idx`` file per ledger (Interleaved/SortedLedgerStorage), ledger L in dir (L ^ scope) % n."""
    index_files: dict[LedgerId, str] = {}
    per_ledger: dict[LedgerId, dict[int, int]] = defaultdict(dict)
    for (lid, eid), loc in locations.items():
        per_ledger[lid][eid] = loc
    for l in spec.ledgers:
        lid = l.lid
        slots = per_ledger.get(lid, {})
        arr = np.zeros((max(slots) + 1) if slots else 0, dtype=np.uint64)
        for eid, loc in slots.items():
            arr[eid] = loc
        lac = lac_body(l) if (l.explicit_lac is not None and spec.index_version >= 1) else None
        hdr = IndexHeader(spec.index_version, master_key(l.password), STATE_FENCED if l.fenced else 0, lac)
        d = ldirs[(l.ledger_id ^ l.scope_id) % len(ldirs)]
        path = os.path.join(d, CURRENT_DIR, index_relpath(lid))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_index(path, hdr, arr, spec.page_size)
        index_files[lid] = path
    return index_files


def write_metadata_dir(spec: BookieSpec, folder: str, *, others: tuple[str, ...] = ("10.0.0.2:3181", "10.0.0.3:3181"),
                       ctime: int = 1700000000000) -> dict[LedgerId, str]:
    """Ledger metadata (format 3, ``<hex id>.bin``; scoped ledgers by qualified name) for every ledger
    of ``spec``: ensemble = this bookie + ``others``, write quorum = ensemble size, so this bookie
    holds every entry. CLOSED, or IN_RECOVERY for fenced ledgers, as a recovering client leaves it."""
    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.formats.metadata import serialize_metadata
    os.makedirs(folder, exist_ok=True)
    members = (spec.bookie_id, *others)
    out = {}
    for l in spec.ledgers:
        n = len(l.payloads)
        closed = not l.fenced
        md = LedgerMetadata(format_version=3, write_quorum=len(members), ensemble_size=len(members),
                            ack_quorum=max(1, len(members) - 1),
                            length=sum(len(p) for p in l.payloads) if closed else 0,
                            last_entry_id=(l.first_entry + n - 1) if closed else -1,
                            state="CLOSED" if closed else "IN_RECOVERY",
                            ensembles=((0, members),), digest_type=l.digest_type.name, password=l.password,
                            ctime=ctime + l.ledger_id % 1000, custom_metadata=(("application", b"bkdisk"),))
        name = (f"{l.ledger_id:x}" if l.scope_id == 0 else l.lid.qualified_name) + ".bin"
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(serialize_metadata(md))
        out[l.lid] = path
    return out
