"""The audit's ``space`` table is the per-bookie command's rows, for every bookie of cluster-3 (one of
them DbLedgerStorage), with some ledgers' metadata removed and a topic given to others; the report
carries the space section."""
from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from click.testing import CliRunner
from spark_session import shared_spark

from bkdisk.audit.job import read_tables, run_audit
from bkdisk.audit.metadata_source import MetadataDirSource
from bkdisk.audit.report import render_html, summarize
from bkdisk.audit.rows import SPACE_FIELDS, DiskInput, RunInfo
from bkdisk.formats.metadata import parse_metadata, serialize_metadata
from bkdisk.space_cli import space

BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
GONE = (0x11, 0x2A)   # metadata removed: their bytes become garbage on every bookie
TOPIC = (0xABCDEF, b"public/default/persistent/payments")
pytestmark = pytest.mark.slow   # a Spark audit of three bookies


@pytest.fixture(scope="module")
def audited(golden, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("space-audit")
    md = tmp / "metadata"
    shutil.copytree(golden / "cluster-3" / "metadata", md)
    for lid in GONE:
        for p in md.glob(f"{lid:x}.*"):
            p.unlink()
    for p in md.glob(f"{TOPIC[0]:x}.*"):
        m = parse_metadata(p.read_bytes())
        p.write_bytes(serialize_metadata(dataclasses.replace(
            m, custom_metadata=m.custom_metadata + (("pulsar/managed-ledger", TOPIC[1]),))))
    disks = [DiskInput(str(golden / "cluster-3" / "bookies" / b)) for b in BOOKIES]
    out = tmp / "out"
    run_audit(shared_spark(), disks, [], MetadataDirSource(str(md)), str(out), RunInfo.new("space-run"))
    return disks, md, out, read_tables(str(out))


def test_the_audits_space_table_equals_the_per_bookie_commands_rows(audited):
    disks, md, _out, t = audited
    assert {d["bookie_id"]: (d["status"], d["error"]) for d in t["disks"].to_pylist()} == \
        {b: ("ok", None) for b in BOOKIES}
    fields = [name for name, _t in SPACE_FIELDS]
    table = sorted(json.dumps({k: r[k] for k in ["bookie_id"] + fields}, sort_keys=True)
                   for r in t["space"].to_pylist())
    want = []
    for d in disks:
        r = CliRunner().invoke(space, [d.path, "--metadata-dir", str(md), "--json"])
        assert r.exit_code == 0, r.output
        for row in map(json.loads, r.stdout.splitlines()):
            if row["kind"] != "summary":
                want.append(json.dumps({k: row.get(k) for k in ["bookie_id"] + fields}, sort_keys=True))
    assert table == sorted(want)
    rows = t["space"].to_pylist()
    assert {r["bookie_id"] for r in rows} == set(BOOKIES)
    gone = {str(x) for x in GONE}
    assert {r["ledger"] for r in rows if r["kind"] == "ledger" and r["state"] == "deleted"} == gone
    assert sum(r["garbage_bytes"] for r in rows if r["kind"] == "log") > 0


def test_the_report_has_space_by_state_per_bookie_and_the_top_pinning_ledgers_and_topics(audited):
    _disks, _md, out, t = audited
    s = summarize(str(out), "space-run", "metadata folder")["space"]
    assert [b["bookie_id"] for b in s["bookies"]] == sorted(BOOKIES)
    logs = [r for r in t["space"].to_pylist() if r["kind"] == "log"]
    for b in s["bookies"]:
        assert b["deleted_bytes"] > 0
        assert sum(b[f"{a}_bytes"] for a in ("delete", "compact-minor", "compact-major", "keep", "current")) == \
            sum(r["size"] for r in logs if r["bookie_id"] == b["bookie_id"])
    assert s["top_ledgers"] and all(p["pinned_logs"] > 0 for p in s["top_ledgers"])
    assert [p["topic"] for p in s["top_topics"]] == ["persistent://public/default/payments"]
    page = render_html(summarize(str(out), "space-run", "metadata folder"))
    assert "<h2>Disk space</h2>" in page and "persistent://public/default/payments" in page
