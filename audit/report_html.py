"""report.html: one self-contained page for a person on call (its chart script embedded, no network).
The verdict first, in colour; the problems as sentences before any chart; detail lower down. Each
part of the page is one section function in SECTIONS: a new section is a function and an entry there."""
from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bkdisk.audit.report_text import LOST_METADATA_BOOKIES, RECLAIMABLE, SALVAGE, plural
from bkdisk.audit.scrub_summary import scrub_line
from bkdisk.audit.space_report import render_space
from bkdisk.formats.byte_sizes import human_bytes

_CHART_JS = Path(__file__).with_name("chart.js")
HEALTHY, PROBLEMS, NOT_AUDITED = "healthy", "problems", "not_audited"
VERDICT_TEXT = {HEALTHY: "Healthy", PROBLEMS: "Problems found", NOT_AUDITED: "Not audited"}
STATUS_WORDS = {"ok": "ok", "errors": "with fsck errors"}
PROBLEMS_SHOWN = 30   # sentences on the page; the rest are counted (summary.json has them all)


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _status(status: str | None) -> str:
    s = status or "unknown"
    kind = "ok" if s == "ok" else ("errors" if s == "errors" else "not-audited")
    return f'<span class="status status-{kind}">{_e(s.replace("_", " "))}</span>'


def _table(rows: list[dict], cols: list[tuple[str, str]], cell: Callable[[str, dict], str], cls: str) -> str:
    head = "".join(f"<th>{_e(title)}</th>" for _k, title in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(k, r)}</td>" for k, _t in cols) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def verdict_section(s: dict[str, Any]) -> str:
    v = s.get("verdict") or (HEALTHY if s["healthy"] else PROBLEMS)
    n_disks = sum(s["disks_by_status"].values())
    facts = [plural(n_disks, "disk"), ", ".join(f"{n} {STATUS_WORDS.get(k, k.replace('_', ' '))}"
                                                 for k, n in s["disks_by_status"].items()),
             f"{s['entries_expected']} entries expected"]
    if v == HEALTHY:
        facts.append("every copy intact and in place")
    else:
        facts.append(plural(len(s.get("problems", [])), "problem"))
    return (f'<header id="verdict" class="verdict verdict-{v.replace("_", "-")}" data-verdict="{v}">'
            f'<div class="verdict-word">{_e(VERDICT_TEXT[v])}</div>'
            f'<div class="verdict-facts">{_e("; ".join(facts))}</div></header>')


def scrub_section(s: dict[str, Any]) -> str:
    """The scrub's one line (--state runs only): every payload byte verified within the interval, or what lags."""
    sc = s.get("scrub")
    if not sc:
        return ""
    ok = "yes" if sc["all_verified_within_interval"] else "no"
    return (f'<section id="scrub" data-verified="{ok}"><p class="scrub">{_e(scrub_line(sc))}; '
            f'{human_bytes(sc["deep_bytes"])} deep-read, {human_bytes(sc["light_bytes"])} walked light, '
            f'{sc["logs_deep_checked"]} of {sc["logs_total"]} entry logs deep-checked this run</p></section>')


def problems_section(s: dict[str, Any]) -> str:
    ps = s.get("problems", [])
    if not ps:
        return ('<section id="problems"><h2>Problems</h2>'
                '<p class="none">None: no fault row, every disk audited.</p></section>')
    items = "".join(f'<li class="problem">{_e(p)}</li>' for p in ps[:PROBLEMS_SHOWN])
    more = (f'<p class="more">and {len(ps) - PROBLEMS_SHOWN} more (summary.json lists them all)</p>'
            if len(ps) > PROBLEMS_SHOWN else "")
    return f'<section id="problems"><h2>Problems</h2><ul class="problems">{items}</ul>{more}</section>'


def bookies_section(s: dict[str, Any]) -> str:
    cols = [("bookie_id", "bookie"), ("status", "status"), ("entries", "entries"), ("corrupt_copies", "corrupt"),
            ("missing_copies", "missing"), ("not_indexed_copies", "of which not indexed"),
            ("missing_ledgers", "ledgers lacking"), ("orphan_bytes", "orphan bytes"),
            ("storage_class", "storage"), ("error", "error")]

    def cell(k: str, r: dict) -> str:
        v = r.get(k)
        if k == "status":
            return _status(v)
        if k == "bookie_id":
            return f'<b>{_e(v or "?")}</b><div class="where">{_e(r.get("host") or "")} {_e(r.get("path") or "")}</div>'
        if k in ("corrupt_copies", "missing_copies", "not_indexed_copies", "missing_ledgers") and v:
            return f'<span class="bad">{_e(v)}</span>'
        if k == "orphan_bytes":
            return _e(human_bytes(v or 0))
        return _e(v)
    return f'<section id="bookies"><h2>Bookies</h2>{_table(s["bookies"], cols, cell, "bookies")}</section>'


def worst_ledgers_section(s: dict[str, Any]) -> str:
    rows = s["worst_ledgers"]
    if not rows:
        return '<section id="worst-ledgers"><h2>Worst ledgers</h2><p class="none">No ledger has a fault.</p></section>'
    cols = [("ledger", "ledger"), ("bookies", "bookies"), ("entries", "entries"),
            ("entries_with_no_intact_copy", "no intact copy"), ("entries_on_last_copy", "last copy"),
            ("under_replicated_entries", "under-replicated"), ("not_indexed_copies", "copies not indexed"),
            ("corrupt_copies", "corrupt"), ("divergent_entries", "divergent"),
            ("bookies_missing_it", "bookies lacking it")]

    def cell(k: str, r: dict) -> str:
        v = r.get(k)
        if k == "bookies":
            return _e(", ".join(v or []))
        if k == "entries_on_last_copy" and v:
            return f'<span class="last-copy">{_e(v)} on last copy</span>'
        if k == "entries_with_no_intact_copy" and v:
            return f'<span class="bad">{_e(v)}</span>'
        return _e(v if v else "")
    return (f'<section id="worst-ledgers"><h2>Worst ledgers</h2>'
            f'{_table(rows, cols, cell, "ledgers")}</section>')


def orphans_section(s: dict[str, Any]) -> str:
    """Ledgers no metadata names, per ledger: where, how much, and what they look like (left out when none)."""
    rows = s.get("orphan_ledgers") or []
    if not rows:
        return ""
    cols = [("ledger", "ledger"), ("verdict", "looks like"), ("bookies", "bookies"), ("entries", "entries"),
            ("bytes", "size"), ("action", "what to do")]

    def cell(k: str, r: dict) -> str:
        v = r.get(k)
        if k == "verdict":
            return f'<span class="bad">{_e(v)}</span>' if v == "metadata lost?" else _e(v)
        if k == "bookies":
            return _e(", ".join(v or []))
        if k == "bytes":
            return _e(human_bytes(v or 0))
        if k == "action":
            return _e(SALVAGE if r.get("verdict") == "metadata lost?" else RECLAIMABLE)
        return _e(v)
    n = s.get("orphan_ledger_count", len(rows))
    more = f'<p class="more">and {n - len(rows)} more (the orphans table lists them all)</p>' if n > len(rows) else ""
    return (f'<section id="orphans"><h2>Ledgers no metadata names</h2>'
            f'{_table(rows, cols, cell, "orphans")}{more}</section>')


def _replication_label(h: dict) -> str:
    gap = h.get("copies_not_indexed") or 0
    return f"{h['copies_intact']}/{h['copies_expected']}" + (f"+{gap}" if gap else "")


def charts_section(s: dict[str, Any]) -> str:
    bookies = [b.get("bookie_id") or "?" for b in s["bookies"]]
    charts: dict[str, dict[str, Any]] = {
        "faults": {"title": "Faulty copies by bookie (log scale: one copy shows)", "scale": "log", "labels": bookies,
                   "series": {k: [b.get(k, 0) for b in s["bookies"]]
                              for k in ("corrupt_copies", "missing_copies", "orphan_entries")}},
        "entries": {"title": "Entries read by bookie", "labels": bookies,
                    "series": {"entries": [b.get("entries", 0) for b in s["bookies"]]}},
        "replication": {"title": "Entries by intact copies / copies expected (+ copies not indexed; log scale)",
                        "scale": "log",
                        "labels": [_replication_label(h) for h in s["replication_histogram"]],
                        "series": {"entries": [h["entries"] for h in s["replication_histogram"]]},
                        "bad": [h["copies_intact"] < h["copies_expected"] for h in s["replication_histogram"]]},
        "orphans": {"title": "Bytes of ledgers no metadata names, by bookie", "bytes": True, "labels": bookies,
                    "series": {"orphan_bytes": [b.get("orphan_bytes", 0) for b in s["bookies"]]}},
    }
    # a chart with nothing to draw (no bar, or every bar zero) is left out
    charts = {k: c for k, c in charts.items() if any(any(v) for v in c["series"].values())}
    if not charts:
        return '<section id="charts"><h2>Charts</h2><p class="none">Nothing to draw: no disk, no entry.</p></section>'
    data = json.dumps(charts).replace("</", "<\\/")
    boxes = "".join(f'<div class="chart" data-chart="{name}"></div>' for name in charts)
    return (f'<section id="charts"><h2>Charts</h2><div class="charts">{boxes}</div>'
            f'<script id="chart-data" type="application/json">{data}</script></section>')


def notes_section(s: dict[str, Any]) -> str:
    notes = ["A copy whose entry carries no digest (DUMMY), or whose digest could not be checked (an HMAC "
             "ledger without its password), counts as intact: damage to it shows as divergent copies, found "
             "by comparing the payloads of every copy that did not fail its digest.",
             "A copy in a bookie's entry logs that its index does not hold is not served (BookKeeper reads through "
             "the index): it counts as missing, shown as not indexed; `bookie-fsck --repair` restores the index.",
             f"A ledger no metadata names on {LOST_METADATA_BOOKIES} or more bookies reads as metadata lost? (written "
             "to a quorum); on one bookie, as a deleted ledger whose space compaction reclaims."]
    if s.get("db_ledger_storage"):
        notes.append("DbLedgerStorage disks, replicas read from their entry logs: " + ", ".join(s["db_ledger_storage"]))
    if s.get("index_not_read"):
        notes.append("Disks whose index was not read (fsck's index passes skipped): " + ", ".join(s["index_not_read"]))
    return '<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul></section>"


def run_section(s: dict[str, Any]) -> str:
    rows = [("run", s["run_id"]), ("tool version", s.get("tool_version")), ("metadata", s["metadata"]),
            ("started", s.get("started_at")), ("finished", s.get("finished_at")),
            ("run time", f"{s['seconds']} s" if s.get("seconds") is not None else None),
            ("fault rows", ", ".join(f"{k} {v}" for k, v in s["fault_rows"].items())),
            ("bytes reclaimable", human_bytes(s["bytes_reclaimable"]))]
    rows += [(k, v) for k, v in (s.get("spark") or {}).items() if v is not None]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows if v is not None)
    return f'<section id="run"><h2>This run</h2><table class="run">{body}</table></section>'


def space_section(s: dict[str, Any]) -> str:
    body = render_space(s.get("space"))
    return f'<section id="space">{body}</section>' if body else ""


# The page, top to bottom.
SECTIONS: list[Callable[[dict[str, Any]], str]] = [verdict_section, problems_section, scrub_section, bookies_section,
                                                   worst_ledgers_section, orphans_section, charts_section,
                                                   space_section, notes_section, run_section]

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0 auto;padding:1em 1.5em;max-width:1240px;color:#1f2328}
h1{font-size:20px;margin:.2em 0 .6em} h2{font-size:16px;margin:1.4em 0 .4em}
.verdict{border-radius:8px;padding:14px 18px;color:#fff}
.verdict-word{font-size:28px;font-weight:700} .verdict-facts{font-size:14px;margin-top:4px}
.verdict-healthy{background:#1a7f37} .verdict-problems{background:#cf222e} .verdict-not-audited{background:#9a6700}
ul.problems{padding-left:1.2em} li.problem{color:#a40e26;margin:.25em 0;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;table-layout:fixed;font-size:13px}
td,th{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f6f8fa} table.run{width:auto;max-width:100%} table.run th{width:12em}
.where{color:#57606a;font-size:11px}
.status{display:inline-block;border-radius:4px;padding:0 6px;color:#fff;font-weight:600}
.status-ok{background:#1a7f37} .status-errors{background:#cf222e} .status-not-audited{background:#9a6700}
.bad{color:#cf222e;font-weight:700} .last-copy{background:#fff8c5;color:#7d4e00;font-weight:700;padding:0 4px}
.none{color:#1a7f37} .charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:12px}
.chart svg{width:100%;height:auto;display:block}
"""


def render_html(s: dict[str, Any]) -> str:
    body = "\n".join(section(s) for section in SECTIONS)
    verdict = VERDICT_TEXT[s.get('verdict') or (HEALTHY if s['healthy'] else PROBLEMS)]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>bkdisk audit {_e(s['run_id'])}: {_e(verdict)}</title>
<style>{STYLE}</style></head><body>
<h1>bkdisk cluster audit, run {_e(s['run_id'])}</h1>
{body}
<script>{_CHART_JS.read_text()}</script>
</body></html>
"""
