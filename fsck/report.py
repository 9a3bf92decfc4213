"""Rendering a Report for people (numbered passes, causes first with their consequences, counts)
and for machines (one JSON document)."""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from bkdisk.formats.byte_sizes import human_bytes
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.api import Report
from bkdisk.fsck.entry_ranges import per_ledger
from bkdisk.fsck.findings import SEVERITY_ORDER, Finding
from bkdisk.fsck.problems import Severity

if TYPE_CHECKING:   # the repair half loads only when a repair runs
    from bkdisk.fsck.repair.repairs import RepairRun

CONSEQUENCES_SHOWN = 3   # per cause, in the short report


def grouped(findings: list[Finding]) -> Iterator[tuple[Finding, Sequence[Finding]]]:
    """(cause, its consequences) for every finding that follows from no other, causes with
    consequences first, then by severity and pass."""
    under: dict[int, list[Finding]] = {}
    for f in findings:
        if f.caused_by is not None:
            under.setdefault(id(f.caused_by), []).append(f)
    roots = [f for f in findings if f.caused_by is None]
    # (one int a root as its key, not a tuple: a check may find a million orphan ledgers)
    roots.sort(key=lambda f: SEVERITY_ORDER[f.severity] * 1024 + (id(f) not in under) * 512 + f.pass_no)
    for f in roots:
        yield f, under.get(id(f), ())


def limit_to_ledger(report: Report, ledger: LedgerId) -> None:
    """Keep the findings about ``ledger`` and those about no ledger (whole files and dirs, which may
    concern it); the pass counts follow. The check itself still reads every file."""
    keep = [f for f in report.findings if f.ledger is None or (f.scope or 0, f.ledger) == (ledger.scope, ledger.ledger)]
    report.findings[:] = keep
    for p in report.passes:
        p.counts = {}
        for f in keep:
            if f.pass_no == p.number:
                p.counts[f.severity.value] = p.counts.get(f.severity.value, 0) + 1


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _entry_pairs(findings: Sequence[Finding]) -> list[tuple[LedgerId, int]]:
    return [(LedgerId(f.scope or 0, f.ledger), f.entry) for f in findings
            if f.ledger is not None and f.entry is not None]


def _per_entry(f: Finding) -> bool:
    return f.ledger is not None and f.entry is not None


def blocks(findings: list[Finding]) -> Iterator[tuple[Finding, str | None, Sequence[Finding]]]:
    """What the report lists, causes first: (head finding, its line, the findings under it). Findings
    that follow from a cause are under it; per-entry findings of one code in one file that follow from
    none are one block, said as ledgers and entry ranges. A line that is the head's own ``line()`` is
    None here, made only for the blocks a report lists (a check may find a million orphan ledgers)."""
    out: list[tuple[Finding, Sequence[Finding], bool]] = []   # (head, under, whether a group of findings alike)
    same: dict[tuple[str, str | None], list[Finding]] = {}
    for cause, cons in grouped(findings):
        if cons or not _per_entry(cause):
            out.append((cause, cons, False))
            continue
        group = same.setdefault((cause.code, cause.path), [])
        if not group:
            out.append((cause, group, True))
        group.append(cause)
    for head, under, alike in out:
        if not alike:
            yield head, None, under
        elif len(under) == 1:
            yield head, None, ()
        else:
            text = f"{len(under)} findings: {per_ledger(_entry_pairs(under))}"
            line = f"{head.severity.value.upper():7} {head.code} {head.path or ''}: {text}".replace(" :", ":")
            yield head, line, under


def _summaries(under: Sequence[Finding], head_line: str) -> list[str]:
    """The findings under a head, per code: each per-entry code as one line of ledgers and entry ranges
    (only the count where the head already names those ranges)."""
    by_code: dict[str, list[Finding]] = {}
    for f in under:
        by_code.setdefault(f.code, []).append(f)
    lines = []
    for code, fs in by_code.items():
        if all(_per_entry(f) for f in fs):
            said = per_ledger(_entry_pairs(fs))
            lines.append(f"{len(fs)} {code}" + (", one per entry named above" if said in head_line else f": {said}"))
        else:
            lines += [f.line() for f in fs[:CONSEQUENCES_SHOWN]]
            if len(fs) > CONSEQUENCES_SHOWN:
                lines.append(f"and {len(fs) - CONSEQUENCES_SHOWN} more {code}")
    return lines


def render_text(report: Report, out: TextIO, *, worst: int = 25, verbose: bool = False, quiet: bool = False) -> None:
    """The report for people: one line per cause (a lost or damaged file with the ledgers and entry
    ranges it takes, or one fault), what follows from it summed up under it; every finding with
    ``verbose``. ``quiet``: only the errors' heads and the final count, a subset of the default."""
    listed: list[tuple[Finding, str, Sequence[Finding]]] = []
    for head, line, under in blocks(report.findings):
        if verbose or (head.severity != Severity.INFO and len(listed) < worst):
            listed.append((head, head.line() if line is None else line, under))
    e, w = report.count(Severity.ERROR), report.count(Severity.WARNING)
    if quiet:
        for head, line, _under in listed:
            if head.severity == Severity.ERROR:
                out.write(f"  {line}\n")
        out.write(f"{e} error{'' if e == 1 else 's'}, {w} warning{'' if w == 1 else 's'}.\n")
        return
    d = report.dirs
    journal_dirs, ledger_dirs = ", ".join(d.journal_dirs) or "-", ", ".join(d.ledger_dirs) or "-"
    index_dirs = f"; index dirs {', '.join(d.index_dirs)}" if d.index_dirs else ""
    out.write(f"bookie-fsck: journal dirs {journal_dirs}; ledger dirs {ledger_dirs}{index_dirs} ({d.storage_kind})\n")
    for p in report.passes:
        if p.skipped:
            status = f"skipped: {p.skipped}"
        elif not p.counts:
            status = "ok"
        else:
            status = ", ".join(_count(p.counts[s.value], s.value, None if s != Severity.INFO else s.value)
                               for s in Severity if s.value in p.counts)
        out.write(f"Pass {p.number}: {p.name} ".ljust(44, ".") + f" {status}\n")
    shown: set[int] = set()
    lines: list[str] = []
    for head, line, under in listed:
        lines.append(f"  {line}")
        shown.add(id(head))
        shown.update(id(f) for f in under)
        if verbose:
            lines += [f"      -> {f.line()}" for f in under if f is not head]
        elif head.caused_by is None and under and under[0] is not head:
            lines += [f"      -> {s}" for s in _summaries(under, line)]
    if lines:
        out.write("\n" + "\n".join(lines) + "\n")
        if not verbose and any(under for _h, _l, under in listed):
            out.write("  (-v or --json lists each finding)\n")
    hidden = [f for f in report.findings if id(f) not in shown]
    if hidden:
        by_code: dict[str, int] = {}
        for f in hidden:
            by_code[f.code] = by_code.get(f.code, 0) + 1
        out.write("\n  not listed (use --verbose or --json): "
                  + ", ".join(f"{n} {code}" for code, n in sorted(by_code.items())) + "\n")
    s = report.stats
    out.write(f"\nChecked {_count(s.get('entry_logs', 0), 'entry log')} ({human_bytes(s.get('entry_log_bytes', 0))}, "
              f"{_count(s.get('entries', 0), 'entry', 'entries')}), {_count(s.get('journals', 0), 'journal')}, "
              + (_count(s['db_locations'], 'RocksDB location') if "db_locations" in s
                 else _count(s.get('index_files', 0), 'index file'))
              + f" in {s.get('seconds', 0):.2f} s.\n")
    out.write(f"{e} error{'' if e == 1 else 's'}, {w} warning{'' if w == 1 else 's'}, "
              f"{report.count(Severity.INFO)} info.\n")


def render_repair(run: RepairRun, out: TextIO, *, verbose: bool = False, quiet: bool = False) -> None:
    """What a repair did, where the replaced files went (only when some were), and the re-check."""
    declined = sum(1 for a in run.plan.actions if a.result == "declined")
    line = f"{len(run.done)} repairs done, {len(run.failed)} failed" + (f", {declined} declined" if declined else "")
    if run.backup_dir:
        line += f"; replaced files kept in {run.backup_dir}"
    out.write(line + "\n")
    if run.after is not None:
        out.write("\nAfter repair:\n")
        render_text(run.after, out, verbose=verbose, quiet=quiet)


def render_json(doc: Report | dict[str, Any], out: TextIO) -> None:
    """One JSON document. A Report's findings are encoded one at a time as they are written, the same
    bytes as its whole ``to_json()``: a million findings' dicts are never held at once."""
    if not isinstance(doc, Report):
        json.dump(doc, out, indent=None, separators=(",", ":"))
        out.write("\n")
        return
    head = json.dumps(doc.json_head(), indent=None, separators=(",", ":"))
    out.write(head[:-1] + ',"findings":[')
    encode = json.JSONEncoder(indent=None, separators=(",", ":")).encode
    for i, f in enumerate(doc.findings):
        out.write(("," if i else "") + encode(f.to_json()))
    out.write("]}\n")
