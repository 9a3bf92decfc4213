"""What a person reads after an audit: summary.json, a self-contained report.html (its chart
script embedded, no network) and the terminal summary, all computed from the tables written.

Reads the small tables only (disks, faults, the replication histogram); never the replicas.
"""
from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from audit.space_report import render_space, space_lines, space_summary
from formats.ids import LedgerId

SMALL_TABLES = ("disks", "under_replicated", "corrupt_copies", "divergent", "orphans", "missing_ledgers",
                "replication_histogram")
_CHART_JS = Path(__file__).with_name("chart.js")


def _rows(out: str, name: str) -> list[dict]:
    return pq.read_table(os.path.join(out, name)).to_pylist()


def ledger_name(scope: int, ledger: int) -> str:
    """The ledger as the rest of bkdisk prints it (the columns hold Java's signed longs)."""
    return str(LedgerId(scope % (1 << 64), ledger % (1 << 64)))


def summarize(out: str, run_id: str, metadata_from: str, worst: int = 20) -> dict[str, Any]:
    t = {name: _rows(out, name) for name in SMALL_TABLES}
    bookies: dict[str, dict[str, Any]] = {}
    for d in t["disks"]:
        b = bookies.setdefault(d["bookie_id"] or f"? {d['path']}", {
            "bookie_id": d["bookie_id"], "status": d["status"], "path": d["path"], "host": d["host"],
            "storage_class": d["storage_class"], "entries": d["entries"] or 0, "bytes": d["bytes"] or 0,
            "error": d["error"], "corrupt_copies": 0, "missing_copies": 0, "missing_ledgers": 0,
            "orphan_entries": 0, "orphan_bytes": 0})
    per_ledger: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in t["under_replicated"]:
        n = r["last_entry_id"] - r["first_entry_id"] + 1
        name = ledger_name(r["ledger_scope"], r["ledger_id"])
        per_ledger[name]["under_replicated_entries"] += n
        if r["copies_intact"] == 0:
            per_ledger[name]["entries_with_no_intact_copy"] += n
        for b in r["bookies_missing"]:
            if b in bookies:
                bookies[b]["missing_copies"] += n
    for r in t["corrupt_copies"]:
        if r["bookie_id"] in bookies:
            bookies[r["bookie_id"]]["corrupt_copies"] += 1
        per_ledger[ledger_name(r["ledger_scope"], r["ledger_id"])]["corrupt_copies"] += 1
    for r in t["divergent"]:
        per_ledger[ledger_name(r["ledger_scope"], r["ledger_id"])]["divergent_entries"] += 1
    for r in t["missing_ledgers"]:
        if r["bookie_id"] in bookies:
            bookies[r["bookie_id"]]["missing_ledgers"] += 1
        per_ledger[ledger_name(r["ledger_scope"], r["ledger_id"])]["bookies_missing_it"] += 1
    for r in t["orphans"]:
        if r["bookie_id"] in bookies:
            bookies[r["bookie_id"]]["orphan_entries"] += r["entries"]
            bookies[r["bookie_id"]]["orphan_bytes"] += r["bytes"]
    def badness(item):
        v = item[1]
        return (-v.get("entries_with_no_intact_copy", 0), -v.get("under_replicated_entries", 0),
                -v.get("corrupt_copies", 0), -v.get("divergent_entries", 0), -v.get("bookies_missing_it", 0), item[0])
    worst_ledgers = [{"ledger": k, **dict(v)} for k, v in sorted(per_ledger.items(), key=badness)[:worst]]
    hist = sorted(({"copies_expected": r["copies_expected"], "copies_intact": r["copies_intact"],
                    "entries": r["entries"]} for r in t["replication_histogram"]),
                  key=lambda r: (r["copies_expected"], r["copies_intact"]))
    counts = {name: len(t[name]) for name in SMALL_TABLES if name not in ("disks", "replication_histogram")}
    status = defaultdict(int)
    for d in t["disks"]:
        status[d["status"]] += 1
    healthy = not any(counts.values()) and set(status) <= {"ok"}
    audited = [d for d in t["disks"] if d["status"] in ("ok", "errors")]
    return {"schema": "bkdisk.audit-summary/1", "run_id": run_id, "metadata": metadata_from, "healthy": healthy,
            "disks_by_status": dict(sorted(status.items())), "fault_rows": counts,
            "bytes_reclaimable": sum(r["bytes"] for r in t["orphans"]),
            "entries_expected": sum(h["entries"] for h in hist), "replication_histogram": hist,
            "bookies": sorted(bookies.values(), key=lambda b: b.get("bookie_id") or ""),
            "worst_ledgers": worst_ledgers,
            # DbLedgerStorage disks (replicas read from their entry logs), and disks whose index was not read.
            "db_ledger_storage": sorted(d["bookie_id"] or d["path"] for d in audited
                                        if "DbLedgerStorage" in (d["storage_class"] or "")),
            "index_not_read": sorted(d["bookie_id"] or d["path"] for d in audited if not d["index_read"]),
            "space": space_summary(out)}


def write_reports(out: str, summary: dict[str, Any]) -> tuple[str, str]:
    js = os.path.join(out, "summary.json")
    with open(js, "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
        f.write("\n")
    page = os.path.join(out, "report.html")
    with open(page, "w") as f:
        f.write(render_html(summary))
    return js, page


def _table(rows: list[dict], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if r.get(c) is None else str(r.get(c)))}</td>"
                                    for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(s: dict[str, Any]) -> str:
    charts = {
        "health": {"title": "Copies by bookie", "labels": [b.get("bookie_id") or "?" for b in s["bookies"]],
                   "series": {k: [b.get(k, 0) for b in s["bookies"]]
                              for k in ("entries", "corrupt_copies", "missing_copies")}},
        "replication": {"title": "Entries by intact copies / copies expected",
                        "labels": [f"{h['copies_intact']}/{h['copies_expected']}" for h in s["replication_histogram"]],
                        "series": {"entries": [h["entries"] for h in s["replication_histogram"]]}},
        "orphans": {"title": "Bytes reclaimable from orphan ledgers, by bookie",
                    "labels": [b.get("bookie_id") or "?" for b in s["bookies"]],
                    "series": {"orphan_bytes": [b.get("orphan_bytes", 0) for b in s["bookies"]]}},
    }
    data = json.dumps(charts).replace("</", "<\\/")
    verdict = "healthy" if s["healthy"] else "problems found"
    bcols = ["bookie_id", "status", "host", "path", "storage_class", "entries", "bytes", "corrupt_copies",
             "missing_copies", "missing_ledgers", "orphan_entries", "orphan_bytes", "error"]
    lcols = ["ledger", "entries_with_no_intact_copy", "under_replicated_entries", "corrupt_copies",
             "divergent_entries", "bookies_missing_it"]
    faults = "".join(f"<li>{html.escape(k)}: {v} rows</li>" for k, v in s["fault_rows"].items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bkdisk audit {html.escape(s['run_id'])}</title>
<style>
body{{font-family:sans-serif;margin:2em;color:#222}} table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #bbb;padding:2px 6px;font-size:13px}} th{{background:#eee}}
.chart{{margin:1em 0}} .verdict{{font-weight:bold}}
</style></head><body>
<h1>bkdisk cluster audit</h1>
<p>run {html.escape(s['run_id'])}; {html.escape(s['metadata'])};
<span class="verdict">{verdict}</span>; disks by status {html.escape(json.dumps(s['disks_by_status']))};
{s['entries_expected']} entries expected; {s['bytes_reclaimable']} bytes reclaimable from orphans.</p>
<ul>{faults}</ul>
<h2>Per-bookie health</h2>{_table(s['bookies'], bcols)}
<div class="chart" data-chart="health"></div>
<h2>Replication</h2><div class="chart" data-chart="replication"></div>
<h2>Orphans</h2><div class="chart" data-chart="orphans"></div>
<h2>Worst ledgers</h2>{_table(s['worst_ledgers'], lcols)}
{render_space(s.get('space'))}
<script id="chart-data" type="application/json">{data}</script>
<script>{_CHART_JS.read_text()}</script>
</body></html>
"""


def terminal_summary(s: dict[str, Any], echo: Callable[[str], None]) -> None:
    echo(f"audit {s['run_id']}: {'healthy' if s['healthy'] else 'PROBLEMS FOUND'}; disks "
         + ", ".join(f"{k} {v}" for k, v in s["disks_by_status"].items()))
    for b in s["bookies"]:
        echo(f"  {b.get('bookie_id') or '?':24} {b['status']:12} entries {b.get('entries', 0):>9}  corrupt "
             f"{b.get('corrupt_copies', 0):>5}  missing {b.get('missing_copies', 0):>6}  orphan bytes "
             f"{b.get('orphan_bytes', 0):>10}" + (f"  ({b['error']})" if b.get("error") else ""))
    echo("  fault rows: " + ", ".join(f"{k} {v}" for k, v in s["fault_rows"].items()))
    if s["db_ledger_storage"]:
        echo("  DbLedgerStorage disks, replicas read from their entry logs: " + ", ".join(s["db_ledger_storage"]))
    space_lines(s.get("space"), echo)
    if s["index_not_read"]:
        echo("  disks whose index was not read (fsck's index passes skipped): " + ", ".join(s["index_not_read"]))
