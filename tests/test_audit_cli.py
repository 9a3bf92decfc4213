"""The audit's command lines end to end, each in its own process: `bkdisk audit` and spark-submit of
the application file give the same tables; the demo audits a generated cluster and its HTML report
draws its charts in a real headless Chromium (no server, no network)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.job import ALL_TABLES, read_tables

BIN = Path(sys.executable).parent
BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
VOLATILE = {"run_id", "host", "scan_seconds"}
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def _env() -> dict[str, str]:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)


def _rows(table) -> list:
    return sorted(repr(sorted((k, v) for k, v in r.items() if k not in VOLATILE)) for r in table.to_pylist())


@pytest.fixture(scope="module")
def faulty_cluster3(golden, tmp_path_factory):
    """A copy of cluster-3 with one flipped payload byte on bk-2 (ledger 0xabcdef, HMAC)."""
    root = tmp_path_factory.mktemp("cli") / "c3"
    shutil.copytree(golden / "cluster-3", root)
    man = json.loads((root / "bookies" / "bk-2.rack-a" / "manifest.json").read_text())
    rec = next(r for r in man["entry_log_records"] if r["ledger_id"] == str(0xABCDEF) and r["size"] > 80)
    log = root / "bookies" / "bk-2.rack-a" / "ledgers" / "current" / rec["entry_log_file"]
    data = bytearray(log.read_bytes())
    data[rec["offset"] + 4 + 32 + 20 + 3] ^= 0x10
    log.write_bytes(bytes(data))
    return root, rec["entry_id"]


@pytest.fixture(scope="module")
def cli_audit(faulty_cluster3):
    root, _eid = faulty_cluster3
    out = root.parent / "audit-cli"
    disks = root.parent / "disks.tsv"
    disks.write_text("".join(f"{b}\t{root / 'bookies' / b}\n" for b in BOOKIES))
    p = subprocess.run([str(BIN / "bkdisk"), "audit", "--disks-file", str(disks), "--metadata-dir",
                        str(root / "metadata"), "--out", str(out), "--master", "local[2]", "--conf",
                        "spark.sql.shuffle.partitions=4", "--run-id", "cli"],
                       capture_output=True, text=True, check=False, env=_env(), timeout=600)
    return p, out


def test_bkdisk_audit_reports_the_corrupt_copy_and_exits_4(cli_audit, faulty_cluster3):
    p, out = cli_audit
    _root, eid = faulty_cluster3
    assert p.returncode == 4, p.stderr[-3000:]
    assert "disks scanned 3/3" in p.stderr and "PROBLEMS FOUND" in p.stderr
    assert f"report: {out}/report.html" in p.stderr
    t = read_tables(str(out))
    (c,) = t["corrupt_copies"].to_pylist()
    assert (c["ledger_id"], c["entry_id"], c["bookie_id"]) == (0xABCDEF, eid, "bk-2.rack-a")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["healthy"] is False and summary["fault_rows"]["corrupt_copies"] == 1
    assert {b["bookie_id"]: b["corrupt_copies"] for b in summary["bookies"]}["bk-2.rack-a"] == 1
    # The DbLedgerStorage bookie was read from its entry logs, and every report says so.
    assert summary["not_scanned_index"] == ["bk-3.rack-b"]
    assert "(RocksDB index not read): bk-3.rack-b" in p.stderr
    assert "DbLedgerStorage (scanned from its entry logs; RocksDB index not read)" in (out / "report.html").read_text()


def test_spark_submit_of_the_application_file_gives_the_same_tables(cli_audit, faulty_cluster3):
    _p, cli_out = cli_audit
    root, _eid = faulty_cluster3
    out = root.parent / "audit-submit"
    import audit.spark_app
    p = subprocess.run([str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=4",
                        audit.spark_app.__file__, *[str(root / "bookies" / b) for b in BOOKIES], "--metadata-dir",
                        str(root / "metadata"), "--out", str(out), "--run-id", "submit"],
                       capture_output=True, text=True, check=False, env=_env(), timeout=600)
    assert p.returncode == 4, p.stderr[-3000:]
    a, b = read_tables(str(cli_out)), read_tables(str(out))
    for name in ALL_TABLES:
        assert _rows(a[name]) == _rows(b[name]), name
    assert set(b["replicas"]["run_id"].to_pylist()) == {"submit"}


def _render(page: Path, tmp: Path) -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed (./dev test installs Debian's chromium package)"
    profile = tmp / "chromium-profile"
    profile.mkdir()
    p = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, check=False, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_the_report_draws_its_charts_in_headless_chromium(cli_audit, tmp_path):
    _p, out = cli_audit
    html = (out / "report.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    assert "<svg" not in html   # the charts are drawn by the embedded script, not written by Python
    dom = _render(out / "report.html", tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    drawn = {m.group(1): int(m.group(2)) for m in re.finditer(r'data-chart="(\w+)" data-drawn="(\d+)"', dom)}
    n_bookies, n_hist = len(summary["bookies"]), len(summary["replication_histogram"])
    assert drawn == {"health": 3 * n_bookies, "replication": n_hist, "orphans": n_bookies}
    assert dom.count('class="bar"') == 3 * n_bookies + n_hist + n_bookies
    assert dom.count('<svg class="bk-chart"') == 3


def test_the_demo_audits_a_generated_cluster_and_prints_where_the_report_is(tmp_path):
    out = tmp_path / "demo"
    p = subprocess.run([str(BIN / "bkdisk"), "demo", "--out", str(out)], capture_output=True, text=True, check=False,
                       env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    page = out / "audit" / "report.html"
    assert f"HTML report: {page}" in p.stdout and page.is_file()
    summary = json.loads((out / "audit" / "summary.json").read_text())
    assert summary["healthy"] is True and summary["disks_by_status"] == {"ok": 4}
    assert summary["entries_expected"] == 6 * 30
