"""Pass 6: journals: headers, framing, torn tails, lastMark inside an existing journal and in every
ledger dir, and the records after lastMark that a restart would replay (and whether ledger storage
holds them).

BookKeeper writes ``lastMark`` (``lastMark.<i>`` with several journal dirs) into every ledger dir at
each checkpoint and, at startup (Journal.LastLogMark.readLog), reads it from every ledger dir,
skips one it cannot read and keeps the largest mark. A mark missing from one dir therefore changes
nothing while another dir has it; the report says which mark a restart would use.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from bkdisk.diskio.mapped import DiskError, read_range
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import MAX_VERSION, PADDING_MIN_VERSION, RECORD_LENGTH_SIZE, SECTOR_SIZE, RecordKind
from bkdisk.formats.lastmark import LAST_MARK_SIZE, LastMark
from bkdisk.formats.paths import CURRENT_DIR, journal_name, journal_name_refused
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.explicit_lacs import replayed_lac_findings
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.journal_tails import records_after
from bkdisk.fsck.keyjoin import KeySet
from bkdisk.fsck.master_keys import replayed_key_findings
from bkdisk.fsck.replay_fate import (
    entries_replay_skips,
    index_unlisted,
    marked_journal_missing,
    pending_findings,
    storage_unlisted,
)
from bkdisk.journal.arrays import JOURNAL_DTYPE, JournalArrays
from bkdisk.journal.digests import bad_data_records
from bkdisk.journal.reader import EndKind
from bkdisk.journal.scan import scan_journal
from bkdisk.journal.scan_parts import data_rows, record_parts
from bkdisk.journal.search import find_record_pair

DIGESTS = "journal_digests"   # ctx.shared's name for bad_records_of_journals


def run(ctx: CheckContext) -> Iterator[Finding]:
    yield from _refused_names(ctx)
    newest: dict[int, int] = {}
    for jf in ctx.journal_files:
        newest[jf.dir_index] = max(newest.get(jf.dir_index, -1), jf.journal_id)
    past: list[PastTheEnd] = []   # records after the end of journals a restart replays
    for jf in ctx.journal_files:
        scan = ctx.journal_scans.get(jf.path)
        if isinstance(scan, DiskError):
            if jf.path not in ctx.unreadable:
                yield Finding(Code.FILE_UNREADABLE, path=jf.path, detail=scan.what)
            continue
        if isinstance(scan, FormatError):
            yield Finding(Code.JOURNAL_HEADER_BAD, path=jf.path, offset=scan.offset,
                          detail=f"{scan.expected}, found {scan.found}")
            continue
        if not isinstance(scan, JournalArrays):
            continue
        mark = ctx.effective_last_mark(jf.dir_index)
        before_mark = mark is not None and jf.journal_id < mark.log_id
        if scan.size == 0:
            # Created, and nothing reached the disk: BookKeeper reads a file without a header as a
            # version-1 journal and finds no record in it.
            code = Code.JOURNAL_EMPTY if jf.journal_id == newest[jf.dir_index] or before_mark else \
                Code.JOURNAL_EMPTY_REPLAYED
            yield Finding(code, path=jf.path, offset=0)
            continue
        yield from _check_journal(ctx, scan, is_newest=jf.journal_id == newest[jf.dir_index], before_mark=before_mark)
        if EndKind(scan.end_kind) == EndKind.GARBAGE and not before_mark:
            found = _records_past_the_end(ctx, scan)
            if found is not None:
                past.append(found)
    yield from _check_last_marks(ctx)
    yield from replayed_key_findings(ctx)
    yield from replayed_lac_findings(ctx)
    yield from _replay(ctx, past)
    yield from _last_mark_in_every_dir(ctx)


def _check_journal(ctx: CheckContext, scan: JournalArrays, *, is_newest: bool, before_mark: bool) -> Iterator[Finding]:
    p = scan.path
    if scan.version == 1:
        yield Finding(Code.JOURNAL_HEADER_BAD, path=p, offset=0,
                      detail="no 'BKLG' magic: not a journal written by any writable BookKeeper version "
                             "(BookKeeper would read it as a version-1 journal)")
        return
    kind, off = EndKind(scan.end_kind), scan.end_offset
    if ctx.options.verify_digests:
        yield from _journal_digests(ctx, scan, is_newest=is_newest, before_mark=before_mark,
                                    clean_end=kind in (EndKind.CLEAN, EndKind.EOF))
    if kind == EndKind.GARBAGE:
        yield Finding(Code.JOURNAL_TAIL_GARBAGE, path=p, offset=off, detail=scan.end_detail + _version_hint(scan))
    elif kind == EndKind.TORN:
        after = records_after(ctx, p, off) if is_newest or before_mark else None
        if (is_newest or before_mark) and after is None:
            # A crash tears the journal being written; one wholly before lastMark is never read again.
            code = Code.JOURNAL_OLD_TORN_TAIL if before_mark else Code.JOURNAL_TORN_TAIL
            yield Finding(code, path=p, offset=off, detail=scan.end_detail, cut_at=off)
        else:
            detail = scan.end_detail if after is None else f"{scan.end_detail}; {after}: a damaged length, not torn"
            yield Finding(Code.JOURNAL_RECORD_CORRUPT, path=p, offset=off, detail=detail)
    elif kind == EndKind.INVALID:
        yield Finding(Code.JOURNAL_RECORD_CORRUPT, path=p, offset=off, detail=scan.end_detail)


def _refused_names(ctx: CheckContext) -> Iterator[Finding]:
    """Names in a journal dir's current/ that BookKeeper's journal listing throws on."""
    for d in ctx.dirs.journal_dirs:
        for n in ctx.listing(d):
            why = journal_name_refused(n)
            if why is not None:
                yield Finding(Code.JOURNAL_NAME_BAD, path=os.path.join(d, CURRENT_DIR, n), detail=why)


def _version_hint(scan: JournalArrays) -> str:
    """A version 2-4 header (8 bytes, records from offset 8) over zeros up to offset 512 and records from
    there: the sector header versions 5 and 6 write, its version field damaged. BookKeeper reads the
    version the header says, finds the zero length at 8 and takes nothing from the journal."""
    if scan.version >= PADDING_MIN_VERSION or scan.end_offset != scan.header_size or scan.size <= SECTOR_SIZE:
        return ""
    try:
        head = read_range(scan.path, 0, SECTOR_SIZE + RECORD_LENGTH_SIZE)
    except DiskError:
        return ""
    if any(head[scan.header_size:SECTOR_SIZE]) or not any(head[SECTOR_SIZE:]):
        return ""
    return (f"; the records start at {SECTOR_SIZE}, after a sector header as versions {PADDING_MIN_VERSION} and "
            f"{MAX_VERSION} write it: the header's version {scan.version} is damaged (BookKeeper, reading it, "
            f"finds the zero length at {scan.header_size} and takes no record from the journal)")


# A journal a restart replays whose records go on past the zero length that ends it: its path, that
# length's offset, where the records past it start, and their data records.
PastTheEnd = tuple[str, int, int, np.ndarray]


def _records_past_the_end(ctx: CheckContext, scan: JournalArrays) -> PastTheEnd | None:
    """Records after the zero length that ends a journal a restart replays (BookKeeper's replay stops at
    that length), walked within the journals' share of the memory limit; their data records are held
    for _replay, which looks them up in ledger storage with the records after lastMark."""
    at = find_record_pair(scan.path, scan.end_offset + 1)
    if at < 0:
        return None
    sink = ctx.journal_store.sink()
    try:
        after = scan_journal(scan.path, at, window=ctx.options.memory.window, sink=sink)
        data = [recs[recs["kind"] == RecordKind.DATA] for _lo, recs, _f in record_parts(after)]
    except (DiskError, FormatError):   # (what stops this walk is the garbage the warning names)
        return None
    finally:
        sink.close()   # (the records, held or spilled: their data records are kept below)
    rows = np.concatenate(data) if data else np.zeros(0, JOURNAL_DTYPE)
    return (scan.path, scan.end_offset, at, rows) if len(rows) else None


def _not_replayed(past: PastTheEnd, held: np.ndarray, unlisted: str | None) -> Iterator[Finding]:
    """Entries past a journal's end that ledger storage does not hold (``held``: per data record) are lost
    on restart: the zeros overwrote acknowledged records. Those it holds are what a reused journal file
    keeps past its new end (journalReuseFiles): the warning on its end stands."""
    path, end, at, data = past
    missing = np.flatnonzero(~held)
    if len(missing) == 0:
        return
    r = data[missing[0]]
    lid = LedgerId(int(r["scope"]), int(r["ledger"]))
    yield Finding(Code.JOURNAL_RECORDS_NOT_REPLAYED, path=path, offset=end, scope=lid.scope, ledger=lid.ledger,
                  entry=int(r["entry"]),
                  detail=f"{len(missing)} of the {len(data)} entries in records from offset {at} on (the first: ledger "
                         f"{lid} entry {int(r['entry'])} at offset {int(r['offset'])}) are not in ledger storage; "
                         f"BookKeeper's replay stops at the zero length at {end}, so a restart loses them" +
                         (f" (unless they are in {unlisted}, which could not be listed)" if unlisted else ""))


def bad_records_of_journals(ctx: CheckContext) -> dict[str, np.ndarray]:
    """Per journal whose digests pass 6 verifies, the rows (among its data records) whose digest is
    bad: the heavy part of the check, run once for every journal in order (it may decide ledgers'
    digest types in the shared plan), on the background thread with ``--jobs`` above 1."""
    out: dict[str, np.ndarray] = {}
    for jf in ctx.journal_files:
        ctx.keep_going()
        scan = ctx.journal_scans.get(jf.path)
        if isinstance(scan, JournalArrays) and scan.version != 1:
            out[jf.path] = _bad_records(ctx, scan)
    return out


def _journal_digests(ctx: CheckContext, scan: JournalArrays, *, is_newest: bool, before_mark: bool,
                     clean_end: bool) -> Iterator[Finding]:
    """Verify journal data records like entry-log entries; a bad last record of the newest journal
    followed only by zeros is a torn write (its length landed, its body did not)."""
    bad = ctx.shared(DIGESTS, lambda: bad_records_of_journals(ctx)).get(scan.path)
    if bad is None:   # (a scan put in the context by hand)
        bad = _bad_records(ctx, scan)
    if len(bad) == 0:
        return
    # Only the bad rows are taken out of the records, read a part at a time.
    at, rows, n_data = data_rows(scan, bad)
    last, n_records = n_data - 1, scan.count()
    for i, k, r in zip(bad.tolist(), at.tolist(), rows):
        off = int(r["offset"])
        lid = LedgerId(int(r["scope"]), int(r["ledger"]))
        if i == last and (is_newest or before_mark) and clean_end and _only_padding_after(scan, k, n_records):
            code = Code.JOURNAL_OLD_TORN_TAIL if before_mark else Code.JOURNAL_TORN_TAIL
            yield Finding(code, path=scan.path, offset=off, scope=lid.scope, ledger=lid.ledger,
                          entry=int(r["entry"]), detail="the last record's digest does not match (a torn write)",
                          cut_at=off)
        else:
            yield Finding(Code.JOURNAL_RECORD_CORRUPT, path=scan.path, offset=off, scope=lid.scope, ledger=lid.ledger,
                          entry=int(r["entry"]), detail=f"ledger {lid} entry {int(r['entry'])}: digest mismatch")


def _only_padding_after(scan: JournalArrays, k: int, n_records: int) -> bool:
    """Record ``k`` is the journal's last but for a padding record (a flush pads the journal after its
    last record): a torn write ends the journal. A record of another kind after it (a fence, a key) was
    written after it: the bad record is corrupt mid-journal, and cutting there would drop that record."""
    return k >= n_records - 2 and all(int(scan.row(j)["kind"]) == RecordKind.PADDING for j in range(k + 1, n_records))


def _bad_records(ctx: CheckContext, scan: JournalArrays) -> np.ndarray:
    """The rows among ``scan``'s data records whose digest is bad."""
    return bad_data_records(scan, ctx.digest_plan, ctx.options.memory.window)


def _check_last_marks(ctx: CheckContext) -> Iterator[Finding]:
    by_name: dict[str, dict[str, LastMark]] = {}
    read = ctx.last_mark_names
    for p, m in ctx.last_marks.items():
        if os.path.basename(p) not in read:   # (a leftover of another layout: BookKeeper does not open it)
            n = len(ctx.dirs.journal_dirs)
            yield Finding(Code.LASTMARK_NOT_READ, path=p,
                          detail=f"with {n} journal dir{'s' if n > 1 else ''} it reads {', '.join(read)} only")
            continue
        if isinstance(m, DiskError):
            if p not in ctx.unreadable:
                yield Finding(Code.FILE_UNREADABLE, path=p, detail=m.what)
            continue
        if isinstance(m, FormatError):
            yield Finding(Code.LASTMARK_BAD, path=p, offset=m.offset, detail=m.found)
            continue
        if isinstance(m, LastMark):
            by_name.setdefault(os.path.basename(p), {})[p] = m
            yield from _trailing_bytes(p, m)
    if ctx.journal_files and not by_name:
        for d in ctx.dirs.ledger_dirs:
            if not ctx.not_listed(d):   # (not listed: pass 1 reports it)
                yield Finding(Code.LASTMARK_MISSING, path=os.path.join(d, CURRENT_DIR))
    for name, marks in by_name.items():
        if len(set(marks.values())) > 1:
            yield Finding(Code.LASTMARK_DISAGREE, path=next(iter(marks)),
                          detail="; ".join(f"{p}: journal {m.log_id:x}.txn offset {m.offset}"
                                           for p, m in sorted(marks.items())))
        ji = read.index(name)
        mark = max(marks.values())
        path = max(marks, key=lambda p: marks[p])
        if mark.log_id <= 0:
            # BookKeeper looks for the marked journal only when its id is above 0 (and readLog keeps its
            # initial (0, 0) over a lower mark): a restart replays every journal.
            continue
        jfs = {jf.journal_id: jf for jf in ctx.journal_files if jf.dir_index == ji}
        jf = jfs.get(mark.log_id)
        if jf is None:
            if marked_journal_missing(ctx, ji, mark):   # (else its dir could not be listed: pass 1 says so)
                jdir = ctx.dirs.journal_dirs[ji] if ji < len(ctx.dirs.journal_dirs) else ji
                yield Finding(Code.LASTMARK_MISSING_JOURNAL, path=path, offset=0,
                              detail=f"{journal_name(mark.log_id)} in journal dir {jdir}")
            continue
        scan = ctx.journal_scans.get(jf.path)
        if isinstance(scan, JournalArrays):
            kind = EndKind(scan.end_kind)
            limit = scan.end_offset if kind in (EndKind.CLEAN, EndKind.EOF, EndKind.GARBAGE) else scan.records_end()
            if kind in (EndKind.CLEAN, EndKind.GARBAGE):
                # BookKeeper's replay stops after reading the zero length that ends the records, and the
                # flush after it checkpoints that position: a mark up to 4 bytes past their end.
                limit += RECORD_LENGTH_SIZE
            if mark.offset > limit:
                yield Finding(Code.LASTMARK_PAST_END, path=path, offset=8,
                              detail=f"offset {mark.offset} in {jf.path}, whose records end at {limit}")
            elif 0 < mark.offset < scan.records_end() and not ctx.journal_facts.mark_on_record.get(jf.path, True):
                # BookKeeper's replay reads a record length at the mark: inside a record (or the header) it
                # reads other bytes as one, and stops or fails where the check counts records replayed.
                yield Finding(Code.LASTMARK_MID_RECORD, path=path, offset=8,
                              detail=f"offset {mark.offset} in {jf.path} is not where a record starts")


def _trailing_bytes(path: str, mark: LastMark) -> Iterator[Finding]:
    """A lastMark longer than 16 bytes: BookKeeper reads its first 16 and never looks further."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size > LAST_MARK_SIZE:
        yield Finding(Code.LASTMARK_TRAILING_BYTES, path=path, offset=LAST_MARK_SIZE,
                      detail=f"{size} bytes; BookKeeper reads the first 16, journal {journal_name(mark.log_id)} "
                             f"offset {mark.offset}, and ignores the {size - LAST_MARK_SIZE} after them")


def _replay(ctx: CheckContext, past: list[PastTheEnd]) -> Iterator[Finding]:
    """The records after lastMark (what a restart replays) and the records past the end of journals
    it replays (what it would not), looked up in ledger storage together: one pass over its entries."""
    pend = ctx.journal_facts.pending
    if not pend and not past:
        return
    ids = [np.concatenate([col, *(d[name] for _p, _e, _a, d in past)])
           for name, col in zip(("scope", "ledger", "entry"), pend.ids())]
    held = _held_in_storage(ctx, ids)
    unlisted = storage_unlisted(ctx)
    n = len(pend)
    for one in past:
        yield from _not_replayed(one, held[n:n + len(one[3])], unlisted)
        n += len(one[3])
    if not pend:
        return
    said, replayed = pending_findings(ctx, pend, held, unlisted)
    yield from said
    if unlisted:
        return
    missing = replayed[~held[replayed]]
    told = [t for t in pend.tuples(missing[:1000]) if not index_unlisted(ctx, t[2])]
    skipped = entries_replay_skips(ctx, told) or set()
    md = ctx.metadata
    for p, o, lid, e in told:
        code, detail = Code.REPLAY_NOT_IN_STORAGE, "(a restart replays it into storage)"
        if (p, o) in skipped:
            listed = md is not None and lid in md
            code = Code.REPLAY_ENTRY_DROPPED if listed else Code.REPLAY_LEDGER_UNKNOWN
            detail = ("and a restart skips it: storage holds no such ledger and no ledger-key record replayed "
                      "before it gives its key, so the replay takes the ledger as deleted" +
                      ("" if listed else "; its metadata lists no such ledger" if md is not None else
                       " (--metadata-dir tells a deleted ledger from a lost one)"))
        yield Finding(code, path=p, offset=o, scope=lid.scope, ledger=lid.ledger, entry=e,
                      detail=f"ledger {lid} entry {e} is only in the journal {detail}")


def _held_in_storage(ctx: CheckContext, ids: list[np.ndarray]) -> np.ndarray:
    """Per (scope, ledger, entry) of ``ids``, whether ledger storage holds that entry (an index location,
    or an entry of a scanned log for DbLedgerStorage)."""
    inv = ctx.index_inventory if ctx.dirs.storage_kind == "index-files" else None
    # The ids as a set, each location or entry looked up in it a chunk at a time (no Python object per
    # location; the locations may be spilled).
    wanted = KeySet(ids)
    found = np.zeros(len(ids[0]), bool)

    def mark(scope: np.ndarray, ledger: np.ndarray, entry: np.ndarray) -> None:
        i = wanted.index_of([scope, ledger, entry])
        found[i[i >= 0]] = True

    if inv is not None:
        files, locs = inv.files, inv.locations
        for k0 in range(0, len(locs), 1 << 20):
            c = locs[k0:k0 + (1 << 20)]
            mark(files["scope"][c["file"]], files["ledger"][c["file"]], c["entry"])
    else:
        from bkdisk.entrylogs.arrays import EntryLogArrays
        from bkdisk.entrylogs.scan_parts import entry_parts
        for s in ctx.log_scans.values():
            if isinstance(s, EntryLogArrays):
                for _lo, ents in entry_parts(s):
                    mark(ents["scope"], ents["ledger"], ents["entry"])
    # (an id equal to another one is held when either is: the set maps both to one row)
    return found[wanted.own_rows()]


def _last_mark_in_every_dir(ctx: CheckContext) -> Iterator[Finding]:
    """A lastMark file missing from one ledger dir while another dir has it."""
    if len(ctx.dirs.ledger_dirs) < 2:
        return
    names: dict[str, dict[str, LastMark | Exception]] = {}
    for p, m in ctx.last_marks.items():
        if os.path.basename(p) in ctx.last_mark_names:
            names.setdefault(os.path.basename(p), {})[os.path.dirname(os.path.dirname(p))] = m
    for name, by_dir in sorted(names.items()):
        good = {d: m for d, m in by_dir.items() if isinstance(m, LastMark)}
        if good:
            d_best = max(good, key=lambda d: good[d])
            best = good[d_best]
            restart = (f"a restart reads every ledger dir's {name} and keeps the largest, journal "
                       f"{journal_name(best.log_id)} offset {best.offset} from {d_best}, and replays from there")
        else:
            restart = f"no ledger dir has a readable {name}: a restart replays every journal"
        for d in ctx.dirs.ledger_dirs:
            if d not in by_dir and not ctx.not_listed(d):   # (else unknown: pass 1)
                yield Finding(Code.LASTMARK_MISSING_IN_DIR, path=os.path.join(d, CURRENT_DIR),
                              detail=f"{name} is missing; {restart}")
