"""``--deep-max-load L`` on a real Spark session: a disk's task on a host whose 1-minute load average
per CPU is above L defers the deep part of its plan (light check only) and reports those logs lagging,
"skipped for load", in the disks table, summary.json and the report; the next run below the limit
deep-checks them. The thresholds are ones the test host is surely below (10^9) and above (0: the
audit's own processes are running)."""
from __future__ import annotations

import pytest
from test_audit_scrub import DAY, T0, cluster, deep_on, spark, written  # noqa: F401 - fixtures

from bkdisk.audit.job import read_tables, run_audit
from bkdisk.audit.metadata_source import MetadataDirSource
from bkdisk.audit.report import summarize, write_reports
from bkdisk.audit.rows import RunInfo
from bkdisk.audit.scrub_run import ScrubRun
from bkdisk.audit.scrub_schedule import Schedule
from bkdisk.audit.scrub_state import read_state

pytestmark = pytest.mark.slow   # real Spark audits, three runs

SURELY_BELOW, SURELY_ABOVE = 1e9, 0.0


def audit(session, disks, root, out, state, day: int, max_load: float | None):
    scrub = ScrubRun.open(str(state), Schedule(), T0 + day * DAY, False, max_load)
    run_audit(session, disks, [], MetadataDirSource(str(root / "metadata")), str(out), RunInfo.new(f"day-{day}"),
              scrub=scrub)
    summary = summarize(str(out), f"day-{day}", "test", scrub_interval=Schedule().interval)
    write_reports(str(out), summary)
    return read_tables(str(out)), summary


def test_deep_checks_wait_while_the_host_is_above_the_load_limit(spark, cluster, tmp_path):  # noqa: F811
    root, disks = cluster
    state = tmp_path / "state"
    t0, _s = audit(spark, disks, root, tmp_path / "out", state, 0, SURELY_BELOW)
    assert all(d["logs_deep_checked"] > 0 and "skipped" not in (d["lagging_logs"] or "")
               for d in t0["disks"].to_pylist())
    due = {path: {lid for lid, s in d.logs.items() if s.due_at <= T0 + DAY + DAY / 2}
           for path, d in read_state(str(state)).items()}
    assert all(due.values())
    t1, summary = audit(spark, disks, root, tmp_path / "out", state, 1, SURELY_ABOVE)
    for d in t1["disks"].to_pylist():
        assert d["logs_deep_checked"] == 0 and d["deep_bytes"] == 0 and d["light_bytes"] == d["payload_bytes"]
        assert d["all_verified_within_interval"] is False
        for lid in due[d["path"]]:
            assert f"log {lid} (skipped for load)" in d["lagging_logs"], d["lagging_logs"]
        assert not deep_on(state, d["path"], T0 + DAY)
    sc = summary["scrub"]
    assert sc["deep_bytes"] == 0 and not sc["all_verified_within_interval"]
    assert all("skipped for load" in x["why"] for x in sc["lagging"]) and len(sc["lagging"]) == len(disks)
    assert "skipped for load" in (tmp_path / "out" / "report.html").read_text()
    # Below the limit again: the deferred logs are due, and checked.
    audit(spark, disks, root, tmp_path / "out", state, 2, None)
    for path, lids in due.items():
        assert lids <= deep_on(state, path, T0 + 2 * DAY)
