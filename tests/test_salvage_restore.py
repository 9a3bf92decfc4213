"""Putting salvaged metadata back: a real ZooKeeper whose ledger znodes were deleted (as a wrong `rmr`
does), the metadata service over it, `bkdisk salvage --import`, then `bkdisk audit --metadata grpc://`
finds golden cluster-3 healthy. A ledger that survived is reported and left as it is."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import GOLDEN
from spark_session import shared_spark

from bkdisk.audit.cli import audit
from bkdisk.metaservice import zk_layout
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.store_url import open_store
from bkdisk.salvage_cli import salvage

pytestmark = pytest.mark.slow   # two local Spark runs over a real ZooKeeper

C3 = GOLDEN / "cluster-3"
BOOKIES = [str(C3 / "bookies" / b) for b in ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")]


def test_a_zookeeper_that_lost_its_ledger_znodes_is_restored_and_the_cluster_audits_healthy(zookeeper, kz, tmp_path):
    shared_spark()
    store = open_store(f"zk://{zookeeper.hosts}/restore/ledgers")
    server, port = serve(store)
    url = f"grpc://127.0.0.1:{port}"
    c = MetadataClient(f"127.0.0.1:{port}", timeout=10)
    try:
        files = sorted((C3 / "metadata").glob("*.bin"))
        for f in files:
            c.create(f.read_bytes(), ledger_id=int(f.name[:-4], 16))
        survivor = int("10", 16)
        for f in files:   # the loss: every ledger znode but one deleted in ZooKeeper itself
            lid = int(f.name[:-4], 16)
            if lid != survivor:
                kz.delete(zk_layout.ledger_path(store.root, store.kind, 0, lid))
        pw = tmp_path / "pw.txt"
        pw.write_text("".join(bytes.fromhex(lg["password_hex"]).decode() + "\n"
                              for lg in json.loads((C3 / "manifest.json").read_text())["ledgers"]))
        r = CliRunner().invoke(salvage, [*BOOKIES, "--password-candidates", str(pw), "--out", str(tmp_path / "s"),
                                         "--import", url, "-q"])
        assert r.exit_code == 0, r.output
        done = json.loads((tmp_path / "s" / "import.json").read_text())
        assert done["created"] == 5 and done["existing_left_as_they_are"] == ["10"]
        assert c.read(survivor).serialized == (C3 / "metadata" / "10.bin").read_bytes()   # never overwritten
        for f in files:
            lid = int(f.name[:-4], 16)
            got, _stat = kz.get(zk_layout.ledger_path(store.root, store.kind, 0, lid))
            if lid != survivor:
                assert got == (tmp_path / "s" / "metadata" / f.name).read_bytes()
        r = CliRunner().invoke(audit, [*BOOKIES, "--metadata", url, "--out", str(tmp_path / "a"), "-q"])
        assert r.exit_code == 0, r.output
        assert json.loads((tmp_path / "a" / "summary.json").read_text())["healthy"] is True
    finally:
        c.close()
        server.stop(0)
        store.close()
