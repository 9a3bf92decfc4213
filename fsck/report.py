"""Rendering a Report for people (numbered passes, counts, the worst findings) and for machines."""
from __future__ import annotations

import json
from typing import TextIO

from fsck.api import Report
from fsck.problems import Severity


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def render_text(report: Report, out: TextIO, *, worst: int = 25, verbose: bool = False) -> None:
    d = report.dirs
    out.write(f"bookie-fsck: journal dirs {', '.join(d.journal_dirs) or '-'}; ledger dirs {', '.join(d.ledger_dirs) or '-'}"
              + (f"; index dirs {', '.join(d.index_dirs)}" if d.index_dirs else "") + f" ({d.storage_kind})\n")
    for p in report.passes:
        if p.skipped:
            status = f"skipped: {p.skipped}"
        elif not p.counts:
            status = "ok"
        else:
            status = ", ".join(f"{p.counts[s.value]} {s.value}{'s' if p.counts[s.value] != 1 and s != Severity.INFO else ''}"
                               for s in Severity if s.value in p.counts)
        out.write(f"Pass {p.number}: {p.name} ".ljust(44, ".") + f" {status}\n")
    if verbose:
        shown = report.findings
    else:
        # Errors and warnings first, up to ``worst``; info only as counts per code.
        shown = [f for f in report.worst(worst) if f.severity != Severity.INFO]
    if shown:
        out.write("\n")
        for f in shown:
            out.write(f"  {f.line()}\n")
    hidden = [f for f in report.findings if f not in shown]
    if hidden:
        by_code: dict[str, int] = {}
        for f in hidden:
            by_code[f.code] = by_code.get(f.code, 0) + 1
        out.write("\n  not listed (use --verbose or --json): "
                  + ", ".join(f"{n} {code}" for code, n in sorted(by_code.items())) + "\n")
    s = report.stats
    out.write(f"\nChecked {s.get('entry_logs', 0)} entry logs ({_human_bytes(s.get('entry_log_bytes', 0))}, "
              f"{s.get('entries', 0)} entries), {s.get('journals', 0)} journals, {s.get('index_files', 0)} index "
              f"files in {s.get('seconds', 0):.2f} s.\n")
    e, w = report.count(Severity.ERROR), report.count(Severity.WARNING)
    out.write(f"{e} error{'' if e == 1 else 's'}, {w} warning{'' if w == 1 else 's'}, "
              f"{report.count(Severity.INFO)} info.\n")


def render_json(report: Report, out: TextIO, *, extra: dict | None = None) -> None:
    doc = report.to_json()
    if extra:
        doc.update(extra)
    json.dump(doc, out, indent=None, separators=(",", ":"))
    out.write("\n")
