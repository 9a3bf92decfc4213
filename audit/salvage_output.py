"""What salvage leaves in its output folder, from the per-ledger results read a batch at a time:
``metadata/<name>.bin`` (LedgerMetadataSerDe format 3), the ``ledgers/`` Parquet table (no password:
only whether it was found), ``summary.json`` and ``report.html`` (its own page: the verdict, the
disks, then the ledgers that got no metadata or lost entries first)."""
from __future__ import annotations

import html
import json
import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from bkdisk.audit.salvage_job import LEDGERS_SCHEMA, result_batches
from bkdisk.diskio.atomic import private_file

REPORT_ROWS = 500   # ledgers listed on the page (every one is in ledgers/)
SHOWN_COLUMNS = ("ledger", "metadata_written", "no_metadata_because", "ensemble_size", "write_quorum",
                 "ack_quorum", "digest_type", "digest_type_confidence", "password_found", "last_entry_id",
                 "length", "lost_entries", "dropped_entries", "under_replicated")


def write_outputs(results_dir: str, work: str, withheld: str | None = None) -> dict:
    """Write metadata files and the ledgers table under ``work``; returns the counts for the summary.
    ``withheld``: why no metadata file is written at all (each ledger that had one says it instead)."""
    md_dir, ledgers_dir = os.path.join(work, "metadata"), os.path.join(work, "ledgers")
    os.makedirs(md_dir, mode=0o700)   # (every ledger's password)
    os.makedirs(ledgers_dir)
    counts = {"ledgers_found": 0, "metadata_written": 0, "no_metadata": 0, "ledgers_with_lost_entries": 0,
              "entries_lost": 0, "entries_dropped": 0, "under_replicated_entries": 0, "password_not_found": 0,
              "position_unknown": 0}
    with pq.ParquetWriter(os.path.join(ledgers_dir, "part-0.parquet"), LEDGERS_SCHEMA) as w:
        for b in result_batches(results_dir):
            t = pa.Table.from_batches([b])
            for name, blob in zip(t["ledger"].to_pylist(), t["metadata"].to_pylist()):
                if blob is not None and withheld is None:
                    with private_file(os.path.join(md_dir, name + ".bin")) as f:
                        f.write(blob)
            rows = t.select(LEDGERS_SCHEMA.names).to_pylist()
            if withheld is not None:
                rows = [dict(r, metadata_written=False, no_metadata_because=withheld) if r["metadata_written"] else r
                        for r in rows]
            w.write_table(pa.Table.from_pylist(rows, LEDGERS_SCHEMA))
            for r in rows:
                counts["ledgers_found"] += 1
                counts["metadata_written" if r["metadata_written"] else "no_metadata"] += 1
                counts["ledgers_with_lost_entries"] += bool(r["lost_entries"])
                counts["entries_lost"] += len(r["lost_entries"])
                counts["entries_dropped"] += len(r["dropped_entries"])
                counts["under_replicated_entries"] += len(r["under_replicated"])
                counts["password_not_found"] += r["password_confidence"] == "unknown"
                counts["position_unknown"] += r["ensembles_confidence"] == "unknown"
    return counts


def placed_on_a_missing_bookie(results_dir: str) -> str | None:
    """The first ledger whose inferred ensembles hold a position no disk read shows (its bookie's disk was
    not given), or None: proof that the disks read are not all the cluster's."""
    for b in result_batches(results_dir, columns=["ledger", "ensembles"]):
        for name, ens in zip(b.column("ledger").to_pylist(), b.column("ensembles").to_pylist()):
            if ens and any(x is None for seg in json.loads(ens) for x in seg["bookies"]):
                return name
    return None


def ledger_rows(out: str) -> Iterator[dict]:
    """The ledgers table's rows, those that need an operator first (no metadata, lost entries)."""
    pf = pq.ParquetFile(os.path.join(out, "ledgers", "part-0.parquet"))
    for urgent in (True, False):
        for b in pf.iter_batches(4096, columns=list(SHOWN_COLUMNS)):
            for r in b.to_pylist():
                if (not r["metadata_written"] or bool(r["lost_entries"])) == urgent:
                    yield r


def _cell(v: object) -> str:
    if isinstance(v, list):
        v = f"{len(v)}: {', '.join(map(str, v[:8]))}{' …' if len(v) > 8 else ''}" if v else ""
    return html.escape("" if v is None else str(v))


def write_report(out: str, summary: dict) -> str:
    """``report.html``: the verdict and counts, the disks, and up to REPORT_ROWS ledgers."""
    verdict = ("Every ledger found got its metadata, no entry lost" if summary["exit_code"] == 0 else
               f"{summary['no_metadata']} ledgers got no metadata; {summary['entries_lost']} entries lost; "
               f"{summary['disks_not_read']} disks not read")
    parts = ["<!doctype html><meta charset=utf-8><title>bkdisk salvage</title>",
             "<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}.bad{background:#fdd}</style>",
             f"<h1>bkdisk salvage: {html.escape(verdict)}</h1>",
             "<p>Import the metadata files with <code>bkdisk metadata import OUT/metadata --server HOST:PORT"
             "</code> (or <code>--import</code>); a ledger that got none lists why (add password candidates for "
             "an unknown master key).</p><table>"]
    for k in ("disks_not_read", "ledgers_found", "metadata_written", "no_metadata", "password_not_found",
              "position_unknown", "ledgers_with_lost_entries", "entries_lost", "entries_dropped",
              "under_replicated_entries"):
        parts.append(f"<tr><th>{k.replace('_', ' ')}</th><td>{summary[k]}</td></tr>")
    parts.append("</table><h2>Disks</h2><table><tr><th>bookie</th><th>path</th><th>status</th><th>error</th></tr>")
    for d in summary["disks"]:
        cls = "" if d["status"] in ("ok", "errors") else " class=bad"
        parts.append(f"<tr{cls}>" + "".join(f"<td>{_cell(d[k])}</td>" for k in ("bookie_id", "path", "status", "error"))
                     + "</tr>")
    parts.append(f"</table><h2>Ledgers</h2><p>At most {REPORT_ROWS} shown; all are in <code>ledgers/</code>.</p>"
                 "<table><tr>" + "".join(f"<th>{c.replace('_', ' ')}</th>" for c in SHOWN_COLUMNS) + "</tr>")
    for i, r in enumerate(ledger_rows(out)):
        if i == REPORT_ROWS:
            break
        cls = " class=bad" if not r["metadata_written"] or r["lost_entries"] else ""
        parts.append(f"<tr{cls}>" + "".join(f"<td>{_cell(r[c])}</td>" for c in SHOWN_COLUMNS) + "</tr>")
    parts.append("</table>")
    path = os.path.join(out, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return path


def write_summary(out: str, summary: dict) -> str:
    path = os.path.join(out, "summary.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    return path
