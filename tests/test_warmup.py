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


def _commands(tmp: Path) -> list[tuple[list[str], tuple[int, ...]]]:
    """What users run after an install, over bookies of every storage, journal version and shape the golden
    disks hold, and a bookie damaged as failing disks are: each (argv, the exit codes it may end with)."""
    checked = (0, 1, 4)
    out: list[tuple[list[str], tuple[int, ...]]] = []
    for corpus in ("interleaved-v6-hostport", "dbstorage-v6-bookieid", "interleaved-v4-smallpage",
                   "sorted-v5-bookieid"):
        root = str(GOLDEN / corpus)
        md = os.path.join(root, "metadata")
        out += [(["fsck", root, "--no-progress", "--metadata-dir", md], checked),
                (["fsck", root, "--no-progress"], checked),
                (["inventory", root, "--jsonl", "--payload-hash", "sha256"], (0,)),
                (["space", root, "--metadata-dir", md], (0,)),
                (["scan-disk", root, "--out", str(tmp / f"{corpus}.parquet"), "--metadata-dir", md], (0, 4))]
    root = GOLDEN / "interleaved-v6-hostport"
    out += [(["fsck", str(root), "--no-progress", "--jobs", "2"], checked),
            (["fsck", str(root), "--no-progress", "--memory-limit", "1", "--tmp-dir", str(tmp)], checked),
            (["dump", "entrylog", str(root / "ledgers0" / "current" / "2.log")], (0,)),
            (["dump", "journal", str(root / "journal" / "current" / "1a200497c65.txn"), "--msg"], (0,)),
            (["dump", "index", str(root), "--ledger-id", "1"], (0,))]
    cluster = GOLDEN / "cluster-3"
    bookies = sorted(str(p) for p in (cluster / "bookies").iterdir())
    for b in bookies:   # ensembles of three bookies, ensemble changes: the placement's counts
        out.append((["fsck", b, "--no-progress", "--metadata-dir", str(cluster / "metadata")], checked))
    out.append((["read-ledger", "--ledger-id", "16", "--metadata-dir", str(cluster / "metadata"), "--jsonl", *bookies],
                (0,)))
    damaged = tmp / "damaged"
    shutil.copytree(root, damaged)
    for f in sorted((damaged / "journal" / "current").glob("*.txn"))[-1:]:
        with open(f, "r+b") as fh:   # a length torn mid-journal: the search for records after it
            fh.seek(4096)
            fh.write(b"\x7f\xff\xff\x00")
    log = damaged / "ledgers0" / "current" / "2.log"
    os.truncate(log, os.path.getsize(log) - 100)   # a log cut mid-entry
    out += [(["fsck", str(damaged), "--no-progress", "--metadata-dir", str(root / "metadata")], (1, 4)),
            (["fsck", str(damaged), "--no-progress", "-n"], (1, 4))]
    return out


def test_after_warm_up_the_commands_add_nothing_to_the_cache(warmed, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(warmed, cache)
    compiled = _cache_files(cache)
    assert any(name.endswith(".nbc") for name in compiled), "warm-up compiled nothing"
    assert not (cache / "jvm").exists(), "--no-spark wrote a class archive"
    added: dict[str, set[str]] = {}
    for argv, ok in _commands(tmp_path):
        before = _cache_files(cache)
        _run(argv, cache, ok=ok)
        if _cache_files(cache) - before:
            added[" ".join(argv[:2])] = {n.split("/")[-1] for n in _cache_files(cache) - before}
    assert not added, f"commands compiled kernels that warm-up did not: {added}"


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
