"""The report's disk-space section, from the audit's ``space`` table: bytes by garbage-collector action
and by ledger state per bookie, and the ledgers and topics whose deletion would free the most old
entry logs across the cluster. A section of its own: ``space_summary`` gives its part of
summary.json, ``render_space`` its HTML and ``space_lines`` its terminal lines."""
from __future__ import annotations

import html
import os
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq

from bkdisk.bookie.gc_policy import ACTIONS
from bkdisk.bookie.ledger_states import STATES
from bkdisk.formats.byte_sizes import human_bytes

HELD_COLUMNS = ("bookie_id", "kind", "size", "action", "ledger", "state", "topic", "bytes", "sole_logs",
                "frees_bytes", "pinned_logs")
# The columns of a ledger or topic that pins old entry logs, after its name.
PINNING_COLUMNS = ["bookies", "bytes", "pinned_logs", "sole_logs", "frees_bytes"]


def space_summary(out: str, top: int = 10) -> dict[str, Any] | None:
    """The section's figures (None when the audit wrote no space table)."""
    path = os.path.join(out, "space")
    if not os.path.isdir(path):
        return None
    rows = pq.read_table(path, columns=list(HELD_COLUMNS)).to_pylist()
    bookies: dict[str, dict[str, Any]] = {}
    pin_ledger: dict[str, dict[str, Any]] = {}
    pin_topic: dict[str, dict[str, Any]] = {}
    for r in rows:
        b = bookies.setdefault(r["bookie_id"] or "?", {"bookie_id": r["bookie_id"],
                                                       **{f"{a}_bytes": 0 for a in ACTIONS},
                                                       **{f"{s}_bytes": 0 for s in STATES}})
        if r["kind"] == "log":
            b[f"{r['action']}_bytes"] += r["size"]
        elif r["kind"] == "ledger":
            b[f"{r['state']}_bytes"] += r["bytes"]
            p = pin_ledger.setdefault(r["ledger"], {"ledger": r["ledger"], "topic": r["topic"], "bookies": 0,
                                                    "bytes": 0, "pinned_logs": 0, "sole_logs": 0, "frees_bytes": 0})
        else:
            p = pin_topic.setdefault(r["topic"], {"topic": r["topic"], "bookies": 0, "bytes": 0, "pinned_logs": 0,
                                                  "sole_logs": 0, "frees_bytes": 0})
        if r["kind"] != "log":
            p["bookies"] += 1
            for k in ("bytes", "pinned_logs", "sole_logs", "frees_bytes"):
                p[k] += r[k]

    def rank(p: dict) -> tuple[int, int, int]:
        return -p["frees_bytes"], -p["pinned_logs"], -p["bytes"]

    return {"bookies": sorted(bookies.values(), key=lambda b: b["bookie_id"] or ""),
            "gc_frees_bytes": sum(b["delete_bytes"] for b in bookies.values()),
            # a ledger whose deletion frees nothing keeps no log alive on its own: not listed
            "top_ledgers": sorted((p for p in pin_ledger.values() if p["pinned_logs"] and p["frees_bytes"]),
                                  key=lambda p: (*rank(p), p["ledger"]))[:top],
            "top_topics": sorted((p for p in pin_topic.values() if p["pinned_logs"]),
                                 key=lambda p: (*rank(p), p["topic"]))[:top]}


def _cell(c: str, v: Any) -> str:
    if v is None:
        return ""
    return human_bytes(v) if c == "bytes" or c.endswith("_bytes") else str(v)


def _table(rows: list[dict], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c.removesuffix('_bytes').replace('_', ' '))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(c, r.get(c)))}</td>"
                                    for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_space(s: dict[str, Any] | None) -> str:
    """The section's HTML ('' without a space table); a table with no row is left out."""
    if not s or not s["bookies"]:
        return ""
    by_bookie = ["bookie_id"] + [f"{a}_bytes" for a in ACTIONS] + [f"{x}_bytes" for x in STATES]
    out = (f"<h2>Disk space</h2><p>Garbage collection would free {human_bytes(s['gc_frees_bytes'])} now (entry "
           f"logs with no live ledger). Entry logs by what the collector would do, and ledgers by state, per "
           f"bookie:</p>{_table(s['bookies'], by_bookie)}")
    if s["top_ledgers"]:
        out += ("<h3>Ledgers pinning old entry logs</h3>"
                f"{_table(s['top_ledgers'], ['ledger', 'topic', *PINNING_COLUMNS])}")
    if s["top_topics"]:
        out += f"<h3>Topics pinning old entry logs</h3>{_table(s['top_topics'], ['topic', *PINNING_COLUMNS])}"
    return out


def space_lines(s: dict[str, Any] | None, echo: Callable[[str], None]) -> None:
    if not s:
        return
    echo(f"  space: GC would free {human_bytes(s['gc_frees_bytes'])} now; most pinning ledgers: "
         + (", ".join(f"{p['ledger']} ({human_bytes(p['frees_bytes'])})" for p in s["top_ledgers"][:3]) or "none"))
