"""Ctrl-C while a console script is still starting (loading click, the command's modules, the guarded
runner's fork) is e2fsck's cancelled: one line, exit 32, never a KeyboardInterrupt traceback out of
an import. The Ctrl-C is sent by an import hook as the named module loads, so each point is hit every
run."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import GOLDEN

ROOT = str(GOLDEN / "interleaved-v6-hostport")

SCRIPT = """
import os, signal, sys
from bkdisk import console

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv[1:] = {argv!r}
console.{entry}()
"""

POINTS = [("bookie_fsck", "bookie-fsck", "click", [ROOT]),
          ("bookie_fsck", "bookie-fsck", "bkdisk.bookie.layout", [ROOT]),
          ("bookie_fsck", "bookie-fsck", "bkdisk.diskio.fault_guard", [ROOT]),     # before the fork
          ("bookie_fsck", "bookie-fsck", "ctypes", [ROOT]),                        # in the forked child
          ("bookie_fsck", "bookie-fsck", "bkdisk.fsck.api", [ROOT]),               # the command running
          ("bkdisk", "bkdisk", "click", ["space", ROOT]),
          ("bkdisk", "bkdisk", "bkdisk.space_cli", ["space", ROOT]),
          ("bkdisk", "bkdisk", "bkdisk.metadata_cli", ["metadata", "list", "--server", "127.0.0.1:1"])]


@pytest.mark.parametrize("entry,prog,module,argv", POINTS, ids=[f"{p[1]}-{p[2]}" for p in POINTS])
def test_ctrl_c_while_starting_is_one_line_and_exit_32(entry, prog, module, argv):
    p = subprocess.run([sys.executable, "-c", SCRIPT.format(module=module, argv=argv, entry=entry)],
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr and "KeyboardInterrupt" not in p.stderr, p.stderr
    assert p.returncode == 32, (p.returncode, p.stderr)
    assert p.stderr.strip().splitlines() == [f"{prog}: cancelled"], p.stderr
