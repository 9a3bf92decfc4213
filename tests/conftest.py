"""Where the golden corpora are, once for every test: ../shared/golden beside the checkout.

BKDISK_GOLDEN overrides it (a copy elsewhere). A missing corpus stops the run with one line: the
tests that read it must fail, never skip.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# A test states what must hold, never how fast: no example is failed for its time (hypothesis's default
# deadline fails one that runs over 200 ms, which a shared CI machine or a kernel loaded from the cache
# for the first time can do).
settings.register_profile("bkdisk", deadline=None)
settings.load_profile("bkdisk")

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(os.environ.get("BKDISK_GOLDEN") or REPO.parent / "shared" / "golden").resolve()


def pytest_sessionstart(session: pytest.Session) -> None:
    if not (GOLDEN / "README.md").is_file():
        raise pytest.UsageError(f"golden corpora not found at {GOLDEN} (set BKDISK_GOLDEN)")


@pytest.fixture(scope="session")
def golden() -> Path:
    return GOLDEN


@pytest.fixture(scope="session")
def golden_bin(golden) -> bytes:
    """One ledger's metadata as BookKeeper serialized it (format 3): what the metadata-service tests store."""
    return (golden / "cluster-3" / "metadata" / "10.bin").read_bytes()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper (tests/zookeeper_fixture.py) for the tests of one module: each module its own."""
    from zookeeper_fixture import started
    server = started(tmp_path_factory.mktemp("zk"))
    yield server
    server.stop()


@pytest.fixture()
def kz(zookeeper):
    """A plain kazoo session on the module's ZooKeeper, as a BookKeeper client has."""
    from kazoo.client import KazooClient
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def golden_copy(tmp_path: Path, corpus: str = "interleaved-v6-hostport") -> Path:
    """A writable copy of one golden bookie under ``tmp_path`` (links kept as links): damage it there."""
    import shutil
    root = tmp_path / corpus
    shutil.copytree(GOLDEN / corpus, root, symlinks=True)
    return root
