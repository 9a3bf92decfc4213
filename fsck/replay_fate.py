"""What a restart does with an entry after lastMark that ledger storage does not hold yet.

BookieImpl's replay adds a journal entry through the ledger's handle, made with the key a ledger-key
record replayed before it gave (its masterKeyCache) or, failing that, the key storage holds
(readMasterKey). When storage knows no such ledger (no index file; not in DbLedgerStorage's ledgers
index) and no ledger-key record after lastMark gives its key, readMasterKey throws NoLedgerException
and the replay skips the entry, taking the ledger as deleted: a ledger its metadata still lists loses
the entry. A journal dir whose lastMark names a journal it lacks stops the replay before its journals
(and those of the dirs after it): the bookie shuts down.
"""
from __future__ import annotations

import os

import numpy as np

from bkdisk.diskio.distinct import distinct, members
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.lastmark import LastMark
from bkdisk.formats.paths import CURRENT_DIR, journal_name
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.findings import Finding
from bkdisk.journal.pending import PendingRecords


def entries_replay_skips(ctx: CheckContext, told: list[tuple[str, int, LedgerId, int]]) -> set[tuple[str, int]] | None:
    """Of the entries ``told`` (journal path, record offset, ledger, entry id) after lastMark, where those
    a restart's replay skips lie; None when the check cannot tell (a folder not listed, an index that
    could not be read). The replay reads the journal dirs in turn, each journal's records in order: an
    entry is keyed by a ledger-key record before it, else by what storage holds."""
    if ctx.unlisted or ctx.dirs.storage_kind not in ("index-files", "rocksdb"):
        return None
    keyed_at = ctx.journal_facts.replayed_key_at
    order = {jf.path: (jf.dir_index, jf.journal_id) for jf in ctx.journal_files}

    def keyed_before(path: str, offset: int, lid: LedgerId) -> bool:
        first = keyed_at.get(lid)   # (the first key's first record: the ledger's first key record replayed)
        return first is not None and (order[first[0][0]], first[0][1]) < (order[path], offset)

    unkeyed = [(p, o, lid) for p, o, lid, _e in told if not keyed_before(p, o, lid)]
    asked = {lid for _p, _o, lid in unkeyed}
    if not asked:
        return set()
    want = np.array(sorted({lid.ledger for lid in asked}), np.uint64)
    known: set[LedgerId] = set()
    if ctx.dirs.storage_kind == "index-files":
        files = ctx.index_inventory.files
        hit = members(files["ledger"], want)
        known = set(map(LedgerId, files["scope"][hit].tolist(), files["ledger"][hit].tolist()))
    else:
        from bkdisk.fsck import dbindex
        from bkdisk.rocksdbfiles.dbindex import ledger_ids
        for _di, _current, idx in dbindex.read(ctx):
            if not dbindex.is_index(idx):
                return None
            ids = ledger_ids(idx).view(np.uint64)   # (the index keys ids as signed longs)
            known |= {LedgerId(0, x) for x in ids[members(ids, want)].tolist()}
    return {(p, o) for p, o, lid in unkeyed if lid not in known}


def storage_unlisted(ctx: CheckContext) -> str | None:
    """A ledger or index dir's ``current`` folder that could not be listed (pass 1 reports it): what
    ledger storage holds is then unknown, and an entry not found in the rest may be there."""
    return next((os.path.join(d, CURRENT_DIR) for d in (*ctx.dirs.ledger_dirs, *ctx.dirs.effective_index_dirs)
                 if ctx.not_listed(d)), None)


def index_unlisted(ctx: CheckContext, lid: LedgerId) -> bool:
    """Index files: a folder on the path of ``lid``'s index could not be listed (pass 3 reports it), so
    whether storage holds its entries is unknown."""
    return ctx.dirs.storage_kind == "index-files" and ctx.index_inventory.unlisted_folder_of(lid) is not None


def marked_journal_missing(ctx: CheckContext, ji: int, mark: LastMark) -> bool:
    """Whether journal dir ``ji`` lacks the journal its lastMark ``mark`` names, as BookieImpl's replay checks
    before reading the dir: only a mark above 0 names one (readLog keeps its initial (0, 0) over a lower
    mark); a dir that could not be listed may hold it (pass 1 reports it); an index past the journal dirs
    found names a dir that holds none."""
    if mark.log_id <= 0 or (ji < len(ctx.dirs.journal_dirs) and ctx.not_listed(ctx.dirs.journal_dirs[ji])):
        return False
    return not any(jf.dir_index == ji and jf.journal_id == mark.log_id for jf in ctx.journal_files)


REPLAY_STOP = "replay_stop"   # ctx.shared's name for replay_stop's answer (in a 1-tuple: None is one)
JOURNAL_DIR_OF = "journal_dir_of"   # ctx.shared's name for each journal's dir index, by path


def replay_stop(ctx: CheckContext) -> tuple[int, str] | None:
    """Where a restart stops replaying, as (journal dir index, the journal's name): the first journal dir,
    in the order BookieImpl replays them, whose marked journal is missing (``marked_journal_missing``).
    Its replay throws ("Recovery log ... is missing") before reading any of its journals and the bookie
    shuts down, so neither its records nor those of the dirs after it are replayed. None when every
    dir's replay starts. Found once a check."""
    return ctx.shared(REPLAY_STOP, lambda: (_first_stop(ctx),))[0]


def replay_reads(ctx: CheckContext, path: str) -> bool:
    """Whether a restart's replay reaches the journal at ``path``: it lies in a dir before the one where the
    replay stops (``replay_stop``), or the replay does not stop."""
    stop = replay_stop(ctx)
    if stop is None:
        return True
    dir_of = ctx.shared(JOURNAL_DIR_OF, lambda: {jf.path: jf.dir_index for jf in ctx.journal_files})
    return dir_of.get(path, stop[0]) < stop[0]


def _first_stop(ctx: CheckContext) -> tuple[int, str] | None:
    for ji in range(len(ctx.dirs.journal_dirs)):
        mark = ctx.effective_last_mark(ji)
        if mark is not None and marked_journal_missing(ctx, ji, mark):
            return ji, journal_name(mark.log_id)
    return None


def pending_findings(ctx: CheckContext, pend: PendingRecords, held: np.ndarray,
                     unlisted: str | None) -> tuple[list[Finding], np.ndarray]:
    """REPLAY_PENDING for the records after lastMark (``pend``; ``held``: whether storage holds each),
    those a restart replays apart from those it stops before; and the rows of the records it replays."""
    stop = replay_stop(ctx)
    stopped = np.zeros(len(pend), bool)
    if stop is not None:
        stopped = np.array([not replay_reads(ctx, p) for p in pend.paths], bool)[pend.rows["journal"]]
    replayed = np.flatnonzero(~stopped)
    said = [pending_finding(ctx, pend, np.flatnonzero(stopped), held, unlisted, stop)] if stopped.any() else []
    if len(replayed):
        said.append(pending_finding(ctx, pend, replayed, held, unlisted))
    return said, replayed


def pending_finding(ctx: CheckContext, pend: PendingRecords, rows: np.ndarray, held: np.ndarray, unlisted: str | None,
                    stopped_at: tuple[int, str] | None = None) -> Finding:
    """REPLAY_PENDING for the records ``rows`` of ``pend``: replayed on restart, or not, where the replay
    stops before their journal dir (``stopped_at``: replay_stop's)."""
    n, kept = len(rows), int(held[rows].sum())
    names = sorted({os.path.basename(pend.paths[j]) for j in distinct(pend.rows["journal"][rows]).tolist()})
    first = next(pend.tuples(rows[:1]))
    fate = "would be replayed on restart" if stopped_at is None else \
        (f"are not replayed: a restart stops at journal dir {ctx.dirs.journal_dirs[stopped_at[0]]}, whose lastMark "
         f"names {stopped_at[1]}, which it lacks, and the bookie shuts down")
    rest = "" if kept == n else \
        f"; whether it holds the other {n - kept} is unknown: {unlisted} could not be listed" if unlisted else \
        "" if stopped_at is None else f"; the other {n - kept} are only in the journal"
    return Finding(Code.REPLAY_PENDING, path=first[0], offset=first[1],
                   detail=f"{n} entries after lastMark in {', '.join(names)} {fate}; {kept} of them are already in "
                          f"ledger storage{rest}")
