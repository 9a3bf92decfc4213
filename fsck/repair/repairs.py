"""Repairs, kept apart from detection: a plan of actions built from findings, applied atomically.

Which finding a repair answers, and how, is read from the problem table (Problem.repair). Every
action writes a temp file, fsyncs and renames it into place, keeping a byte copy of what it replaces
in the backup folder. A repair never writes through a symlink that leads outside the bookie's dirs,
never acts on a ledger whose evidence could not be read, and never rebuilds an index that would
drop entries the bookie acknowledged unless the operator names the destructive choice.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bkdisk.bookie.layout import BookieDirs, bookie_id_of
from bkdisk.diskio.atomic import atomic_move, atomic_rewrite, atomic_write, remove_name
from bkdisk.diskio.distinct import distinct, members
from bkdisk.diskio.failures import LIST
from bkdisk.diskio.mapped import DiskError, map_window
from bkdisk.diskio.spill import inside
from bkdisk.entrylogs.arrays import EntryLogArrays
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, LOCATIONS_DB, index_relpath
from bkdisk.fsck.api import Report, check_bookie, recheck
from bkdisk.fsck.codes import Code
from bkdisk.fsck.confinement import escape
from bkdisk.fsck.context import CheckContext, CheckOptions
from bkdisk.fsck.entry_ranges import ranges
from bkdisk.fsck.exit_codes import EXIT_CORRECTED, EXIT_OK, EXIT_UNCORRECTED
from bkdisk.fsck.findings import Finding, given
from bkdisk.fsck.inodes import same_inode
from bkdisk.fsck.problems import CUT_JOURNAL, FINISH_MOVE, MOVE_INDEX, REBUILD_INDEX, REMOVE_TEMP, Severity
from bkdisk.fsck.repair import lost_entries as fate
from bkdisk.fsck.repair.guards import RepairRefused, default_backup_dir, hold_repair_lock, processes_holding
from bkdisk.fsck.repair.lost_entries import db_lost_entries, dropped_past_close, placed_in_no_log, within_closed
from bkdisk.fsck.repair.rebuild import best_copies, indexed_locations, rebuilt_locations, too_large
from bkdisk.fsck.repair.rebuilt_header import damaged_index_fenced, header_for, infer_page_size, old_header
from bkdisk.fsck.shell_commands import recover_commands
from bkdisk.indexfiles.writer import index_bytes

# DbLedgerStorage's RocksDB indexes: never written here; the plan names BookKeeper's rebuild (always blocked).
BOOKKEEPER_REBUILD = "bookkeeper-rebuild"
ORDER = {REMOVE_TEMP: 0, FINISH_MOVE: 1, MOVE_INDEX: 2, REBUILD_INDEX: 3, CUT_JOURNAL: 4, BOOKKEEPER_REBUILD: 5}
DROP_LOST_OPTION = "--rebuild-dropping-lost-entries"
_PLACED = (Code.ENTRY_MISSING, Code.ENTRIES_MISSING)   # pass 7: entries metadata places here that storage lacks


@dataclass
class Action:
    kind: str                 # one of fsck.problems.REPAIR_KINDS
    path: str                 # the file written, moved to or removed
    describe: str
    ledger: LedgerId | None = None
    source: str | None = None
    cut_at: int | None = None
    covers: list[Finding] = field(default_factory=list)   # the findings it answers
    blocked: str | None = None   # why it cannot be done
    result: str | None = None    # after apply: "done", "declined", "failed: ..."

    @property
    def codes(self) -> set[str]:
        return {f.code for f in self.covers}

    def line(self) -> str:
        return f"{self.kind}: {self.describe}" + (f" [cannot: {self.blocked}]" if self.blocked else "")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "source": self.source, "describe": self.describe,
                "codes": sorted(self.codes), "blocked": self.blocked, "result": self.result}


@dataclass
class RepairPlan:
    actions: list[Action]
    remaining: list[Finding]                 # errors and warnings no unblocked action answers
    lost: dict[LedgerId, list[int]] = field(default_factory=dict)   # acknowledged entries in no entry log
    recover_command: str | None = None       # how the lost entries come back from other bookies
    recover_refused: list[str] = field(default_factory=list)   # lost ledgers that command cannot name, and why
    fates: dict[LedgerId, str] = field(default_factory=dict)   # what the bookie answers for them, if not KEPT
    unindexed: dict[LedgerId, list[int]] = field(default_factory=dict)   # lost entries no index points at

    @property
    def todo(self) -> list[Action]:
        return [a for a in self.actions if not a.blocked]

    def lines(self) -> list[str]:
        out = [a.line() for a in self.actions]
        for lid, ents in sorted(self.lost.items()):
            answer = self.fates.get(lid, fate.KEPT)
            out.append(f"lost: ledger {lid} entries {ranges(ents)} are in no entry log; {answer}")
        for lid, ents in sorted(self.unindexed.items()):
            out.append(f"lost: ledger {lid} entries {ranges(ents)} are in no entry log; {fate.UNINDEXED}")
        if self.recover_command:
            out.append(f"to re-replicate lost entries from the other bookies: {self.recover_command}")
        out += [f"no shell command: {why}" for why in self.recover_refused]
        if self.remaining:
            by: dict[str, int] = {}
            for f in self.remaining:
                by[f.code] = by.get(f.code, 0) + 1
            out.append("will remain after this plan: " + ", ".join(f"{n} {c}" for c, n in sorted(by.items())))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"actions": [a.to_json() for a in self.actions],
                "lost_entries": [{"scope": lid.scope, "ledger": lid.ledger,
                                  "entries": sorted(set(e) | set(self.unindexed.get(lid, [])))}
                                 for lid, e in sorted({**self.unindexed, **self.lost}.items())],
                "recover_command": self.recover_command,
                "recover_refused": self.recover_refused,
                "remaining": [f.to_json() for f in self.remaining]}


def _unseen(ctx: CheckContext, lid: LedgerId, paths: list[str]) -> str | None:
    """Why what is known of ``lid`` is incomplete: a folder that could not be listed, or one of its
    index files that could not be read; None when every piece of evidence was read."""
    inv = ctx.index_inventory
    fail = inv.unlisted_folder_of(lid)
    if fail is None:
        fail = next((f for f in inv.io_failures if f.op != LIST and f.path in paths), None)
    if fail is None:
        return None
    return f"{fail.path}: {fail.describe()} (errno {fail.errno}); what it holds for this ledger is unknown"


def plan_repairs(report: Report, *, drop_lost_entries: bool = False) -> RepairPlan:
    """The actions that answer ``report``'s repairable findings, each blocked with a reason where it
    must not run, the entries no repair can bring back, and what will remain afterwards."""
    ctx = report.checked()
    dirs = ctx.dirs
    actions: list[Action] = []
    moved: dict[str, str] = {}
    dup = {(f.scope or 0, f.ledger) for f in report.findings if f.code == Code.INDEX_DUPLICATE}
    by_kind: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.problem.repair is not None:
            by_kind.setdefault(f.problem.repair, []).append(f)
    for f in by_kind.get(REMOVE_TEMP, []):
        path = given(f.path, "the temp file's path")
        a = Action(REMOVE_TEMP, path, f"remove {path}", covers=[f])
        a.blocked = escape(path, dirs)
        actions.append(a)
    for f in by_kind.get(FINISH_MOVE, []):
        path, other = given(f.path, "the misplaced name"), given(f.other, "the index's other name")
        a = Action(FINISH_MOVE, path, f"remove {path}, a second name of {other}", source=other, covers=[f])
        a.blocked = escape(path, dirs) or escape(other, dirs)
        actions.append(a)
    for f in by_kind.get(MOVE_INDEX, []):
        lid, path, move_to = f.lid, given(f.path, "the index's path"), given(f.move_to, "where the index belongs")
        a = Action(MOVE_INDEX, move_to, f"move {path} to {move_to}", lid, source=path, covers=[f])
        a.blocked = (escape(path, dirs) or escape(move_to, dirs) or _unseen(ctx, lid, [path]))
        if not a.blocked and (os.path.lexists(move_to) or (lid.scope, lid.ledger) in dup):
            a.blocked = "another index for this ledger exists; choose one by hand"
        if not a.blocked:
            moved[path] = move_to
        actions.append(a)
    rebuild: dict[LedgerId, list[Finding]] = {}
    for f in by_kind.get(REBUILD_INDEX, []):
        if f.ledger is not None:
            rebuild.setdefault(LedgerId(f.scope or 0, f.ledger), []).append(f)
    inv = ctx.index_inventory
    unscanned = [lf.path for lf in ctx.log_files if not isinstance(ctx.log_scans.get(lf.path), EntryLogArrays)]
    unread_journals = [p for p, s in ctx.journal_scans.items() if isinstance(s, DiskError)]
    unlisted = sorted(ctx.unlisted)   # a ledger or journal dir's current/ (after the scans listed them)
    twice = [f for f in report.findings if f.code == Code.LOG_ID_DUPLICATE]
    lost: dict[LedgerId, list[int]] = {}
    unindexed: dict[LedgerId, list[int]] = {}   # lost entries no index points at
    fates: dict[LedgerId, str] = {}             # what the bookie answers for a ledger's lost entries, if not KEPT
    for lid, covers in sorted(rebuild.items()):
        rows = [i for i in range(len(inv.paths))
                if inv.files["named"][i] and LedgerId(int(inv.files["scope"][i]), int(inv.files["ledger"][i])) == lid]
        paths = [inv.paths[i] for i in rows]
        target = moved.get(paths[0], paths[0]) if paths else \
            os.path.join(dirs.effective_index_dirs[0], CURRENT_DIR, index_relpath(lid))
        served = indexed_locations(ctx, lid)   # (read once: a refused header's slots are read from its file)
        best = best_copies(ctx, lid, served)
        gone, dropped = _lost_entries(ctx, lid, best, served[0])
        unplaced = placed_in_no_log(ctx, lid, np.array(sorted(best), np.int64), served[0])
        if unplaced:
            unindexed[lid] = unplaced
        else:   # (what pass 7 found missing of the ledger comes back with the rebuild)
            covers = covers + [f for f in report.findings if f.code in _PLACED and f.lid == lid]
        a = Action(REBUILD_INDEX, target, f"rebuild the index of ledger {lid} at {target} from the entry logs{dropped}",
                   lid, covers=covers)
        if gone:
            lost[lid] = gone
        if twice:
            a.blocked = (f"{twice[0].path}: its entry log id is in two ledger dirs; which one the index means is "
                         "not told: move one aside by hand first")
        elif unlisted:
            a.blocked = f"{unlisted[0]} could not be listed; a rebuild would drop the entries of the logs it holds"
        elif unscanned:
            a.blocked = f"entry log {unscanned[0]} could not be read; a rebuild would drop the entries it holds"
        elif (lid.scope, lid.ledger) in dup:
            a.blocked = "the ledger is indexed in two places; choose one by hand"
        else:
            a.blocked = escape(target, dirs) or _unseen(ctx, lid, paths) or too_large(best)
        if not a.blocked and unread_journals and old_header(ctx, lid) is None:
            a.blocked = (f"journal {unread_journals[0]} could not be read; the ledger's master key and fenced state "
                         f"are not known")
        if not a.blocked and header_for(ctx, lid) is None:
            a.blocked = "no master key for this ledger in the index or the journals"
        if not a.blocked and old_header(ctx, lid) is None and not ctx.journal_facts.fenced.get(lid, False) \
                and damaged_index_fenced(ctx, lid) is None:
            a.blocked = ("its index header is damaged past telling its state, and the journals record no fence: "
                         "a rebuild could unfence a fenced ledger")
        if not a.blocked and gone and not drop_lost_entries:
            a.blocked = (f"entries {ranges(gone)} it points at are in no entry log; a rebuild would make the "
                         f"bookie deny them (rebuild anyway with {DROP_LOST_OPTION})")
        if gone and not a.blocked:
            fates[lid] = fate.DROPPED
        actions.append(a)
    for f in by_kind.get(CUT_JOURNAL, []):
        path = given(f.path, "the journal's path")
        a = Action(CUT_JOURNAL, path, f"cut {path} after its last valid record (offset {f.cut_at}), "
                                      f"zero-filling the rest", cut_at=f.cut_at, covers=[f])
        a.blocked = escape(path, dirs)
        actions.append(a)
    if dirs.storage_kind == "rocksdb":
        lost.update(db_lost_entries(ctx, report.findings))
    actions += _bookkeeper_rebuilds(report.findings, bool(lost))
    answered = {id(f) for a in actions if not a.blocked for f in a.covers}
    remaining = [f for f in report.findings if f.severity != Severity.INFO and id(f) not in answered]
    command: str | None = None
    refused: list[str] = []
    if lost or unindexed:
        command, refused = recover_commands(list({**lost, **unindexed}), bookie_id_of(dirs) or "<this bookie's id>")
    return RepairPlan(sorted(actions, key=lambda a: ORDER[a.kind]), remaining, lost, command, refused, fates, unindexed)


def _bookkeeper_rebuilds(findings: list[Finding], lost: bool) -> list[Action]:
    """One blocked action per DbLedgerStorage database to rebuild, naming BookKeeper's command; with
    ``lost`` entries, the locations rebuild only once they came back from the other bookies."""
    from bkdisk.fsck.dbindex import REBUILD_COMMANDS, bookkeeper_rebuilds
    out = []
    for command, folders, covers in bookkeeper_rebuilds(findings):
        where = ", ".join(folders) or "the ledgers index of each ledger dir"
        first = ("only once the lost entries below are recovered (it keeps only what the entry logs hold: the "
                 "bookie would deny them), " if lost and command == REBUILD_COMMANDS[LOCATIONS_DB] else "")
        out.append(Action(BOOKKEEPER_REBUILD, folders[0] if folders else "", f"{where}: {first}with the bookie "
                          f"stopped, run {command}", covers=covers,
                          blocked="bkdisk never writes RocksDB databases; BookKeeper's command rebuilds them"))
    return out


def _lost_entries(ctx: CheckContext, lid: LedgerId, best: dict, old: np.ndarray) -> tuple[list[int], str]:
    """Entries the current index points at (``old``) that a rebuild keeping ``best`` (rebuild.best_copies)
    would not have and that are the ledger's (lost_entries.within_closed); what the rebuild drops past a
    closed ledger's last entry, for the plan to say."""
    mine, past, last = within_closed(ctx, lid, old[~members(old, distinct(np.fromiter(best, np.int64, len(best))))])
    return mine.tolist(), dropped_past_close(past, last)


def apply(plan: RepairPlan, ctx: CheckContext, backup_dir: str, *, confirm: Callable[[Action], bool] | None = None,
          log: Callable[[str], None] = print, kept: list[str] | None = None) -> list[str]:
    """Carry out the plan's unblocked actions in order, asking ``confirm`` (if given) before each.

    Each action is atomic on its own; one that fails is reported and the others still run. Sets
    every action's ``result``; returns the backup copies made (none: no backup folder was made),
    each added to ``kept`` as it is made (what a run stopped half way has made).
    """
    kept = [] if kept is None else kept
    page_size = infer_page_size(ctx.index_inventory, {a.path for a in plan.todo if a.kind == REBUILD_INDEX})
    for a in plan.todo:
        if confirm is not None and not confirm(a):
            a.result = "declined"
            continue
        try:
            copy = None
            if a.kind == REMOVE_TEMP:
                remove_name(a.path)
            elif a.kind == FINISH_MOVE:
                if not same_inode(a.path, given(a.source, "the index's other name")):
                    raise OSError(0, "the two names no longer share one inode", a.path)
                remove_name(a.path)
            elif a.kind == MOVE_INDEX:
                copy = atomic_move(given(a.source, "the index to move"), a.path, backup_dir=backup_dir)
            elif a.kind == REBUILD_INDEX:
                lid = given(a.ledger, "the ledger to rebuild")
                header = given(header_for(ctx, lid), "a header for the rebuilt index")
                locations = rebuilt_locations(best_copies(ctx, lid))
                copy = atomic_write(a.path, index_bytes(header, locations, page_size), backup_dir=backup_dir)
            elif a.kind == CUT_JOURNAL:
                copy = _cut_journal(a.path, given(a.cut_at, "where to cut the journal"), backup_dir)
        except OSError as e:
            a.result = f"failed: {e.strerror or e} ({e.filename or a.path})"
            log(f"FAILED: {a.line()}: {e.strerror or e} ({e.filename or a.path})")
            continue
        if copy:
            kept.append(copy)
        a.result = "done"
        log(f"done: {a.line()}")
    return kept


def _cut_journal(path: str, at: int, backup_dir: str) -> str | None:
    """Keep the journal's bytes before ``at``; the same size, zeros after (a clean end there)."""
    step = 64 << 20

    def head():
        for off in range(0, at, step):
            with map_window(path, off, min(step, at - off)) as w:
                yield w.tobytes()

    return atomic_rewrite(path, head(), size=os.path.getsize(path), backup_dir=backup_dir)


# --- a repair from start to end: check, plan, apply, re-check -----------------------------------------

@dataclass
class RepairRun:
    """One repair from start to end: the findings before, the plan with each action's result, the
    backup copies made, the findings after, and the exit code (e2fsck's)."""

    before: Report
    plan: RepairPlan
    backup_dir: str | None = None          # None: nothing was replaced, no folder was made
    backups: list[str] = field(default_factory=list)
    after: Report | None = None
    exit_code: int = EXIT_OK

    @property
    def done(self) -> list:
        return [a for a in self.plan.actions if a.result == "done"]

    @property
    def failed(self) -> list:
        return [a for a in self.plan.actions if (a.result or "").startswith("failed")]

    def to_json(self) -> dict[str, Any]:
        """The final state as the document's body (summary.exit_code is the process's), with the
        findings before, the plan, the actions with their results and the findings after."""
        final = self.after or self.before
        doc = final.to_json(self.exit_code)
        doc["repair"] = {"before": _state(self.before),
                         "plan": self.plan.to_json(),
                         "backup_dir": self.backup_dir,
                         "after": None if self.after is None else _state(self.after),
                         "exit_code": self.exit_code}
        return doc


def _state(report: Report) -> dict[str, Any]:
    return {"summary": report.summary(), "findings": [f.to_json() for f in report.findings]}


def apply_repairs(report: Report, plan: RepairPlan, *, confirm: Callable | None = None, backup_dir: str | None = None,
                  force: bool = False, log: Callable[[str], None] = lambda s: None) -> RepairRun:
    """Carry out ``plan`` (from ``plan_repairs(report)``), asking ``confirm(action) -> bool`` before each
    action when given, then check again. Raises RepairRefused before writing anything when a process
    holds files in the dirs (unless ``force``) or the default backup folder leads outside the dirs."""
    run = RepairRun(report, plan, exit_code=report.exit_code)
    if not plan.todo:
        return run
    dirs = report.dirs
    holders = processes_holding(dirs.all_dirs)
    if holders and not force:
        pid, f = holders[0]
        raise RepairRefused(f"process {pid} has {f} open (a running bookie?); not repairing without --force")
    bdir = backup_dir or default_backup_dir(report.checked())
    if backup_dir is None and escape(bdir, dirs):
        raise RepairRefused(f"backup folder {bdir}: {escape(bdir, dirs)}; give --backup-dir to keep backups elsewhere")
    read = next((c for d in dirs.all_dirs if inside(bdir, c := os.path.join(d, CURRENT_DIR))), None)
    if read is not None:   # (the copies would be files BookKeeper and the next check find among its own)
        raise RepairRefused(f"{bdir}: --backup-dir is inside {read}, which BookKeeper reads; expected a folder "
                            "outside every dir's current/")
    try:
        apply(plan, report.checked(), bdir, confirm=confirm, log=log, kept=run.backups)
    except KeyboardInterrupt:
        if run.backups:
            log(f"cancelled: the {len(run.backups)} file(s) replaced so far are kept in {bdir}")
        raise
    run.backup_dir = bdir if run.backups else None
    if not run.done:
        return run   # every action declined or failed: the findings stand
    run.after = recheck(report)
    run.after.close()   # only its findings are kept
    run.exit_code = EXIT_UNCORRECTED if run.after.errors else EXIT_CORRECTED
    return run


def repair_bookie(dirs: BookieDirs, options: CheckOptions | None = None, *, confirm: Callable | None = None,
                  backup_dir: str | None = None, force: bool = False, drop_lost_entries: bool = False,
                  log: Callable[[str], None] = lambda s: None) -> RepairRun:
    """Check, plan, apply (asking ``confirm`` per action) and re-check, end to end, holding the bookie's
    repair lock throughout."""
    held = hold_repair_lock(dirs.all_dirs, warn=log)
    try:
        before = check_bookie(dirs, options)
        plan = plan_repairs(before, drop_lost_entries=drop_lost_entries)
        return apply_repairs(before, plan, confirm=confirm, backup_dir=backup_dir, force=force, log=log)
    finally:
        for fd in held:
            os.close(fd)
