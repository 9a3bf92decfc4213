"""What a scrub run's report says, rendered in a real headless Chromium: "every payload byte verified
in the last 7 days: yes", or which disks and logs lag and why; summary.json's "scrub" object."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa

from bkdisk.audit.report import summarize, write_reports
from bkdisk.audit.scrub_columns import SCRUB_DISK_FIELDS
from tests.report_browser import render
from tests.test_audit_report import DISK, EMPTY, _write

WEEK = dt.timedelta(days=7)
T = dt.datetime(2026, 11, 7, 2, tzinfo=dt.UTC)
SCRUB = {"payload_bytes": 1000, "deep_bytes": 150, "light_bytes": 850, "logs_total": 14, "logs_deep_checked": 2,
         "all_verified_within_interval": True, "oldest_deep_check": T - WEEK, "lagging_logs": None}


def scrub_cluster(out: Path, second: dict) -> dict:
    schema = {"bookie_id": pa.string(), "path": pa.string(), "host": pa.string(), "storage_class": pa.string(),
              "index_read": pa.bool_(), "status": pa.string(), "bytes": pa.int64(), "entries": pa.int64(),
              "fsck_exit_code": pa.int32(), "error": pa.string(), "tool_version": pa.string(),
              **dict(SCRUB_DISK_FIELDS)}
    disks = [dict(DISK, **SCRUB, bookie_id="bk-1.rack-a", path="/mnt/bk-1"),
             dict(DISK, **dict(SCRUB, **second), bookie_id="bk-2.rack-b", path="/mnt/bk-2")]
    _write(out, "disks", [{k: r.get(k) for k in schema} for r in disks], schema)
    for name in EMPTY:
        _write(out, name, [{"copies_expected": 2, "copies_intact": 2, "entries": 10}]
               if name == "replication_histogram" else [])
    return summarize(str(out), "scrub-run", "metadata folder /srv/md", scrub_interval=WEEK)


def _rendered(tmp_path: Path, second: dict) -> tuple[dict, str]:
    summary = scrub_cluster(tmp_path / "out", second)
    _js, page = write_reports(str(tmp_path / "out"), summary)
    dom, _probe = render(Path(page), tmp_path / "chromium")
    return json.loads((tmp_path / "out" / "summary.json").read_text()), dom


def test_every_byte_verified_within_the_interval_says_yes(tmp_path):
    js, dom = _rendered(tmp_path, {})
    sc = js["scrub"]
    assert sc["payload_bytes"] == 2000 and sc["deep_bytes"] == 300 and sc["logs_deep_checked"] == 4
    assert sc["all_verified_within_interval"] is True and sc["lagging"] == []
    assert sc["oldest_deep_check"] == (T - WEEK).isoformat()
    assert 'data-verified="yes"' in dom and "every payload byte verified in the last 7 days: yes" in dom


def test_a_lagging_disk_is_named_with_its_logs_and_why(tmp_path):
    js, dom = _rendered(tmp_path, {"all_verified_within_interval": False, "oldest_deep_check": None,
                                   "lagging_logs": "log 3 (new), log 9 (unreadable)"})
    sc = js["scrub"]
    assert sc["all_verified_within_interval"] is False and sc["oldest_deep_check"] is None
    assert sc["lagging"] == [{"disk": "bk-2.rack-b", "why": "log 3 (new), log 9 (unreadable)"}]
    line = "every payload byte verified in the last 7 days: no; bk-2.rack-b: log 3 (new), log 9 (unreadable)"
    assert 'data-verified="no"' in dom and line in dom
