"""Whole kinds of file gone from a real bookie (every entry log, every index, the journal dir's
contents, one ledger dir's contents), on the golden bookies of both storage kinds: fsck, the
inventory, scan-disk and the audit each say so (findings, exit bit 4), never with a traceback, and
fsck's --json stays valid."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest

from tests.conftest import golden_copy

BIN = Path(sys.executable).parent
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "specs" / "schemas" / "fsck.schema.json").read_text())
KINDS = ("interleaved-v6-hostport", "dbstorage-v6-bookieid")
INDEX_DBS = ("locations", "ledgers")   # DbLedgerStorage's RocksDB indexes in each ledger dir's current/


def _ledger_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith("ledgers") and p.is_dir())


def every_entry_log_gone(root: Path) -> None:
    for d in _ledger_dirs(root):
        for log in (d / "current").glob("*.log"):
            log.unlink()


def every_index_gone(root: Path) -> None:
    for d in _ledger_dirs(root):
        for idx in (d / "current").rglob("*.idx"):
            idx.unlink()
        for db in INDEX_DBS:
            shutil.rmtree(d / "current" / db, ignore_errors=True)


def the_journal_dir_empty(root: Path) -> None:
    for p in (root / "journal").iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def a_ledger_dir_empty(root: Path) -> None:
    d = _ledger_dirs(root)[0]
    for p in d.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


FAULTS = {f.__name__: f for f in (every_entry_log_gone, every_index_gone, the_journal_dir_empty, a_ledger_dir_empty)}
CASES = [(k, f) for k in KINDS for f in FAULTS]


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """Each (storage kind, fault): a damaged copy of that golden bookie."""
    return {(kind, fault): damaged_copy(tmp_path_factory.mktemp(fault), kind, fault) for kind, fault in CASES}


def damaged_copy(tmp: Path, kind: str, fault: str) -> Path:
    """A writable copy of the golden bookie ``kind`` under ``tmp``, with ``fault``."""
    root = golden_copy(tmp, kind)
    for p in root.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    before = sum(1 for _ in root.rglob("*"))
    FAULTS[fault](root)
    assert sum(1 for _ in root.rglob("*")) < before   # the fault removed something
    return root


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *map(str, args[1:])], capture_output=True, text=True, timeout=300)


def _clean(r: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-3000:]


@pytest.mark.parametrize("kind,fault", CASES)
def test_fsck_reports_the_fault_and_exits_4_with_valid_json(damaged, kind, fault):
    root = damaged[(kind, fault)]
    text = _run("bookie-fsck", root, "--metadata-dir", root / "metadata", "-j", "1")
    _clean(text)
    assert text.returncode & 4 and text.returncode < 8, (text.returncode, text.stdout[-3000:], text.stderr[-2000:])
    assert "ERROR" in text.stdout
    js = _run("bookie-fsck", root, "--metadata-dir", root / "metadata", "-j", "1", "--json")
    _clean(js)
    doc = json.loads(js.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["summary"]["exit_code"] == js.returncode == text.returncode
    assert doc["summary"]["errors"] > 0 and any(f["severity"] == "error" for f in doc["findings"])
    plan = _run("bookie-fsck", root, "--metadata-dir", root / "metadata", "-j", "1", "-n", "--json")
    _clean(plan)
    jsonschema.validate(json.loads(plan.stdout), SCHEMA)


def test_every_entry_log_gone_is_one_finding_per_log_naming_what_it_took(damaged):
    for kind in KINDS:
        root = damaged[(kind, "every_entry_log_gone")]
        doc = json.loads(_run("bookie-fsck", root, "--json").stdout)
        causes = [f for f in doc["findings"] if f["code"] == "LOG_MISSING"]
        assert causes, [f["code"] for f in doc["findings"]]
        assert all("lost ledger" in f["message"] for f in causes)
        located = [f for f in doc["findings"] if f["code"].endswith("LOCATION_MISSING_LOG")]
        assert located and all(f["caused_by"]["code"] == "LOG_MISSING" for f in located)


def _disk_note_as_expected(fault: str, error: str | None) -> bool:
    """An audited disk's row carries no error, but for one whose ledger dir cannot be listed: it has
    no space rows (which logs that dir held, and so what they pin, cannot be counted) and says why."""
    if fault == "a_ledger_dir_empty":
        return error is not None and error.startswith("space not computed: ") and "cannot list" in error
    return error is None


@pytest.mark.parametrize("kind,fault", CASES)
def test_the_inventory_and_scan_disk_say_so_without_a_traceback(damaged, kind, fault, tmp_path):
    root = damaged[(kind, fault)]
    inv = _run("bkdisk", "inventory", root, "--metadata-dir", root / "metadata", "--jsonl")
    _clean(inv)
    rows = [json.loads(l) for l in inv.stdout.splitlines()]
    # each fault is said in one warning naming what is gone, exit 4; entries still in their logs are listed
    said = {"every_entry_log_gone": "no entry log in any ledger dir", "a_ledger_dir_empty": "cannot list",
            "every_index_gone": "no index", "the_journal_dir_empty": "no journal file"}[fault]
    assert inv.returncode == 4 and "bkdisk: warning: " in inv.stderr and said in inv.stderr, (inv.returncode,
                                                                                               inv.stderr)
    assert bool(rows) == (fault != "every_entry_log_gone"), len(rows)
    out = tmp_path / "disk.parquet"
    sd = _run("bkdisk", "scan-disk", root, "--metadata-dir", root / "metadata", "--out", out)
    _clean(sd)
    assert sd.returncode == 4, (sd.returncode, sd.stdout, sd.stderr[-2000:])
    t = pq.read_table(out).to_pylist()
    (disk,) = [r for r in t if r["table"] == "disks"]
    assert disk["status"] == "errors" and _disk_note_as_expected(fault, disk["error"]), disk
    assert any(r["table"] == "findings" and r["severity"] == "error" for r in t), "no error findings in the file"


def audit_reports_the_fault(fault: str, root: Path, tables: dict) -> None:
    """The tables of an audit of the damaged bookie at ``root`` alone (the rest: metadata's other
    bookies): its disk audited with errors and its findings. Each case's audit runs in
    test_audit_scrub_deep_all.py, which audits every case of this catalogue."""
    (disk,) = [d for d in tables["disks"].to_pylist() if d["path"] == str(root)]
    assert disk["status"] == "errors" and _disk_note_as_expected(fault, disk["error"]), (fault, disk)
    assert any(f["severity"] == "error" and f["bookie_id"] == disk["bookie_id"]
               for f in tables["findings"].to_pylist()), fault


@pytest.mark.slow
def test_an_audit_process_of_a_damaged_bookie_exits_4_with_its_one_line_reports(damaged, tmp_path):
    """One `bkdisk audit` process end to end on a damaged bookie (exit 4, no traceback); its Python
    workers (their import times on stderr) never load pandas: the metadata and disk tasks convert
    without it (audit/arrow_no_pandas.py), as each disk's forked scan would load it anew."""
    root = damaged[("dbstorage-v6-bookieid", "every_entry_log_gone")]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    p = subprocess.run([str(BIN / "bkdisk"), "audit", str(root), "--metadata-dir", str(root / "metadata"),
                        "--out", str(tmp_path / "cli"), "--master", "local[1]",
                        "--conf", "spark.executorEnv.PYTHONPROFILEIMPORTTIME=1"], capture_output=True, text=True,
                       env=env, timeout=900)
    assert p.returncode == 4 and "Traceback" not in p.stderr, p.stderr[-3000:]
    imported = set(re.findall(r"^import time:.*\|\s+(\S+)$", p.stderr, re.M))
    assert "bkdisk.audit.metadata_tables" in imported and "bkdisk.audit.rows" in imported   # the workers'
    assert not [m for m in imported if m.startswith("pandas.")], "a Python worker of the audit loaded pandas"
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["healthy"] is False and "IndexError" not in json.dumps(summary)
    statuses = {b["bookie_id"]: b["status"] for b in summary["bookies"]}
    assert "errors" in statuses.values() and "IndexError" not in p.stderr, statuses
