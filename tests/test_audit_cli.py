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

from bkdisk.audit.job import ALL_TABLES, read_tables
from tests.report_browser import WIDTH, greenish, reddish, render

pytestmark = pytest.mark.slow   # `bkdisk audit` and the demo as processes, each starting Spark

SHOTS = Path(__file__).resolve().parents[1] / "tests-output" / "report-screenshots"

BIN = Path(sys.executable).parent
BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
VOLATILE = {"run_id", "host", "scan_seconds"}


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


def _start(argv: list[str], logs: Path, name: str) -> subprocess.Popen:
    """A command started in the background, its output in files (no pipe to fill while others run)."""
    with open(logs / f"{name}.out", "w") as out, open(logs / f"{name}.err", "w") as err:
        return subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=_env())


def _finish(p: subprocess.Popen, logs: Path, name: str) -> subprocess.CompletedProcess:
    code = p.wait(timeout=900)
    return subprocess.CompletedProcess(p.args, code, (logs / f"{name}.out").read_text(),
                                       (logs / f"{name}.err").read_text())


@pytest.fixture(scope="module")
def runs(faulty_cluster3, tmp_path_factory):
    """The module's three Spark processes, started at once: `bkdisk audit`, spark-submit of the
    application file on the same disks, and the demo. They are independent, and much of each is
    JVM and Python start-up, which overlaps."""
    import bkdisk.audit.spark_app
    root, _eid = faulty_cluster3
    logs = tmp_path_factory.mktemp("logs")
    disks = root.parent / "disks.tsv"
    disks.write_text("".join(f"{b}\t{root / 'bookies' / b}\n" for b in BOOKIES))
    out = {"cli": root.parent / "audit-cli", "submit": root.parent / "audit-submit",
           "demo": tmp_path_factory.mktemp("demo") / "demo"}
    procs = {
        # (one disk also given by path: a disk given twice is audited once)
        "cli": _start([str(BIN / "bkdisk"), "audit", str(root / "bookies" / BOOKIES[0]), "--disks-file", str(disks),
                       "--metadata-dir",
                       str(root / "metadata"), "--out", str(out["cli"]), "--master", "local[2]", "--conf",
                       "spark.sql.shuffle.partitions=4", "--conf", "spark.speculation=true", "--scans-per-host", "1",
                       "--run-id", "cli"], logs, "cli"),
        "submit": _start([str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=5",
                          bkdisk.audit.spark_app.__file__, *[str(root / "bookies" / b) for b in BOOKIES],
                          "--metadata-dir",
                          str(root / "metadata"), "--out", str(out["submit"]), "--run-id", "submit"], logs, "submit"),
        "demo": _start([str(BIN / "bkdisk"), "demo", "--out", str(out["demo"])], logs, "demo"),
    }
    return {name: (_finish(p, logs, name), out[name]) for name, p in procs.items()}


@pytest.fixture(scope="module")
def cli_audit(runs):
    return runs["cli"]


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
    # Speculation stays off whatever --conf says; the scan bound and the master are recorded.
    assert summary["spark"]["spark.speculation"] == "false" and summary["spark"]["scans_per_host"] == 1
    assert summary["spark"]["spark.master"] == "local[2]" and summary["spark"]["spark.sql.shuffle.partitions"] == "4"
    # The DbLedgerStorage bookie was read from its entry logs, and every report says so.
    assert summary["db_ledger_storage"] == ["bk-3.rack-b"]
    assert "DbLedgerStorage disks, replicas read from their entry logs: bk-3.rack-b" in p.stderr
    db = next(d for d in t["disks"].to_pylist() if d["bookie_id"] == "bk-3.rack-b")
    assert summary["index_not_read"] == ([] if db["index_read"] else ["bk-3.rack-b"])
    assert "DbLedgerStorage (replicas from its entry logs; RocksDB index " in (out / "report.html").read_text()


SPARK_NOISE = ("Using incubator modules", "log4j", " WARN ", "Setting default log level", "NativeCodeLoader",
               "loopback address", "setLogLevel")


def test_spark_start_up_noise_stays_off_the_terminal_and_the_audits_own_lines_stay(runs):
    for name in ("cli", "demo"):
        p, _out = runs[name]
        noisy = [line for line in p.stderr.splitlines() if any(n in line for n in SPARK_NOISE)]
        assert not noisy, (name, noisy)
    assert "bkdisk audit: run cli: " in runs["cli"][0].stderr and "disks scanned 3/3" in runs["cli"][0].stderr
    assert "bkdisk audit: run demo: " in runs["demo"][0].stderr + runs["demo"][0].stdout


def test_spark_submit_of_the_application_file_gives_the_same_tables(runs):
    _p, cli_out = runs["cli"]
    p, out = runs["submit"]
    assert p.returncode == 4, p.stderr[-3000:]
    a, b = read_tables(str(cli_out)), read_tables(str(out))
    for name in ALL_TABLES:
        assert _rows(a[name]) == _rows(b[name]), name
    assert set(b["replicas"]["run_id"].to_pylist()) == {"submit"}
    # spark-submit's own --conf is not overridden by the audit's defaults
    assert json.loads((out / "summary.json").read_text())["spark"]["spark.sql.shuffle.partitions"] == "5"
    assert json.loads((cli_out / "summary.json").read_text())["spark"]["spark.sql.shuffle.partitions"] == "4"


def test_an_unwritable_out_or_a_bad_spark_setting_is_one_line(faulty_cluster3, tmp_path):
    root, _eid = faulty_cluster3
    disk, md = str(root / "bookies" / BOOKIES[0]), str(root / "metadata")
    for extra, words in ((["--out", "/proc/bkdisk-audit-out"], ("/proc/bkdisk-audit-out", "cannot write")),
                         (["--out", str(tmp_path / "o"), "--conf", "spark.driver.memory=lots"],
                          ("Spark did not start",))):
        p = subprocess.run([str(BIN / "bkdisk"), "audit", disk, "--metadata-dir", md, "--master", "local[1]", *extra],
                           capture_output=True, text=True, timeout=600)
        lines = [x for x in p.stderr.splitlines() if x.startswith("bkdisk")]
        assert p.returncode == 8 and "Traceback" not in p.stderr, p.stderr[-3000:]
        assert any(all(w in x for w in words) for x in lines), p.stderr[-3000:]


def test_the_report_draws_its_charts_in_headless_chromium(cli_audit, tmp_path):
    _p, out = cli_audit
    html = (out / "report.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    assert "<svg" not in html   # the charts are drawn by the embedded script, not written by Python
    dom, _probe = render(out / "report.html", tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    drawn = {m.group(1): int(m.group(2)) for m in re.finditer(r'data-chart="(\w+)" data-drawn="(\d+)"', dom)}
    n_bookies, n_hist = len(summary["bookies"]), len(summary["replication_histogram"])
    orphans = {"orphans": n_bookies} if any(b.get("orphan_bytes") for b in summary["bookies"]) else {}
    assert drawn == {"faults": 3 * n_bookies, "entries": n_bookies, "replication": n_hist, **orphans}
    assert dom.count('class="bar"') == sum(drawn.values())


def test_the_reports_of_a_real_audit_lead_with_the_verdict_and_the_corrupt_copy(runs, faulty_cluster3, tmp_path):
    """The damaged cluster-3 and the demo's healthy cluster, audited by Spark, rendered in Chromium."""
    _root, eid = faulty_cluster3
    _p, out = runs["cli"]
    dom, probe = render(out / "report.html", tmp_path / "damaged", SHOTS / "cluster3-damaged.png")
    assert 'data-verdict="problems"' in dom and reddish(probe["verdict"]["background"])
    sentence = f"bk-2.rack-a: 1 corrupt copy in ledger {0xABCDEF}; entries {0xABCDEF}:{eid}"
    assert sentence in [p["text"] for p in probe["problems"]], probe["problems"]
    assert dom.index('class="problem"') < dom.index("data-chart=")
    assert probe["scrollWidth"] <= WIDTH
    _p, demo_out = runs["demo"]
    dom, probe = render(demo_out / "audit" / "report.html", tmp_path / "healthy", SHOTS / "demo-healthy.png")
    assert 'data-verdict="healthy"' in dom and greenish(probe["verdict"]["background"]) and not probe["problems"]
    assert all(greenish(s["background"]) for s in probe["statuses"])
