"""A ledger dir whose ``current/`` cannot be listed (permissions, a failing disk) is still one of the
bookie's dirs: inventory and fsck name it and exit 4, never check the other dirs alone and say all is
well. Root lists any folder, so the denial is made in the command's process (os.listdir refuses it)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import GOLDEN

DENY = """
import errno, os, sys
def denying(real):
    def listing(p="."):
        if os.fspath(p).rstrip("/").endswith("ledgers0/current"):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(p))
        return real(p)
    return listing
os.listdir, os.scandir = denying(os.listdir), denying(os.scandir)
sys.argv = sys.argv[1:]
"""


def _run(module: str, *argv: str) -> subprocess.CompletedProcess:
    code = DENY + f"from {module} import main\nmain()"
    return subprocess.run([sys.executable, "-c", code, "cmd", *argv], capture_output=True, text=True, timeout=300)


def test_a_ledger_dir_that_cannot_be_listed_is_named_and_the_run_exits_4(tmp_path: Path):
    root = tmp_path / "bk"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root, symlinks=True)
    listing = root / "ledgers0" / "current"
    inv = _run("bkdisk.cli", "inventory", str(root))
    assert inv.returncode == 4, inv.stderr
    assert f"warning: {listing}: cannot list (Permission denied)" in inv.stderr, inv.stderr
    fsck = _run("bkdisk.fsck_cli", str(root))
    assert fsck.returncode == 4, fsck.stderr
    assert f"FILE_UNREADABLE {listing}" in fsck.stdout and "Traceback" not in fsck.stderr, fsck.stdout[-2000:]
