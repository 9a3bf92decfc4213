"""The fsck library: check a bookie's dirs, plan repairs, apply them (asking a callback), re-check.

Everything the command line does is here as data; fsck.cli only parses options, prompts and prints.
The check is this module's; the repair half (``plan_repairs``, ``apply_repairs``, ``repair_bookie``,
``RepairRun``, ``RepairRefused``) is fsck.repair's (fsck/repair/), which stands on the check: a check loads none of it.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from bkdisk.bookie.layout import BookieDirs
from bkdisk.formats.paths import CURRENT_DIR
from bkdisk.fsck import dbindex
from bkdisk.fsck.codes import Code
from bkdisk.fsck.context import CheckContext, CheckOptions
from bkdisk.fsck.exit_codes import EXIT_OK, EXIT_UNCORRECTED
from bkdisk.fsck.findings import SEVERITY_ORDER, Finding, given
from bkdisk.fsck.lanes import Task
from bkdisk.fsck.passes import p1_layout, p2_hierarchy, p3_index, p4_entrylogs, p6_journals, p7_metadata
from bkdisk.fsck.passes.p5_crosscheck import checks as p5_crosscheck
from bkdisk.fsck.problems import Severity, pass_name
from bkdisk.fsck.root_causes import missing_log_causes, unlisted_log_causes

# The passes in order; each runs the checks of the bookie's kind of ledger storage.
PASSES = [(1, p1_layout.run), (2, p2_hierarchy.run), (3, p3_index.run), (4, p4_entrylogs.run),
          (5, p5_crosscheck.run), (6, p6_journals.run), (7, p7_metadata.run)]
# Work of a later pass, started on a lane of its own as soon as it says its inputs are ready (asked
# before each pass runs): it runs while the passes before it report.
AHEAD = (p5_crosscheck.ranges_ahead,)
# Findings about a whole entry log, in the order one is taken as the cause of the others.
LOG_CAUSES = (Code.FILE_UNREADABLE, Code.LOG_TRUNCATED, Code.LOG_HEADER_BAD, Code.LOG_FRAMING_BROKEN)
LOG_CONSEQUENCES = {Code.LEDGERS_MAP_BAD, Code.LEDGERS_MAP_MISMATCH}
LOCATION_CODES = {Code.INDEX_LOCATION_OUT_OF_RANGE, Code.INDEX_LOCATION_WRONG}


@dataclass
class PassResult:
    number: int
    name: str
    seconds: float
    counts: dict[str, int]
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.number, "name": self.name, "seconds": round(self.seconds, 4), "counts": self.counts,
                "skipped": self.skipped}


@dataclass
class Report:
    dirs: BookieDirs
    findings: list[Finding] = field(default_factory=list)
    passes: list[PassResult] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    context: CheckContext | None = field(default=None, repr=False)   # the scans, for a repair plan

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def checked(self) -> CheckContext:
        """The check's context (its scans), which a repair plan reads; a Report built by hand has none."""
        if self.context is None:
            raise ValueError("expected the report of check_bookie, with its scans; found a report without them")
        return self.context

    def close(self) -> None:
        """Remove what the check spilled to its temporary folder (a repair plan reads the scans: plan first)."""
        if self.context is not None:
            self.context.close()

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]

    @property
    def exit_code(self) -> int:
        """e2fsck's convention for a check without repair: 4 when errors are left, else 0."""
        return EXIT_UNCORRECTED if self.errors else EXIT_OK

    def worst(self, n: int = 20) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.pass_no))[:n]

    def summary(self, exit_code: int | None = None) -> dict[str, Any]:
        return {"errors": self.count(Severity.ERROR), "warnings": self.count(Severity.WARNING),
                "info": self.count(Severity.INFO), "exit_code": self.exit_code if exit_code is None else exit_code}

    def to_json(self, exit_code: int | None = None) -> dict[str, Any]:
        return {**self.json_head(exit_code), "findings": [f.to_json() for f in self.findings]}

    def json_head(self, exit_code: int | None = None) -> dict[str, Any]:
        """The JSON document but its findings, which come last (fsck.report.render_json writes them one at a time)."""
        return {
            "schema": "bkdisk.fsck/1",
            "dirs": {"journal": self.dirs.journal_dirs, "ledger": self.dirs.ledger_dirs,
                     "index": self.dirs.index_dirs, "storage": self.dirs.storage_kind},
            "summary": self.summary(exit_code),
            "passes": [p.to_json() for p in self.passes],
            "stats": self.stats,
        }


def check_bookie(dirs: BookieDirs, options: CheckOptions | None = None) -> Report:
    """Run the passes in order over ``dirs`` and return every finding. Reads only; never writes."""
    opts = options or CheckOptions()
    ctx = CheckContext(dirs, opts)
    ctx.spill.check()   # a --tmp-dir inside the bookie's dirs is refused before anything is read
    started = time.perf_counter()
    try:
        ctx.read_ahead.start()   # (before the lanes: they claim the logs it asks for)
        if opts.jobs > 1:
            # The scans on background threads while passes 1-3 walk and read the index on this one.
            ctx.prefetch(background_tasks(ctx))
        report = _run_passes(ctx)
    except BaseException:
        ctx.stop_background()
        ctx.close()   # nothing will read what was spilled (Ctrl-C included)
        raise
    finally:
        ctx.stop_background()   # done by now, unless a pass failed: then it stops after its current file
    report.stats = _stats(ctx, time.perf_counter() - started)
    return report


def background_tasks(ctx: CheckContext) -> list[list[Task]]:
    """The heavy work of passes 3, 4 and 6, in two lanes: the journal scans (they use no digest plan);
    the entry-log scans, then the journals' digests, in the order of a sequential check (both decide
    digest types in the shared plan; the digests wait for the journal scans)."""
    plan_users: list[Task] = [("log_scans", ctx.scan_logs)]
    if ctx.options.verify_digests:
        plan_users.append((p6_journals.DIGESTS, lambda: p6_journals.bad_records_of_journals(ctx)))
    return [[("journal_scans", ctx.scan_journals)], plan_users]


def _run_passes(ctx: CheckContext) -> Report:
    dirs = ctx.dirs
    report = Report(dirs, context=ctx)
    rocks = dirs.storage_kind == "rocksdb"
    started: set = set()
    for number, run in PASSES:
        for start in [s for s in AHEAD if s not in started]:
            tasks = start(ctx)
            if tasks:
                started.add(start)
                ctx.lanes.add(tasks)
        t0 = time.perf_counter()
        name = pass_name(number, dirs.storage_kind)
        ctx.progress(f"pass {number}: {name}", 0, 1)      # every pass shows as it runs
        found = list(run(ctx))
        counts: dict[str, int] = {}
        for f in found:
            counts[f.severity.value] = counts.get(f.severity.value, 0) + 1
        # a pass that did not run says why in a finding's extra["skipped"]
        skipped = next((f.extra["skipped"] for f in found if "skipped" in f.extra), None)
        report.findings.extend(found)
        report.passes.append(PassResult(number, name, time.perf_counter() - t0, counts, skipped))
        ctx.progress(f"pass {number}: {name}", 1, 1)
    if not rocks:
        link_causes(ctx, report.findings)
    unlisted = [os.path.join(d, CURRENT_DIR) for d in dirs.ledger_dirs if ctx.not_listed(d)]
    if unlisted:
        dropped, causes = unlisted_log_causes(report.findings, unlisted)
        _drop(report, dropped)
        _add_causes(report, causes)
    _add_causes(report, missing_log_causes(report.findings))
    return report


def _drop(report: Report, findings: list[Finding]) -> None:
    """``findings`` taken out of the report and their passes' counts."""
    gone = {id(f) for f in findings}
    report.findings = [f for f in report.findings if id(f) not in gone]
    for f in findings:
        p = next(p for p in report.passes if p.number == f.pass_no)
        p.counts[f.severity.value] -= 1
        if not p.counts[f.severity.value]:
            del p.counts[f.severity.value]


def _add_causes(report: Report, causes: list[Finding]) -> None:
    """Root causes found after the passes ran, listed and counted with their pass."""
    report.findings.extend(causes)
    for f in causes:
        p = next(p for p in report.passes if p.number == f.pass_no)
        p.counts[f.severity.value] = p.counts.get(f.severity.value, 0) + 1


def recheck(report: Report, *, progress=None) -> Report:
    """The same check again, over the same dirs with the same options (after a repair)."""
    opts = report.context.options if report.context is not None else CheckOptions()
    again = CheckOptions(metadata_dir=opts.metadata_dir, metadata=opts.metadata, verify_digests=opts.verify_digests,
                         jobs=opts.jobs, progress=progress, memory=opts.memory)
    return check_bookie(report.dirs, again)


def link_causes(ctx: CheckContext, findings: list[Finding]) -> None:
    """Set ``caused_by`` where one finding follows from another: an index location past the end of
    (or not found in) a truncated or damaged entry log, a bad ledgers map of a truncated log."""
    causes: dict[str, Finding] = {}
    for code in reversed(LOG_CAUSES):
        for f in findings:
            if f.code == code and f.path:
                causes[f.path] = f
    if not causes:
        return
    for f in findings:
        if f.code in LOG_CONSEQUENCES and f.path in causes and causes[f.path] is not f:
            f.caused_by = causes[f.path]
    wanted = [f for f in findings if f.code in LOCATION_CODES and f.entry is not None]
    if not wanted:
        return
    inv = ctx.index_inventory
    row_of = {p: i for i, p in enumerate(inv.paths)}
    log_path = {lf.log_id: lf.path for lf in ctx.log_files}
    locs = inv.locations
    where = {(int(r["file"]), int(r["entry"])): int(r["log"]) for r in locs[_rows_of(inv, wanted, row_of)]}
    for f in wanted:
        log = where.get((row_of.get(f.path or "", -1), given(f.entry, "a location's entry")))
        cause = causes.get(log_path.get(log, "") if log is not None else "")
        if cause is not None:
            f.caused_by = cause


def _rows_of(inv, wanted: list[Finding], row_of: dict[str, int]):
    import numpy as np
    files = np.array(sorted({row_of[f.path] for f in wanted if f.path in row_of}), dtype=np.int64)
    from bkdisk.diskio.distinct import members
    return np.flatnonzero(members(inv.locations["file"], files))


def _stats(ctx: CheckContext, seconds: float) -> dict[str, Any]:
    import os

    from bkdisk.entrylogs.arrays import EntryLogArrays
    from bkdisk.entrylogs.scan_parts import entry_count
    log_bytes = sum(s.size for s in ctx.log_scans.values() if isinstance(s, EntryLogArrays))
    entries = sum(entry_count(s) for s in ctx.log_scans.values() if isinstance(s, EntryLogArrays))
    jbytes = sum(os.path.getsize(j.path) for j in ctx.journal_files if os.access(j.path, os.F_OK))
    idx = len(ctx.index_inventory.paths) if ctx.dirs.storage_kind == "index-files" else 0
    from bkdisk.diskio.mapped import DiskError
    read = sum(not isinstance(ctx.log_scans.get(lf.path), DiskError) for lf in ctx.log_files)   # (not: unreadable)
    out = {"seconds": round(seconds, 3), "entry_logs": read, "entry_log_bytes": log_bytes,
           "entries": entries, "journals": len(ctx.journal_files), "journal_bytes": jbytes, "index_files": idx}
    if ctx.dirs.storage_kind == "rocksdb":
        out["db_locations"] = dbindex.location_count(ctx)
    return out

