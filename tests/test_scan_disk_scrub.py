"""``bkdisk scan-disk ROOT --out F --state DIR`` on a bookie host, as processes: two runs a day apart
(``--as-of``) share one schedule (the second deep-reads other logs than the first), the state is in
DIR, and the audit of the files (``--scan-files``, real Spark) counts each disk's scrub in its
summary and report."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from test_audit_scrub import DAY, T0, deep_on, spark, written  # noqa: F401 - fixtures

from bkdisk.audit.job import read_tables, run_audit
from bkdisk.audit.metadata_source import MetadataDirSource
from bkdisk.audit.report import summarize, write_reports
from bkdisk.audit.rows import RunInfo
from bkdisk.audit.scrub_state import read_state

pytestmark = pytest.mark.slow   # a real Spark audit of the files

BKDISK = os.path.join(os.path.dirname(sys.executable), "bkdisk")


def scan_disk(root: str, out, state, day: int, *extra: str) -> subprocess.CompletedProcess:
    # Python's import times on stderr: the scan reads its state and its logs' hashes without loading
    # pyarrow.dataset, and converts without pandas (each a few tenths of a second; audit/arrow_no_pandas.py;
    # pyarrow's failed looks for pandas are listed as "pandas" alone)
    p = subprocess.run([BKDISK, "scan-disk", root, "--out", str(out), "--state", str(state), "--as-of",
                        (T0 + day * DAY).isoformat(), *extra], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1"))
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\|\s+(\S+)$", p.stderr, re.M))
    assert "pyarrow._parquet" in imported and "pyarrow.dataset" not in imported
    assert not [m for m in imported if m.startswith("pandas.")], sorted(m for m in imported if "pandas" in m)[:5]
    return p


def test_two_scan_disk_runs_a_day_apart_share_the_schedule_and_the_audit_reports_the_scrub(
        spark, written, tmp_path):  # noqa: F811
    roots = list(written.bookie_roots.values())
    runs: dict[int, dict[str, set[int]]] = {}
    for day in (0, 1):
        runs[day] = {}
        for i, root in enumerate(roots):
            p = scan_disk(root, tmp_path / f"day{day}-{i}.parquet", tmp_path / f"state-{i}", day)
            assert "entry logs deep-checked" in p.stderr
            runs[day][root] = deep_on(tmp_path / f"state-{i}", root, T0 + day * DAY)
    for i, root in enumerate(roots):
        logs = read_state(str(tmp_path / f"state-{i}"))[root].logs
        n = len(logs)
        assert set(read_state(str(tmp_path / f"state-{i}"))) == {root}
        for day in (0, 1):
            assert n // 7 - 1 <= len(runs[day][root]) <= -(-n // 7) + 1, (day, n, runs[day][root])
        assert not runs[0][root] & runs[1][root]   # the second run goes on with the first's schedule
        assert all(logs[k].last_deep == T0 for k in runs[0][root])
    out = tmp_path / "audit"
    files = [str(tmp_path / f"day1-{i}.parquet") for i in range(len(roots))]
    run_audit(spark, [], files, MetadataDirSource(written.metadata_dir), str(out), RunInfo.new("files"))
    summary = summarize(str(out), "files", "test")
    write_reports(str(out), summary)
    disks = read_tables(str(out))["disks"].to_pylist()
    sc = json.loads((out / "summary.json").read_text())["scrub"]
    assert sc["logs_deep_checked"] == sum(len(v) for v in runs[1].values()) == sum(d["logs_deep_checked"]
                                                                                   for d in disks)
    assert 0 < sc["deep_bytes"] < sc["payload_bytes"] and sc["all_verified_within_interval"] is False
    assert "every payload byte verified in the last 7 days: no" in (out / "report.html").read_text()


def test_scan_disk_scrub_options_go_with_state(written, tmp_path):  # noqa: F811
    root = next(iter(written.bookie_roots.values()))
    p = subprocess.run([BKDISK, "scan-disk", root, "--out", str(tmp_path / "f.parquet"), "--deep-all"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 16 and "go with --state DIR" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "f.parquet").exists()
