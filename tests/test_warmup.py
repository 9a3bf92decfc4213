"""`bkdisk warm-up` compiles every kernel the commands use: after it, fsck and inventory compile nothing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import GOLDEN


def _cache_files(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc")}


def _run(args: list[str], cache: Path, ok=(0,)) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env["NUMBA_CACHE_DIR"] = str(cache)
    r = subprocess.run([sys.executable, "-c", "from bkdisk.cli import main; main()", *args], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode in ok, r.stderr


def test_after_warm_up_the_commands_add_nothing_to_the_cache(tmp_path):
    cache = tmp_path / "cache"
    _run(["warm-up"], cache)
    warmed = _cache_files(cache)
    assert any(name.endswith(".nbc") for name in warmed), "warm-up compiled nothing"
    for corpus in ("interleaved-v6-hostport", "dbstorage-v6-bookieid"):
        root = str(GOLDEN / corpus)
        _run(["fsck", root, "--no-progress", "--metadata-dir", os.path.join(root, "metadata")], cache)
        _run(["fsck", root, "--no-progress"], cache)
        _run(["inventory", root, "--jsonl", "--payload-hash", "sha256"], cache)
    assert _cache_files(cache) == warmed, "a command compiled a kernel that warm-up did not"
