"""`bkdisk warm-up` compiles every kernel the commands use: after it, fsck and inventory compile nothing;
and it writes the class archive the audit's driver JVM starts from."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import GOLDEN
from conftest import run_bkdisk_with_cache as _run


def _cache_files(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc")}


@pytest.fixture(scope="module")
def warmed(warmed_cache) -> Path:
    """A fresh cache filled by `warm-up --no-spark` (conftest: one a run, shared)."""
    return warmed_cache


def test_after_warm_up_the_commands_add_nothing_to_the_cache(warmed, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(warmed, cache)
    compiled = _cache_files(cache)
    assert any(name.endswith(".nbc") for name in compiled), "warm-up compiled nothing"
    assert not (cache / "jvm").exists(), "--no-spark wrote a class archive"
    for corpus in ("interleaved-v6-hostport", "dbstorage-v6-bookieid"):
        root = str(GOLDEN / corpus)
        _run(["fsck", root, "--no-progress", "--metadata-dir", os.path.join(root, "metadata")], cache)
        _run(["fsck", root, "--no-progress"], cache)
        _run(["inventory", root, "--jsonl", "--payload-hash", "sha256"], cache)
    assert _cache_files(cache) == compiled, "a command compiled a kernel that warm-up did not"


@pytest.mark.slow   # starts Spark
def test_warm_up_archives_the_classes_of_the_audits_driver(warmed, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(warmed, cache)   # the kernels loaded, not compiled again: the archive is what is tested
    _run(["warm-up"], cache)
    archives = list((cache / "jvm").glob("spark-driver-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 1 << 20, "no class archive for the audit's driver"


def test_warm_up_lists_every_package_of_the_project():
    import tomllib

    from bkdisk.warmup import PACKAGES
    root = Path(__file__).resolve().parent.parent
    mapped = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert sorted(PACKAGES) == sorted([*mapped, "bench"])


def test_warm_up_writes_the_bytecode_of_the_project_modules():
    import importlib.util

    from bkdisk.warmup import compile_bytecode
    modules = ("bkdisk.formats.errors", "bkdisk.fsck.passes.p6_journals", "bench.run_all")
    sources = [importlib.util.find_spec(m).origin for m in modules]
    for src in sources:
        pyc = Path(importlib.util.cache_from_source(src))
        pyc.unlink(missing_ok=True)
    assert compile_bytecode()
    for src in sources:
        pyc = Path(importlib.util.cache_from_source(src))
        # a valid pyc of this source: its header records the source's mtime and size
        data = pyc.read_bytes()
        st = os.stat(src)
        assert data[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(data[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        assert int.from_bytes(data[12:16], "little") == st.st_size & 0xFFFFFFFF
