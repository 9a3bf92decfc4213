"""What a person reads after an audit: summary.json, report.html (audit/report_html.py) and the
terminal summary, all computed from the tables written.

Reads the small tables only (disks, findings, faults, the replication histogram); never the replicas.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from collections import defaultdict
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import pyarrow.parquet as pq

from bkdisk.audit.report_html import HEALTHY, NOT_AUDITED, PROBLEMS, render_html
from bkdisk.audit.report_text import (
    AUDITED,
    ENTRIES_NAMED,
    entries_text,
    ledger_name,
    orphan_ledgers,
    problem_sentences,
    span,
)
from bkdisk.audit.scrub_summary import scrub_line, scrub_summary
from bkdisk.audit.space_report import space_lines, space_summary
from bkdisk.formats.byte_sizes import human_bytes
from bkdisk.fsck.problems import PROBLEMS as FSCK_PROBLEMS

SMALL_TABLES = ("disks", "under_replicated", "corrupt_copies", "divergent", "orphans", "missing_ledgers",
                "replication_histogram")
ORPHANS_LISTED = 100   # ledgers in summary.json's and the page's orphans table; the rest are counted
__all__ = ["SMALL_TABLES", "render_html", "summarize", "terminal_summary", "write_reports"]


def _rows(out: str, name: str) -> list[dict]:
    return pq.read_table(os.path.join(out, name)).to_pylist()


# Pass 7's findings of entries metadata places on a bookie that its storage does not hold: what a lost
# index or entry log causes, never quoted as a bookie's cause while the disk has another error.
CONSEQUENCES = ("ENTRY_MISSING", "ENTRIES_MISSING")


def _fsck_errors(out: str) -> dict[str, dict[str, Any]]:
    """Per bookie: fsck's error count, its first root-cause message (a lost file before its
    consequences) and whether ``bookie-fsck --repair`` repairs that cause."""
    path = os.path.join(out, "findings")
    if not os.path.exists(path):
        return {}
    t = pq.read_table(path, columns=["bookie_id", "severity", "code", "message", "ledger_id", "path"]).to_pylist()
    per: dict[str, dict[str, Any]] = {}
    for f in t:
        if f["severity"] != "error" or not f["bookie_id"]:
            continue
        p = per.setdefault(f["bookie_id"], {"errors": 0, "first": None, "rank": 9, "code": None})
        p["errors"] += 1
        rank = (3 if f["code"] in CONSEQUENCES else 0 if f["code"].endswith("_MISSING") and f["ledger_id"] is None
                else 1 if f["ledger_id"] is None else 2)
        if rank < p["rank"]:
            where = f"{f['path']}: " if f["path"] else ""
            first = f"{f['code']} {where}{f['message']}"
            p["first"], p["rank"], p["code"] = (first if len(first) <= 200 else first[:199] + "…"), rank, f["code"]
    return {b: {"errors": p["errors"], "first": p["first"],
                "repairable": p["code"] in FSCK_PROBLEMS and FSCK_PROBLEMS[p["code"]].repairable}
            for b, p in per.items()}


def _topics(out: str) -> dict[str, str]:
    """Per ledger (as bkdisk names it), the Pulsar topic its custom metadata names (the space table's)."""
    path = os.path.join(out, "space")
    if not os.path.isdir(path):
        return {}
    t = pq.read_table(path, columns=["kind", "ledger", "topic"]).to_pylist()
    return {r["ledger"]: r["topic"] for r in t if r["kind"] == "ledger" and r["topic"] and r["ledger"]}


def _tool_version(disks: list[dict]) -> str:
    try:
        return version("bkdisk")
    except Exception:   # noqa: BLE001 - not installed as a distribution: the rows say which tool wrote them
        return next((d["tool_version"] for d in disks if d.get("tool_version")), "unknown")


def summarize(out: str, run_id: str, metadata_from: str, worst: int = 20, *,
              started: dt.datetime | None = None, scrub_interval: dt.timedelta | None = None) -> dict[str, Any]:
    t = {name: _rows(out, name) for name in SMALL_TABLES}
    bookies: dict[str, dict[str, Any]] = {}
    for d in t["disks"]:
        bookies.setdefault(d["bookie_id"] or f"? {d['path']}", {
            "bookie_id": d["bookie_id"], "status": d["status"], "path": d["path"], "host": d["host"],
            "storage_class": d["storage_class"], "entries": d["entries"] or 0, "bytes": d["bytes"] or 0,
            "error": d["error"], "corrupt_copies": 0, "missing_copies": 0, "not_indexed_copies": 0,
            "missing_ledgers": 0,
            "orphan_entries": 0, "orphan_bytes": 0})
    per_ledger: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    where: dict[str, set[str]] = defaultdict(set)
    which: dict[str, set[int]] = defaultdict(set)
    for r in t["under_replicated"]:
        n = r["last_entry_id"] - r["first_entry_id"] + 1
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        per_ledger[name]["under_replicated_entries"] += n
        if r["copies_intact"] == 0:
            per_ledger[name]["entries_with_no_intact_copy"] += n
        elif r["copies_intact"] == 1 and r["copies_expected"] > 1:
            per_ledger[name]["entries_on_last_copy"] += n
        where[name].update(r["bookies_missing"])
        which[name].update(span(r))
        for b in r["bookies_missing"]:
            if b in bookies:
                bookies[b]["missing_copies"] += n
        # copies in a bookie's entry logs that its index does not hold: missing, and repairable
        for b in r.get("bookies_not_indexed") or []:
            if b in bookies:
                bookies[b]["not_indexed_copies"] += n
            per_ledger[name]["not_indexed_copies"] += n
    for r in t["corrupt_copies"]:
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        if r["bookie_id"] in bookies:
            bookies[r["bookie_id"]]["corrupt_copies"] += 1
        per_ledger[name]["corrupt_copies"] += 1
        where[name].add(r["bookie_id"])
        which[name].add(r["entry_id"])
    for r in t["divergent"]:
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        per_ledger[name]["divergent_entries"] += 1
        where[name].update(b for c in r["copies"] for b in c["bookies"])
        which[name].add(r["entry_id"])
    for r in t["missing_ledgers"]:
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        if r["bookie_id"] in bookies:
            bookies[r["bookie_id"]]["missing_ledgers"] += 1
        per_ledger[name]["bookies_missing_it"] += 1
        where[name].add(r["bookie_id"])
    for r in t["orphans"]:
        if r["bookie_id"] in bookies:
            bookies[r["bookie_id"]]["orphan_entries"] += r["entries"]
            bookies[r["bookie_id"]]["orphan_bytes"] += r["bytes"]

    def badness(item):
        v = item[1]
        return (-v.get("entries_with_no_intact_copy", 0), -v.get("entries_on_last_copy", 0),
                -v.get("under_replicated_entries", 0), -v.get("corrupt_copies", 0), -v.get("divergent_entries", 0),
                -v.get("bookies_missing_it", 0), item[0])
    worst_ledgers = [{"ledger": k, **dict(v), "bookies": sorted(where[k]),
                      "entries": entries_text({k: which[k]}, limit=ENTRIES_NAMED).replace(f"{k}:", "")}
                     for k, v in sorted(per_ledger.items(), key=badness)[:worst]]
    hist = sorted(({"copies_expected": r["copies_expected"], "copies_intact": r["copies_intact"],
                    "copies_not_indexed": r.get("copies_not_indexed") or 0, "entries": r["entries"]}
                   for r in t["replication_histogram"]),
                  key=lambda r: (r["copies_expected"], r["copies_intact"], r["copies_not_indexed"]))
    counts = {name: len(t[name]) for name in SMALL_TABLES if name not in ("disks", "replication_histogram")}
    status: dict[str, int] = defaultdict(int)
    for d in t["disks"]:
        status[d["status"]] += 1
    healthy = not any(counts.values()) and set(status) <= {"ok"}
    audited = [d for d in t["disks"] if d["status"] in AUDITED]
    fsck = _fsck_errors(out)
    verdict = HEALTHY if healthy else (NOT_AUDITED if not audited else PROBLEMS)
    finished = dt.datetime.now(dt.UTC)
    db = [d["bookie_id"] for d in audited if "DbLedgerStorage" in (d["storage_class"] or "")]
    orphans = orphan_ledgers(t["orphans"])
    return {"schema": "bkdisk.audit-summary/1", "run_id": run_id, "metadata": metadata_from, "healthy": healthy,
            "verdict": verdict, "problems": problem_sentences(t, fsck, _topics(out), db),
            "orphan_ledgers": orphans[:ORPHANS_LISTED], "orphan_ledger_count": len(orphans),
            "tool_version": _tool_version(t["disks"]),
            "started_at": started.isoformat(timespec="seconds") if started else None,
            "finished_at": finished.isoformat(timespec="seconds"),
            "seconds": round((finished - started).total_seconds(), 1) if started else None,
            "disks_by_status": dict(sorted(status.items())), "fault_rows": counts,
            "bytes_reclaimable": sum(r["bytes"] for r in t["orphans"]),
            "entries_expected": sum(h["entries"] for h in hist), "replication_histogram": hist,
            "entries_on_last_copy": sum(v.get("entries_on_last_copy", 0) for v in per_ledger.values()),
            "not_indexed_copies": sum(v.get("not_indexed_copies", 0) for v in per_ledger.values()),
            "bookies": sorted(bookies.values(), key=lambda b: b.get("bookie_id") or ""),
            "worst_ledgers": worst_ledgers,
            # DbLedgerStorage disks (replicas read from their entry logs), and disks whose index was not read.
            "db_ledger_storage": sorted(d["bookie_id"] or d["path"] for d in audited
                                        if "DbLedgerStorage" in (d["storage_class"] or "")),
            "index_not_read": sorted(d["bookie_id"] or d["path"] for d in audited if not d["index_read"]),
            "space": space_summary(out), "scrub": scrub_summary(t["disks"], scrub_interval)}


def write_reports(out: str, summary: dict[str, Any]) -> tuple[str, str]:
    js = os.path.join(out, "summary.json")
    with open(js, "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")
    page = os.path.join(out, "report.html")
    with open(page, "w") as f:
        f.write(render_html(summary))
    return js, page


def terminal_summary(s: dict[str, Any], echo: Callable[[str], None]) -> None:
    echo(f"audit {s['run_id']}: {'healthy' if s['healthy'] else 'PROBLEMS FOUND'}; disks "
         + ", ".join(f"{k} {v}" for k, v in s["disks_by_status"].items()))
    for p in s.get("problems", [])[:10]:
        echo(f"  - {p}")
    for b in s["bookies"]:
        echo(f"  {b.get('bookie_id') or '?':24} {b['status']:12} entries {b.get('entries', 0):>9}  corrupt "
             f"{b.get('corrupt_copies', 0):>5}  missing {b.get('missing_copies', 0):>6} (not indexed "
             f"{b.get('not_indexed_copies', 0)})  orphans {human_bytes(b.get('orphan_bytes', 0)):>10}"
             + (f"  ({b['error']})" if b.get("error") else ""))
    echo("  fault rows: " + ", ".join(f"{k} {v}" for k, v in s["fault_rows"].items()))
    if s["db_ledger_storage"]:
        echo("  DbLedgerStorage disks, replicas read from their entry logs: " + ", ".join(s["db_ledger_storage"]))
    space_lines(s.get("space"), echo)
    if s.get("scrub"):
        echo("  " + scrub_line(s["scrub"]))
    if s["index_not_read"]:
        echo("  disks whose index was not read (fsck's index passes skipped): " + ", ".join(s["index_not_read"]))
