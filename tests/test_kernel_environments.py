"""Kernels loaded from numba's cache need none of numba's array and string implementations: a kernel
allocates no array, assigns no slice and formats no message, as each of those gives its machine code
an environment naming them, and loading it then imports them (``numba.np.arrayobj`` and the string
modules it imports: some 30 ms of a command's start, diskio/config.py). A check of every golden bookie
in a process that loads its kernels from the cache imports none of them; a planted kernel that
allocates does."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import GOLDEN

REPO = Path(__file__).resolve().parents[1]
IMPLEMENTATIONS = ("numba.np.arrayobj", "numba.cpython.unicode", "numba.cpython.charseq")

CHECK_EVERY_GOLDEN_BOOKIE = r"""
import json, sys
from pathlib import Path
from bkdisk.bookie.layout import discover
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
g = Path(sys.argv[1])
bookies = [(g / n, g / n / "metadata") for n in ("interleaved-v6-hostport", "interleaved-v4-smallpage",
                                                  "sorted-v5-bookieid", "dbstorage-v6-bookieid")]
bookies += [(b, g / "cluster-3" / "metadata") for b in sorted((g / "cluster-3" / "bookies").iterdir())]
checked = 0
for root, metadata in bookies:
    for jobs in (1, 2):
        md = str(metadata) if metadata.is_dir() else None
        check_bookie(discover(str(root)), CheckOptions(jobs=jobs, metadata_dir=md)).close()
        checked += 1
print(json.dumps({"checked": checked, "imported": sorted(m for m in sys.argv[2:] if m in sys.modules)}))
"""

PLANTED = r"""
import json, sys
import numpy as np
from bkdisk.diskio.config import kernel

@kernel
def planted(n):
    out = np.empty(n, np.int64)   # an allocation: its environment names numba's array implementation
    out[:] = 1
    return out.sum()

print(json.dumps({"sum": int(planted(3)), "imported": sorted(m for m in sys.argv[1:] if m in sys.modules)}))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env.update(extra, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def _run(args: list[str], env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_check_of_every_golden_bookie_loads_its_kernels_without_numba_implementations():
    assert (GOLDEN / "cluster-3" / "bookies").is_dir(), f"golden corpora missing under {GOLDEN}"
    args = ["-c", CHECK_EVERY_GOLDEN_BOOKIE, str(GOLDEN), *IMPLEMENTATIONS]
    _run(args, _env())   # (whatever the cache lacks is compiled here, which imports everything)
    got = _run(args, _env())
    assert got["checked"] == 14
    assert got["imported"] == [], f"a kernel's environment names numba's implementations: {got['imported']}"


def test_a_kernel_that_allocates_loads_numba_arrays_with_it(tmp_path):
    script = tmp_path / "planted_kernel.py"   # (a file: numba caches only functions that have one)
    script.write_text(PLANTED)
    env = _env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    first = _run([str(script), *IMPLEMENTATIONS], env)
    second = _run([str(script), *IMPLEMENTATIONS], env)   # loaded from the cache
    assert first["sum"] == second["sum"] == 3
    assert "numba.np.arrayobj" in second["imported"]
