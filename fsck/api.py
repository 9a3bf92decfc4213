"""The fsck library entry point: check a bookie's dirs and return a Report of findings as data."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bookie.layout import BookieDirs
from fsck.context import CheckContext, CheckOptions
from fsck.findings import SEVERITY_ORDER, Finding
from fsck.passes import p1_layout, p2_hierarchy, p3_index, p4_entrylogs, p5_crosscheck, p6_journals, p7_metadata
from fsck.problems import PASS_NAMES, Severity

PASSES = [(1, p1_layout), (2, p2_hierarchy), (3, p3_index), (4, p4_entrylogs), (5, p5_crosscheck),
          (6, p6_journals), (7, p7_metadata)]
# Passes that read the .idx hierarchy; DbLedgerStorage keeps its index in RocksDB instead.
INDEX_PASSES = {2, 3, 5}

EXIT_OK, EXIT_CORRECTED, EXIT_UNCORRECTED, EXIT_OPERATIONAL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 4, 8, 16, 32


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

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]

    @property
    def exit_code(self) -> int:
        """e2fsck's convention for a check without repair: 4 when errors are left, else 0."""
        return EXIT_UNCORRECTED if self.errors else EXIT_OK

    def worst(self, n: int = 20) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.pass_no))[:n]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "bkdisk.fsck/1",
            "dirs": {"journal": self.dirs.journal_dirs, "ledger": self.dirs.ledger_dirs,
                     "index": self.dirs.index_dirs, "storage": self.dirs.storage_kind},
            "summary": {"errors": self.count(Severity.ERROR), "warnings": self.count(Severity.WARNING),
                        "info": self.count(Severity.INFO), "exit_code": self.exit_code},
            "passes": [p.to_json() for p in self.passes],
            "stats": self.stats,
            "findings": [f.to_json() for f in self.findings],
        }


def check_bookie(dirs: BookieDirs, options: CheckOptions | None = None) -> Report:
    """Run the passes in order over ``dirs`` and return every finding. Reads only; never writes."""
    opts = options or CheckOptions()
    ctx = CheckContext(dirs, opts)
    report = Report(dirs, context=ctx)
    started = time.perf_counter()
    rocks = dirs.storage_kind == "rocksdb"
    for number, module in PASSES:
        t0 = time.perf_counter()
        if rocks and number in INDEX_PASSES:
            report.passes.append(PassResult(number, PASS_NAMES[number], 0.0, {},
                                            skipped="DbLedgerStorage keeps its index in RocksDB, which bkdisk does "
                                                    "not read"))
            continue
        found = list(module.run(ctx))
        counts: dict[str, int] = {}
        for f in found:
            counts[f.severity.value] = counts.get(f.severity.value, 0) + 1
        skipped = None
        if number == 7 and opts.metadata is None and opts.metadata_dir is None:
            skipped = "no ledger metadata given"
        report.findings.extend(found)
        report.passes.append(PassResult(number, PASS_NAMES[number], time.perf_counter() - t0, counts, skipped))
    report.stats = _stats(ctx, time.perf_counter() - started)
    return report


def _stats(ctx: CheckContext, seconds: float) -> dict[str, Any]:
    import os
    from entrylogs.arrays import EntryLogArrays
    log_bytes = sum(s.size for s in ctx.log_scans.values() if isinstance(s, EntryLogArrays))
    entries = sum(len(s.entries) for s in ctx.log_scans.values() if isinstance(s, EntryLogArrays))
    jbytes = sum(os.path.getsize(j.path) for j in ctx.journal_files if os.access(j.path, os.F_OK))
    idx = len(ctx.index_inventory.paths) if ctx.dirs.storage_kind == "index-files" else 0
    return {"seconds": round(seconds, 3), "entry_logs": len(ctx.log_files), "entry_log_bytes": log_bytes,
            "entries": entries, "journals": len(ctx.journal_files), "journal_bytes": jbytes, "index_files": idx}
