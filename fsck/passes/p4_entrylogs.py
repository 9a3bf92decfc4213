"""Pass 4: entry logs: header, framing (with resync past damage), ledgers map against the body,
every entry's digest; each ledger dir's ``lastId``.

BookKeeper (DefaultEntryLogger at startup) reads ``current/lastId`` of every ledger dir as one hex
line; when it is missing or does not parse it falls back to the largest ``<hex>.log`` in that dir, and
it never allocates a log id whose file exists in any ledger dir. So a bad ``lastId`` is a warning
that says which id a restart would continue from, not an error.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from bkdisk.digests.kernels import DIGEST_BAD, DIGEST_UNKNOWN
from bkdisk.digests.plan import SOURCE_SNIFFED
from bkdisk.diskio.config import free_heap_returned
from bkdisk.diskio.mapped import DiskError, map_window, read_bytes
from bkdisk.entrylogs.arrays import EntryLogArrays, EntryLogScanArrays
from bkdisk.entrylogs.map_check import map_differences as _map_differences
from bkdisk.entrylogs.reader import Damage
from bkdisk.entrylogs.scan_parts import digest_parts, entries_between
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import ENTRY_V1_HEADER, V1_ENTRY_AT, V1_LAC_AT, V1_LEDGER_AT, V2_MARKER
from bkdisk.formats.entrylog import ENTRY_SIZE, SIZE_PREFIX_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding, given

LAST_ID = "lastId"
MAX_TEXT = 64   # a hex long and a newline; anything longer is not a lastId BookKeeper wrote
_REASON = {Damage.ZERO_SIZE: "a zero or negative size (zeroed region)",
           Damage.BAD_SIZE: "a size that is too small or runs past the data",
           Damage.BAD_HEADER: "bytes that are not an entry header",
           Damage.TRUNCATED: "the end of the file inside a size prefix"}


def run(ctx: CheckContext) -> Iterator[Finding]:
    free_heap_returned()   # (what the passes before freed: this pass's peak would stand on it)
    for lf in ctx.log_files:
        scan = ctx.log_scans.get(lf.path)
        if isinstance(scan, DiskError):
            if lf.path not in ctx.unreadable:
                yield Finding(Code.FILE_UNREADABLE, path=lf.path, detail=scan.what)
            continue
        if not isinstance(scan, EntryLogArrays) or scan.size == 0:
            continue
        yield from _check_log(scan, ctx, lf.log_id)
    yield from _duplicate_ids(ctx)
    if ctx.options.verify_digests:
        yield from _digest_summary(ctx)
    yield from _last_ids(ctx)


def _duplicate_ids(ctx: CheckContext) -> Iterator[Finding]:
    """An entry log id in two ledger dirs (a log copied, a disk restored beside another): the index's
    locations name a log by id alone, and BookKeeper reads the first dir's, whatever entries the index
    meant. (DbLedgerStorage numbers logs per dir: the same id in two dirs is two logs.)"""
    if ctx.per_dir_log_ids:
        return
    first: dict[int, str] = {}
    for lf in ctx.log_files:
        if lf.log_id in first:
            yield Finding(Code.LOG_ID_DUPLICATE, path=lf.path,
                          detail=f"{lf.log_id:x} in one ledger dir, found it in {first[lf.log_id]} and {lf.path}: "
                                 f"BookKeeper reads the first; locations meaning the other's entries read others")
        else:
            first[lf.log_id] = lf.path


def _digest_summary(ctx: CheckContext) -> Iterator[Finding]:
    """What the check knew or learned of each V1 ledger's digest type, and what it could not verify."""
    plan = ctx.digest_plan
    decided = ctx.log_digest_decisions   # as the entry-log scans left them: the journals' checks decide more
    unverified: dict[tuple[int, int], int] = {}
    for scan in ctx.log_scans.values():
        if not isinstance(scan, EntryLogScanArrays):
            continue
        for lo, digests in digest_parts(scan):   # (a scan made without a digest plan has none)
            m = np.flatnonzero(digests["status"] == DIGEST_UNKNOWN)
            if len(m):   # (the entries read only then)
                e = entries_between(scan, lo, lo + len(digests))[m]
                pairs, counts = np.unique(np.stack([e["scope"], e["ledger"]], axis=1), axis=0, return_counts=True)
                for (s, l), n in zip(pairs.tolist(), counts.tolist()):   # one item per ledger, not per entry
                    unverified[(s, l)] = unverified.get((s, l), 0) + n
    for code, keys in decided.by_code(SOURCE_SNIFFED):
        # One finding per digest type: a bookie without metadata may hold hundreds of thousands of ledgers.
        names = ", ".join(str(LedgerId(*k)) for k in keys[:10]) + (", ..." if len(keys) > 10 else "")
        one = keys[0] if len(keys) == 1 else (None, None)
        yield Finding(Code.DIGEST_SNIFFED, scope=one[0], ledger=one[1],
                      detail=f"{DigestType(code).name} ({len(keys)} ledger{'s' if len(keys) != 1 else ''}: {names})",
                      extra={"ledgers": keys})
    for key, n in sorted(unverified.items()):
        code = decided.get(key, (0, 0))[0]
        dt = DigestType(code) if code else None
        why = ("HMAC needs the ledger password" if dt == DigestType.HMAC else
               "DUMMY has no digest" if dt == DigestType.DUMMY else
               "its entries verify as neither CRC32C nor CRC32 (HMAC without a password, or DUMMY)")
        # what would have told the digest type and password: metadata, or this ledger's in it
        lacking = ("" if key in plan.known else "; give --metadata-dir" if ctx.metadata is None else
                   "; the ledger metadata given does not hold this ledger")
        yield Finding(Code.DIGEST_NOT_VERIFIED, scope=key[0], ledger=key[1], detail=f"{n} entries; {why}{lacking}")


def _torn_write(ctx: CheckContext, scan: EntryLogArrays, log_id: int, off: int) -> bool:
    """An entry cut short at the end of the current log (no ledgers map yet) that no index points at
    and that the journal still holds for replay: what a crash leaves, not damage."""
    if scan.ledgers_map is not None:
        return False
    if ctx.dirs.storage_kind == "index-files":
        locs = ctx.index_inventory.locations
        if len(locs) and bool(np.any((locs["log"] == log_id) & (locs["pos"] == off + SIZE_PREFIX_SIZE))):
            return False
    with map_window(scan.path, off + SIZE_PREFIX_SIZE, V1_LAC_AT) as w:   # ledger id and entry id
        head = w.tobytes()
    if len(head) < V1_LAC_AT or head[0] >= V2_MARKER:
        return False
    return ctx.journal_facts.pending.holds(0, ENTRY_V1_HEADER.ledger_id.parse(head[V1_LEDGER_AT:V1_ENTRY_AT]),
                                           ENTRY_V1_HEADER.entry_id.parse(head[V1_ENTRY_AT:V1_LAC_AT]))


def _check_log(scan: EntryLogArrays, ctx: CheckContext, log_id: int) -> Iterator[Finding]:
    p = scan.path
    if scan.header_error is not None:
        e = scan.header_error
        yield Finding(Code.LOG_HEADER_BAD, path=p, offset=e.offset, detail=f"{e.expected}, found {e.found}")
    if scan.map_error is not None:
        e = scan.map_error
        yield Finding(Code.LEDGERS_MAP_BAD, path=p, offset=e.offset, detail=f"{e.expected}, found {e.found}")
    for prob in scan.problems:
        off, reason, resumed = int(prob["offset"]), Damage(int(prob["reason"])), int(prob["resumed_at"])
        size = _size_at(p, off)
        runs_past = size is not None and size > 0 and off + SIZE_PREFIX_SIZE + size > scan.data_end
        if runs_past and resumed >= scan.data_end and _torn_write(ctx, scan, log_id, off):
            left = scan.data_end - off - SIZE_PREFIX_SIZE
            yield Finding(Code.LOG_TORN_TAIL, path=p, offset=off, detail=f"size {size} with {left} bytes left")
        elif reason == Damage.TRUNCATED or (runs_past and resumed >= scan.data_end):
            yield Finding(Code.LOG_TRUNCATED, path=p, offset=off,
                          detail=f"size {size} at offset {off} with {scan.data_end - off - SIZE_PREFIX_SIZE} bytes left"
                          if size is not None else f"{scan.data_end - off} bytes of a size prefix")
        else:
            yield Finding(Code.LOG_FRAMING_BROKEN, path=p, offset=off, detail=f"{_REASON[reason]}; resumed at offset "
                          f"{resumed}", extra={"resumed_at": resumed})
    if scan.ledgers_map is not None and scan.map_error is None:
        map_offset = given(scan.header, "the header that locates the ledgers map").ledgers_map_offset
        differ = ctx.map_differences.pop(p, None)   # (found by the log's scan thread; else counted here)
        for (s, l), a, b in _map_differences(scan) if differ is None else differ:
            yield Finding(Code.LEDGERS_MAP_MISMATCH, path=p, offset=map_offset, scope=s, ledger=l,
                          detail=f"ledger {LedgerId(s, l)}: map says {a} bytes, the entries add up to {b}")
    for lo, dig in digest_parts(scan) if isinstance(scan, EntryLogScanArrays) else ():
        bad = np.flatnonzero(dig["status"] == DIGEST_BAD)
        if len(bad) == 0:
            continue
        rows = entries_between(scan, lo, lo + len(dig))[bad]   # (read only when some are bad)
        for r, i in zip(rows, bad.tolist()):
            yield Finding(Code.DIGEST_MISMATCH, path=p, offset=int(r["offset"]), scope=int(r["scope"]),
                          ledger=int(r["ledger"]), entry=int(r["entry"]), detail=DigestType(int(dig["type"][i])).name)


def _size_at(path: str, off: int) -> int | None:
    with map_window(path, off, SIZE_PREFIX_SIZE) as w:
        return ENTRY_SIZE.parse(w.tobytes()) if len(w) == SIZE_PREFIX_SIZE else None


def _parse_last_id(raw: bytes) -> int | None:
    """The id as BookKeeper's readLastLogId takes it: the first line, hex; None when that fails."""
    line = raw.split(b"\n", 1)[0].strip(b"\r")
    try:
        value = int(line.decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        return None
    return value if value > 0 else None


def _last_ids(ctx: CheckContext) -> Iterator[Finding]:
    """Each ledger dir's ``lastId``: the hex id of the newest entry log, which a restart reads."""
    per_dir: dict[int, list[int]] = {}
    for lf in ctx.log_files:
        per_dir.setdefault(lf.dir_index, []).append(lf.log_id)
    newest_anywhere = max((i for ids in per_dir.values() for i in ids), default=None)
    for di, d in enumerate(ctx.dirs.ledger_dirs):
        newest = max(per_dir.get(di, []), default=None) if ctx.per_dir_log_ids else newest_anywhere
        if newest is None:
            continue   # no entry log: a fresh dir has no lastId yet
        path = os.path.join(d, CURRENT_DIR, LAST_ID)
        fallback = (f"a restart falls back to the largest entry-log id in this dir "
                    f"({max(per_dir[di]):x}.log) and skips every id whose file exists"
                    if per_dir.get(di) else "a restart starts log ids again from 1, skipping ids whose file exists")
        if not os.path.lexists(path):
            if not ctx.not_listed(d):   # (else unknown: the folder is reported)
                yield Finding(Code.LASTID_BAD, path=path, detail=f"missing; {fallback}")
            continue
        try:
            raw = read_bytes(path)[:MAX_TEXT]
        except DiskError as e:
            if path not in ctx.unreadable:
                yield Finding(Code.LASTID_BAD, path=path, detail=f"{e.what}; {fallback}")
            continue
        value = _parse_last_id(bytes(raw))
        if value is None:
            shown = bytes(raw[:16]).hex(" ") or "an empty file"
            yield Finding(Code.LASTID_BAD, path=path, offset=0, detail=f"found {shown}; {fallback}")
        elif value < newest:
            yield Finding(Code.LASTID_BAD, path=path, offset=0,
                          detail=f"found {value:x}, but {newest:x}.log exists; a restart takes the larger id from "
                                 f"the log files")
