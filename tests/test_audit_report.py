"""The audit's report for a person on call, from tables like an audit writes (no Spark): the verdict
first and coloured, the problems as sentences naming bookies, ledgers and entries before any chart,
statuses coloured, small counts visible, no horizontal scroll at 1280 px, worst ledgers with their
bookies and entries, last-copy entries flagged, the run's time, tool version and metadata source.
Rendered in headless Chromium; a screenshot of each page is written for a person to look at."""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bkdisk.audit.report import render_html, summarize, write_reports
from tests.report_browser import WIDTH, greenish, reddish, render

SHOTS = Path(__file__).resolve().parents[1] / "tests-output" / "report-screenshots"
DISK = {"bookie_id": None, "path": None, "host": "h1", "storage_class": "InterleavedLedgerStorage/SortedLedgerStorage",
        "index_read": True, "status": "ok", "bytes": 10_000_000, "entries": 5000, "scan_seconds": 1.0,
        "fsck_exit_code": 0, "error": None, "tool_version": "0.1.0", "run_id": "r", "bookie_id_": None}
EMPTY = {"under_replicated": {"ledger_scope": pa.int64(), "ledger_id": pa.int64(), "first_entry_id": pa.int64(),
                              "last_entry_id": pa.int64(), "copies_expected": pa.int64(), "copies_intact": pa.int64(),
                              "bookies_missing": pa.list_(pa.string()), "bookies_with_copy": pa.list_(pa.string()),
                              "bookies_not_audited": pa.list_(pa.string())},
         "corrupt_copies": {"ledger_scope": pa.int64(), "ledger_id": pa.int64(), "entry_id": pa.int64(),
                            "bookie_id": pa.string(), "reason": pa.string(), "intact_on": pa.list_(pa.string())},
         "divergent": {"ledger_scope": pa.int64(), "ledger_id": pa.int64(), "entry_id": pa.int64(),
                       "fingerprints": pa.int64(),
                       "copies": pa.list_(pa.struct([("payload_sha256", pa.string()),
                                                     ("bookies", pa.list_(pa.string()))]))},
         "orphans": {"ledger_scope": pa.int64(), "ledger_id": pa.int64(), "bookie_id": pa.string(),
                     "entries": pa.int64(), "bytes": pa.int64()},
         "missing_ledgers": {"ledger_scope": pa.int64(), "ledger_id": pa.int64(), "bookie_id": pa.string(),
                             "entries_expected": pa.int64()},
         "findings": {"bookie_id": pa.string(), "severity": pa.string(), "code": pa.string(), "message": pa.string(),
                      "ledger_id": pa.int64(), "path": pa.string()},
         "replication_histogram": {"copies_expected": pa.int64(), "copies_intact": pa.int64(), "entries": pa.int64()}}


def _write(out: Path, name: str, rows: list[dict], schema: dict | None = None) -> None:
    (out / name).mkdir(parents=True)
    fields = schema or EMPTY[name]
    t = pa.Table.from_pylist(rows, pa.schema(list(fields.items()))) if rows or schema is None else None
    pq.write_table(t if t is not None else pa.schema(list(fields.items())).empty_table(), out / name / "part.parquet")


def _disks(out: Path, rows: list[dict]) -> None:
    schema = {"bookie_id": pa.string(), "path": pa.string(), "host": pa.string(), "storage_class": pa.string(),
              "index_read": pa.bool_(), "status": pa.string(), "bytes": pa.int64(), "entries": pa.int64(),
              "fsck_exit_code": pa.int32(), "error": pa.string(), "tool_version": pa.string()}
    _write(out, "disks", [{k: r.get(k) for k in schema} for r in rows], schema)


def healthy_cluster(out: Path) -> dict:
    _disks(out, [dict(DISK, bookie_id=f"bk-{i}.rack-a", path=f"/mnt/bk-{i}") for i in (1, 2, 3)])
    for name in EMPTY:
        if name == "replication_histogram":
            _write(out, name, [{"copies_expected": 3, "copies_intact": 3, "entries": 5000}])
        else:
            _write(out, name, [])
    return summarize(str(out), "healthy-run", "metadata folder /srv/md", started=dt.datetime.now(dt.UTC))


def damaged_cluster(out: Path) -> dict:
    long_path = "/mnt/disks/" + "very-long-mount-point-name-" * 6 + "bk-2"
    _disks(out, [dict(DISK, bookie_id="bk-1.rack-a", path="/mnt/bk-1"),
                 dict(DISK, bookie_id="bk-2.rack-b", path=long_path, status="errors", fsck_exit_code=4),
                 dict(DISK, bookie_id="bk-3.rack-a", path="/mnt/bk-3", status="unreadable", entries=None,
                      error="/mnt/bk-3: no such file or directory")])
    _write(out, "corrupt_copies", [
        {"ledger_scope": 0, "ledger_id": 289, "entry_id": 4, "bookie_id": "bk-2.rack-b", "reason": "digest mismatch",
         "intact_on": ["bk-1.rack-a"]},
        {"ledger_scope": 0, "ledger_id": 1108, "entry_id": 17, "bookie_id": "bk-2.rack-b", "reason": "digest mismatch",
         "intact_on": ["bk-1.rack-a"]}])
    _write(out, "under_replicated", [
        {"ledger_scope": 0, "ledger_id": 289, "first_entry_id": 4, "last_entry_id": 4, "copies_expected": 2,
         "copies_intact": 1, "bookies_missing": ["bk-2.rack-b"], "bookies_with_copy": ["bk-1.rack-a"],
         "bookies_not_audited": []},
        {"ledger_scope": 0, "ledger_id": 1108, "first_entry_id": 17, "last_entry_id": 17, "copies_expected": 2,
         "copies_intact": 1, "bookies_missing": ["bk-2.rack-b"], "bookies_with_copy": ["bk-1.rack-a"],
         "bookies_not_audited": []}])
    _write(out, "divergent", [{"ledger_scope": 0, "ledger_id": 256, "entry_id": 3, "fingerprints": 2,
                               "copies": [{"payload_sha256": "a" * 64, "bookies": ["bk-1.rack-a"]},
                                          {"payload_sha256": "b" * 64, "bookies": ["bk-2.rack-b"]}]}])
    _write(out, "orphans", [{"ledger_scope": 0, "ledger_id": 77, "bookie_id": "bk-1.rack-a", "entries": 12,
                             "bytes": 40960}])
    _write(out, "missing_ledgers", [])
    _write(out, "findings", [{"bookie_id": "bk-2.rack-b", "severity": "error", "code": "DIGEST_MISMATCH",
                              "message": "expected a valid CRC32C digest for ledger 289 entry 4, found a mismatch",
                              "ledger_id": 289, "path": "/mnt/bk-2/ledgers/current/0.log"}])
    _write(out, "replication_histogram", [{"copies_expected": 2, "copies_intact": 2, "entries": 153_000},
                                          {"copies_expected": 2, "copies_intact": 1, "entries": 2}])
    return summarize(str(out), "damaged-run", "metadata folder /srv/md", started=dt.datetime.now(dt.UTC))


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    SHOTS.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, build in (("healthy", healthy_cluster), ("damaged", damaged_cluster)):
        folder = tmp_path_factory.mktemp(name)
        summary = build(folder)
        _js, page = write_reports(str(folder), summary)
        dom, probe = render(Path(page), folder / "chromium", SHOTS / f"{name}.png")
        out[name] = (summary, Path(page), dom, probe)
    return out


def test_the_problems_are_sentences_naming_bookies_ledgers_and_entries():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        s = damaged_cluster(Path(d))
    ps = s["problems"]
    assert "bk-2.rack-b: 2 corrupt copies in ledgers 289, 1108; entries 289:4, 1108:17" in ps
    assert not any(p.startswith("bk-2.rack-b: 2 missing") for p in ps), ps   # a corrupt copy is said once
    assert any(p.startswith("bk-3.rack-a: unreadable (/mnt/bk-3: no such file") for p in ps)
    assert any(p.startswith("2 entries down to their last intact copy (on bk-1.rack-a): 289:4, 1108:17")
               for p in ps), ps
    assert any("ledger 256 entry 3: 2 different payloads" in p for p in ps)
    assert any(p.startswith("bk-2.rack-b: fsck found 1 error on its disk; the first: DIGEST_MISMATCH") for p in ps)
    assert s["verdict"] == "problems" and s["entries_on_last_copy"] == 2
    (w289,) = [w for w in s["worst_ledgers"] if w["ledger"] == "289"]
    assert w289["bookies"] == ["bk-2.rack-b"] and w289["entries"] == "4" and w289["entries_on_last_copy"] == 1
    assert s["tool_version"] and s["started_at"] and s["seconds"] is not None


def test_a_damaged_cluster_page_leads_with_a_red_verdict_and_its_problems(pages):
    summary, page, dom, probe = pages["damaged"]
    assert 'data-verdict="problems"' in dom and reddish(probe["verdict"]["background"]), probe["verdict"]
    assert probe["verdict"]["text"].startswith("Problems found")
    shown = [p["text"] for p in probe["problems"]]
    assert shown == summary["problems"] and all(reddish(p["color"]) for p in probe["problems"])
    # the sentences come before any chart, the verdict before them
    assert dom.index('id="verdict"') < dom.index('class="problem"') < dom.index("data-chart=")
    colours = {s["text"]: s["background"] for s in probe["statuses"]}
    assert greenish(colours["ok"]) and reddish(colours["errors"]) and not greenish(colours["unreadable"])
    assert probe["lastCopy"] and "on last copy" in probe["lastCopy"]["text"]
    assert probe["scrollWidth"] <= WIDTH, probe["scrollWidth"]
    # a fault count of 2 beside 153,000 healthy entries is a bar you can see, labelled
    bars = re.findall(r'<rect class="bar"[^>]*?height="([\d.]+)"[^>]*?data-value="(\d+)"', dom)
    small = [float(h) for h, v in bars if v == "2"]
    assert small and min(small) >= 3, bars
    # worst ledgers name the bookie and the entries
    table = dom[dom.index('class="ledgers"'):]
    assert "bk-2.rack-b" in table[:table.index("</table>")] and "1108" in table
    for fact in ("damaged-run", "0.1.0", "metadata folder /srv/md", "run time"):
        assert fact in dom, fact


def test_a_healthy_cluster_page_says_so_in_green(pages):
    _summary, page, dom, probe = pages["healthy"]
    assert 'data-verdict="healthy"' in dom and greenish(probe["verdict"]["background"])
    assert probe["problems"] == [] and "None: no fault row" in dom
    assert probe["statuses"] and all(greenish(s["background"]) for s in probe["statuses"])
    assert probe["scrollWidth"] <= WIDTH


def test_the_page_is_one_file_that_loads_nothing(pages):
    for _s, page, _dom, _probe in pages.values():
        text = page.read_text()
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)
        assert not re.search(r"<(link|img|iframe)\b|\bsrc=", text)
    assert {p.name for p in SHOTS.glob("*.png")} >= {"healthy.png", "damaged.png"}


def test_the_page_is_built_from_section_functions():
    from bkdisk.audit import report_html as report
    assert report.SECTIONS[:2] == [report.verdict_section, report.problems_section]
    s = json.loads(json.dumps({"run_id": "x", "metadata": "m", "healthy": True, "verdict": "healthy", "problems": [],
                               "disks_by_status": {}, "fault_rows": {}, "bytes_reclaimable": 0, "entries_expected": 0,
                               "replication_histogram": [], "bookies": [], "worst_ledgers": []}))
    page = render_html(s)
    for part in ("verdict", "problems", "bookies", "worst-ledgers", "charts", "notes", "run"):
        assert f'id="{part}"' in page, part
