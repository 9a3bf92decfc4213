"""Where the golden corpora are, once for every test: ../shared/golden beside the checkout.

BKDISK_GOLDEN overrides it (a copy elsewhere). A missing corpus stops the run with one line: the
tests that read it must fail, never skip.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
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
    if not os.environ.get("PYTEST_XDIST_WORKER") and _wants_warmed(session.config):
        _warm_cache_begun(session.config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]


def _wants_warmed(config: pytest.Config) -> bool:
    """Whether the run's tests may include the modules that read the warmed cache (a run of other
    modules alone starts no warm-up)."""
    users = ("test_warmup.py", "test_scan_fallbacks.py", "test_numba_cache.py")
    given = [str(a) for a in config.args]
    return any(os.path.isdir(a) or any(u in a for u in users) for a in given) or not given


@pytest.fixture(scope="session")
def golden() -> Path:
    return GOLDEN


@pytest.fixture(scope="session")
def golden_bin(golden) -> bytes:
    """One ledger's metadata as BookKeeper serialized it (format 3): what the metadata-service tests store."""
    return (golden / "cluster-3" / "metadata" / "10.bin").read_bytes()


def _bkdisk_with_cache(args: list[str], cache: Path) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of `bkdisk ARGS` whose numba cache is ``cache`` (the driver's class archive
    under it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env["NUMBA_CACHE_DIR"] = str(cache)
    env["BKDISK_JVM_ARCHIVE_DIR"] = str(cache / "jvm")
    return [sys.executable, "-c", "from bkdisk.cli import main; main()", *args], env


def run_bkdisk_with_cache(args: list[str], cache: Path, ok=(0,)) -> None:
    argv, env = _bkdisk_with_cache(args, cache)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode in ok, r.stderr


# A numba cache filled by `warm-up --no-spark` from empty, once a run, under the run's folder (above each
# worker's): begun in the background when the run starts, as compiling every kernel takes minutes, and
# awaited (or made, had that failed) by the first test that asks.
_WARMED = ("warmed-cache", "warmed-cache.done", "warmed-cache.lock")
_WARM_IN_BACKGROUND = r"""
import fcntl, os, subprocess, sys
cache, done, lock = sys.argv[1:4]
with open(lock, "w") as held:
    fcntl.flock(held, fcntl.LOCK_EX)
    if not os.path.exists(done) and subprocess.run(sys.argv[4:], capture_output=True).returncode == 0:
        open(done, "w").close()
"""
_background: list[subprocess.Popen] = []


def _warm_cache_begun(folder: Path) -> None:
    cache, done, lock = (folder / n for n in _WARMED)
    argv, env = _bkdisk_with_cache(["warm-up", "--no-spark"], cache)
    _background.append(subprocess.Popen([sys.executable, "-c", _WARM_IN_BACKGROUND, str(cache), str(done),
                                         str(lock), *argv], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for p in _background:   # (a run that ended before it: nothing left compiling)
        if p.poll() is None:
            os.killpg(p.pid, 9)
        p.wait()


@pytest.fixture(scope="session")
def warmed_cache(tmp_path_factory) -> Path:
    """The run's warmed numba cache folder: read it, or copy it before writing."""
    folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = folder.parent
    cache, done, lock = (folder / n for n in _WARMED)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)   # (held by the background warm-up while it runs)
        if not done.exists():
            shutil.rmtree(cache, ignore_errors=True)
            run_bkdisk_with_cache(["warm-up", "--no-spark"], cache)
            done.touch()
    return cache


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
