"""``bkdisk audit --state --deep-all`` is today's audit: on every golden and damaged cluster the suite's
audit tests use (built by those tests' own helpers), its fault tables, replication histogram and
replicas equal those of the audit without a state, on one real Spark session."""
from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from conftest import GOLDEN
from spark_session import shared_spark
from test_audit_not_indexed import not_indexed_copy
from test_audit_spark import BOOKIES, faulted_cluster6, flip_and_drop_metadata, rows
from test_fault_catalogue_whole_kinds import CASES as WHOLE_KINDS
from test_fault_catalogue_whole_kinds import audit_reports_the_fault, damaged_copy

from bkdisk.audit.job import FAULT_TABLES, read_tables, run_audit
from bkdisk.audit.metadata_source import MetadataDirSource
from bkdisk.audit.rows import DiskInput, RunInfo
from bkdisk.audit.scrub_run import ScrubRun
from bkdisk.audit.scrub_schedule import Schedule
from bkdisk.bookie.cluster import sample_cluster, write_cluster

pytestmark = pytest.mark.slow   # two real Spark audits per cluster, fourteen clusters

T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.UTC)
COMPARED = FAULT_TABLES + ("replication_histogram", "replicas")


def cluster3(base: Path, root: Path | None = None) -> tuple[list[DiskInput], Path]:
    root = root or GOLDEN / "cluster-3"
    return [DiskInput(str(root / "bookies" / b)) for b in BOOKIES], root / "metadata"


def built(base: Path, name: str) -> tuple[list[DiskInput], Path]:
    """The cluster ``name`` under ``base``: its disks and metadata folder."""
    if name == "golden cluster-3":
        return cluster3(base)
    if name == "cluster-3, a flipped byte and a ledger's metadata removed":
        flip_and_drop_metadata(GOLDEN / "cluster-3", base / "c3")
        return cluster3(base, base / "c3")
    if name == "cluster-3, copies not indexed and a lost entry log":
        return cluster3(base, not_indexed_copy(GOLDEN / "cluster-3", base / "c3"))
    if name == "6 writer bookies, one fault each":
        f = faulted_cluster6(base)
        return f["disks"], Path(f["w"].metadata_dir)
    if name == "5 writer bookies, 2 DbLedgerStorage":
        w = write_cluster(sample_cluster(5, entries=24, max_payload=1500, db_bookies=2), str(base / "c"))
        return [DiskInput(r) for r in w.bookie_roots.values()], Path(w.metadata_dir)
    kind, fault = name.split(": ")
    root = damaged_copy(base, kind, fault)
    return [DiskInput(str(root))], root / "metadata"


NAMES = ["golden cluster-3", "cluster-3, a flipped byte and a ledger's metadata removed",
         "cluster-3, copies not indexed and a lost entry log", "6 writer bookies, one fault each",
         "5 writer bookies, 2 DbLedgerStorage"] + [f"{k}: {f}" for k, f in WHOLE_KINDS]


@pytest.mark.parametrize("name", NAMES)
def test_deep_all_gives_the_tables_of_the_audit_without_a_state(name, tmp_path):
    spark = shared_spark()
    disks, md = built(tmp_path / "cluster", name)
    tables = {}
    for side, scrub in (("plain", None),
                        ("deep-all", ScrubRun.open(str(tmp_path / "state"), Schedule(), T0, deep_all=True))):
        run_audit(spark, disks, [], MetadataDirSource(str(md)), str(tmp_path / side), RunInfo.new(side), scrub=scrub)
        tables[side] = read_tables(str(tmp_path / side))
    for t in COMPARED:
        assert rows(tables["deep-all"][t]) == rows(tables["plain"][t]), (name, t)
    if ": " in name:   # a damaged bookie of the fault catalogue: the plain audit reports its fault
        audit_reports_the_fault(name.split(": ")[1], Path(disks[0].path), tables["plain"])
    audited = [d for d in tables["deep-all"]["disks"].to_pylist() if d["status"] in ("ok", "errors")]
    assert all(d["logs_deep_checked"] == d["logs_total"] - d["lagging_logs"].count("(unreadable)")
               if d["lagging_logs"] else d["logs_deep_checked"] == d["logs_total"] for d in audited), audited
