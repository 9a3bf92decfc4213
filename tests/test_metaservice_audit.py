"""The Spark audit reading ledger metadata from the metadata service (one real local Spark run per
source) writes the same tables as with the metadata folder."""
from __future__ import annotations

import pytest
from conftest import GOLDEN
from test_audit_spark import BOOKIES, rows

from bkdisk.audit.cli import audit, run_audit_command
from bkdisk.audit.job import read_tables, run_audit, spark_session
from bkdisk.audit.metadata_source import MetadataDirSource, MetadataServiceSource, open_source
from bkdisk.audit.rows import DiskInput, RunInfo
from bkdisk.formats.ids import LedgerId
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore

pytestmark = pytest.mark.slow   # a Spark audit reading metadata through the service


@pytest.fixture()
def service(tmp_path):
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store)
    yield f"127.0.0.1:{port}"
    server.stop(0)
    store.close()


def test_the_audit_gives_the_same_tables_with_metadata_from_the_service(service, tmp_path):
    root = GOLDEN / "cluster-3"
    c = MetadataClient(service)
    for f in sorted((root / "metadata").glob("*.bin")):
        c.create(f.read_bytes(), ledger_id=int(f.stem, 16))
    by_dir = MetadataDirSource(str(root / "metadata")).load()
    source = open_source(f"grpc://{service}")
    assert isinstance(source, MetadataServiceSource)
    assert source.load() == by_dir
    assert source.describe() == f"metadata service grpc://{service}"
    disks = [DiskInput(str(root / "bookies" / b)) for b in BOOKIES]
    spark = spark_session("local[2]", {"spark.sql.shuffle.partitions": "4"})
    try:
        # the command's path: `bkdisk audit --metadata grpc://HOST:PORT` hands the URL to run_audit_command
        code = run_audit_command(disks, [], f"grpc://{service}", str(tmp_path / "svc"), "local[2]",
                                 {"spark.sql.shuffle.partitions": "4"}, "r", quiet=True)
        assert code == 0
        run_audit(spark, disks, [], MetadataDirSource(str(root / "metadata")), str(tmp_path / "dir"), RunInfo.new("r"))
    finally:
        spark.stop()
    svc, folder = read_tables(str(tmp_path / "svc")), read_tables(str(tmp_path / "dir"))
    assert sorted(svc) == sorted(folder)
    for name in svc:
        assert rows(svc[name]) == rows(folder[name]), name
    assert any(svc[name].num_rows for name in svc)
    # scoped ledgers (BP-35) come through the same source, keyed by their full id
    c.create((root / "metadata" / "2a.bin").read_bytes(), scope=3, ledger_id=0x2a)
    again = MetadataServiceSource(f"grpc://{service}").load()
    assert set(again) - set(by_dir) == {LedgerId(3, 0x2a)}
    assert again[LedgerId(3, 0x2a)] == by_dir[LedgerId(0, 0x2a)]


@pytest.mark.parametrize("args", [[], ["--metadata-dir", "m", "--metadata", "grpc://127.0.0.1:1"],
                                  ["--metadata", "m"]], ids=["neither", "both", "not-grpc"])
def test_the_audit_takes_exactly_one_metadata_source(args, tmp_path):
    from click.testing import CliRunner
    r = CliRunner().invoke(audit, [str(tmp_path), "--out", str(tmp_path / "o"), *args])
    assert r.exit_code == 2 and "--metadata" in r.output and not (tmp_path / "o").exists()
