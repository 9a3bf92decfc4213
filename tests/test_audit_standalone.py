"""The audit on a Spark standalone cluster started from the pyspark package: a master on 127.0.0.1
and workers on 127.0.0.2-127.0.0.4 (and one more, killed mid-scan), each disk naming its host. The
audit runs as the operator runs it, `bkdisk audit --master spark://...`, in a process of its own."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from conftest import GOLDEN
from spark_cluster import CLUSTER_CONF, python_depth, start_cluster
from test_audit_spark import BOOKIES, rows

from bkdisk.audit.job import ALL_TABLES, read_tables
from bkdisk.bookie.cluster import sample_cluster, write_cluster

pytestmark = pytest.mark.slow   # a cluster start and each audit take tens of seconds on 2 shared cores

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
NO_WORKER = "127.0.0.9"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("standalone"), list(HOSTS))
    try:
        yield c
    finally:
        c.stop()   # also when a test failed: nothing is left running


def bkdisk() -> str:
    return os.path.join(os.path.dirname(sys.executable), "bkdisk")


def audit_args(disks_file, md, out, master: str, conf: dict[str, str]) -> list[str]:
    args = [bkdisk(), "audit", "--disks-file", str(disks_file), "--metadata-dir", str(md), "--out", str(out),
            "--master", master, "--quiet", "--run-id", "r"]
    for k, v in conf.items():
        args += ["--conf", f"{k}={v}"]
    return args


def disks_file(path, lines: list[tuple]) -> str:
    path.write_text("".join("\t".join(x) + "\n" for x in lines))
    return str(path)


def run(args: list[str], cluster) -> subprocess.CompletedProcess:
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if r.returncode not in (0, 4):
        pytest.fail(f"audit exited {r.returncode}:\n{r.stderr[-4000:]}\n{cluster.logs() if cluster else ''}")
    return r


def test_each_disk_is_scanned_on_its_worker_and_the_tables_equal_the_local_run(cluster, tmp_path):
    root = GOLDEN / "cluster-3"
    # Two disks on one single-core worker: the second waits for it, or is scanned there in a later wave.
    where = dict(zip(BOOKIES, (HOSTS[0], HOSTS[1], HOSTS[1])))
    named = disks_file(tmp_path / "hosts.tsv", [(b, str(root / "bookies" / b), where[b]) for b in BOOKIES])
    plain = disks_file(tmp_path / "plain.tsv", [(b, str(root / "bookies" / b)) for b in BOOKIES])
    on_cluster = run(audit_args(named, root / "metadata", tmp_path / "cluster", cluster.master_url, CLUSTER_CONF),
                     cluster)
    local = run(audit_args(plain, root / "metadata", tmp_path / "local", "local[2]",
                           {"spark.sql.shuffle.partitions": "4"}), None)
    assert on_cluster.returncode == local.returncode == 0
    c, loc = read_tables(str(tmp_path / "cluster")), read_tables(str(tmp_path / "local"))
    disks = {d["bookie_id"]: d for d in c["disks"].to_pylist()}
    assert {b: (d["status"], d["host"]) for b, d in disks.items()} == {b: ("ok", h) for b, h in where.items()}
    for name in ALL_TABLES:
        assert rows(c[name]) == rows(loc[name]), name
    assert c["replicas"].num_rows == 720


def scanning(worker) -> bool:
    """A disk's scan child is running under the worker (daemon -> task worker -> scan child)."""
    return python_depth(worker.proc.pid) >= 3


def test_a_killed_worker_and_a_host_without_one_leave_each_disk_once(cluster, tmp_path):
    # Four bookies: three on the module's workers, one on a worker started here and killed while it
    # scans; and a disk of the same cluster named for a host with no worker.
    w = write_cluster(sample_cluster(5, entries=1200, max_payload=8000, ledgers=8), str(tmp_path / "c"))
    ids = sorted(os.listdir(os.path.join(w.root, "bookies")))
    extra = "127.0.0.5"
    doomed = cluster.start_worker(extra)
    hosts = dict(zip(ids, HOSTS + (extra, NO_WORKER)))
    f = disks_file(tmp_path / "d.tsv", [(b, os.path.join(w.root, "bookies", b), hosts[b]) for b in ids])
    p = subprocess.Popen(audit_args(f, w.metadata_dir, tmp_path / "out", cluster.master_url, CLUSTER_CONF),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 600
        while not scanning(doomed):
            assert p.poll() is None, p.communicate()[1][-3000:]
            assert time.monotonic() < end, "the disk of 127.0.0.5 was never scanned there"
            time.sleep(0.05)
        doomed.kill()
        _out, err = p.communicate(timeout=900)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 4, err[-3000:] + cluster.logs()
    t = read_tables(str(tmp_path / "out"))
    disks = t["disks"].to_pylist()
    assert sorted(d["bookie_id"] for d in disks) == ids   # each disk once: none twice, none dropped
    by = {d["bookie_id"]: d for d in disks}
    for b in ids[:3]:
        assert (by[b]["status"], by[b]["host"]) in {("ok", hosts[b]), ("errors", hosts[b])}, by[b]
    for b, why in ((ids[3], extra), (ids[4], NO_WORKER)):
        assert by[b]["status"] == "not_audited", by[b]
        assert f"the disk is on host {why}" in by[b]["error"] and by[b]["host"] in HOSTS, by[b]
    # No copy of a disk not audited is counted; every other disk's copies are, once each.
    held = pq.read_table(str(tmp_path / "out" / "replicas")).to_pylist()
    assert {r["bookie_id"] for r in held} == set(ids[:3])
    keys = [(r["bookie_id"], r["ledger_dir"], r["log_id"], r["offset"]) for r in held]
    assert len(keys) == len(set(keys))
    missing = {b for r in t["under_replicated"].to_pylist() for b in r["bookies_not_audited"]}
    assert missing <= {ids[3], ids[4]} and missing


def test_a_disk_naming_a_host_is_not_read_by_a_local_run_elsewhere(tmp_path):
    root = GOLDEN / "cluster-3"
    f = disks_file(tmp_path / "d.tsv", [(BOOKIES[0], str(root / "bookies" / BOOKIES[0]), NO_WORKER)] +
                   [(b, str(root / "bookies" / b)) for b in BOOKIES[1:]])
    r = run(audit_args(f, root / "metadata", tmp_path / "out", "local[2]", {"spark.sql.shuffle.partitions": "4"}),
            None)
    assert r.returncode == 4
    t = read_tables(str(tmp_path / "out"))
    by = {d["bookie_id"]: d for d in t["disks"].to_pylist()}
    assert by[BOOKIES[0]]["status"] == "not_audited" and NO_WORKER in by[BOOKIES[0]]["error"]
    assert {r["bookie_id"] for r in t["replicas"].to_pylist()} == set(BOOKIES[1:])
