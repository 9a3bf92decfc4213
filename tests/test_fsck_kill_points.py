"""Repair safety by fault injection: ``bookie-fsck --repair -y`` killed with SIGKILL just
before its Nth mutating system call, during every kind of action, then repaired again. Every run
converges to a clean check, every entry readable before is readable after, nothing outside the
bookie's dirs changes, and the backup folder holds the original bytes of every file replaced."""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys

import pytest

from bkdisk.bookie.lookup import read_entry
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.lastmark import LastMark, build_last_mark
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.repair.repairs import repair_bookie
from bkdisk.journal.reader import read_journal
from tests.fsck_helpers import Disk, errors, make_disk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Run the CLI with every mutating call of the os module counted; the Nth one is never made: the
# process kills itself with SIGKILL first, as a power cut or an OOM kill would stop it. numba's own
# calls are not the repair's and are not counted: it saves a kernel to its cache (a file replaced)
# whenever another process changed that kernel's cache index, which makes their number vary by run.
KILLER = """
import os, signal, sys
limit = int(os.environ["BKDISK_KILL_AT"]); seen = [0]
NUMBA = os.sep + "numba" + os.sep
def numbas_own(frame):
    while frame is not None and NUMBA not in frame.f_code.co_filename:
        frame = frame.f_back
    return frame is not None
def wrap(name):
    real = getattr(os, name)
    def counted(*a, **k):
        if not numbas_own(sys._getframe(1)):
            seen[0] += 1
            if seen[0] == limit:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)
    setattr(os, name, counted)
for name in ("write", "fsync", "link", "unlink", "replace", "rename", "ftruncate", "mkdir", "fchmod"):
    wrap(name)
from bkdisk.fsck_cli import main
main(sys.argv[1:])
"""
MAX_KILL_POINTS = 80   # every call of this repair (about 50); a cap keeps the campaign within a couple of minutes


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _tree(folder: str) -> dict[str, str | None]:
    out = {}
    for dirpath, dirs, files in os.walk(folder):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, folder)] = _digest(p) if os.path.isfile(p) else None
    return out


def _damaged(base: str) -> tuple[Disk, str]:
    """A bookie with a misplaced index, a corrupt index header and a torn journal tail, and a
    folder outside it that a symlink in the ledger dir points at."""
    d = make_disk(base)
    outside = os.path.join(base, "outside")
    os.makedirs(outside)
    with open(os.path.join(outside, "keep.bin"), "wb") as f:
        f.write(b"outside bytes")
    os.symlink(outside, os.path.join(d.dirs.ledger_dirs[0], "current", "elsewhere"))
    moved = d.written.index_files[LedgerId(0, 255)]
    cur = moved[: moved.index("/current/") + len("/current")]
    os.makedirs(os.path.join(cur, "5"))
    os.rename(moved, os.path.join(cur, "5", "ff.idx"))
    with open(d.written.index_files[LedgerId(0, 1)], "r+b") as f:
        f.write(bytes(4))
    j = d.written.journal_files[-1]
    scan = read_journal(j)
    data = [r for r in scan.records if r.kind == 0]
    for ld in d.dirs.ledger_dirs:
        with open(os.path.join(ld, "current", "lastMark"), "wb") as f:
            f.write(build_last_mark(LastMark(scan.journal_id, data[0].offset)))
    os.truncate(j, data[-1].offset + 4 + data[-1].length // 2)
    return d, outside


def _run_killed(d: Disk, backup: str, at: int) -> int:
    env = dict(os.environ, PYTHONPATH=ROOT, BKDISK_KILL_AT=str(at))
    p = subprocess.run([sys.executable, "-c", KILLER, d.root, "--metadata-dir", d.md_dir, "--repair", "-y",
                        "--no-progress", "--backup-dir", backup], env=env, capture_output=True, text=True, timeout=300)
    return p.returncode


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("kill") / "template")
    d, _ = _damaged(base)
    replaced = {p: _digest(p) for p in (d.written.index_files[LedgerId(0, 1)], d.written.journal_files[-1])}
    # How many mutating calls a whole repair makes: an unkilled run from a copy.
    probe = base + "-probe"
    shutil.copytree(base, probe, symlinks=True)
    pd = Disk(os.path.join(probe, "bookie"), d.written, os.path.join(probe, "metadata"))
    env = dict(os.environ, PYTHONPATH=ROOT, BKDISK_KILL_AT="0")
    count_script = KILLER.replace("from bkdisk.fsck_cli import main\nmain(sys.argv[1:])",
                                  "import atexit\natexit.register(lambda: print('CALLS', seen[0]))\n"
                                  "from bkdisk.fsck_cli import main\nmain(sys.argv[1:])")
    p = subprocess.run([sys.executable, "-c", count_script, pd.root, "--metadata-dir", pd.md_dir, "--repair", "-y",
                        "--no-progress", "--backup-dir", probe + "-bk"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    calls = int(p.stdout.rsplit("CALLS", 1)[1])
    return base, d, replaced, calls


@pytest.mark.slow   # a repair killed at each of its write points, each rerun
def test_a_repair_killed_at_any_point_converges_and_loses_nothing(template, tmp_path):
    base, d0, replaced, calls = template
    assert calls > 20, calls
    n = min(calls, MAX_KILL_POINTS)
    points = sorted({1 + (calls - 1) * i // (n - 1) for i in range(n)})
    killed, survived = 0, []
    for at in points:
        copy = str(tmp_path / f"at{at}")
        shutil.copytree(base, copy, symlinks=True)
        d = Disk(os.path.join(copy, "bookie"), d0.written, os.path.join(copy, "metadata"))
        os.unlink(os.path.join(d.dirs.ledger_dirs[0], "current", "elsewhere"))
        outside = os.path.join(copy, "outside")
        os.symlink(outside, os.path.join(d.dirs.ledger_dirs[0], "current", "elsewhere"))
        outside_before = _tree(outside)
        backup = os.path.join(copy, "backup")
        rc = _run_killed(d, backup, at)
        killed += rc == -signal.SIGKILL
        if rc != -signal.SIGKILL:
            survived.append((at, rc))
        opts = CheckOptions(metadata_dir=d.md_dir)
        for _ in range(3):
            rep = check_bookie(d.dirs, opts)
            if not errors(rep) and not any(f.problem.repairable for f in rep.findings):
                break
            run = repair_bookie(d.dirs, opts, backup_dir=backup)
            assert run.failed == [], [a.line() for a in run.failed]
        rep = check_bookie(d.dirs, opts)
        assert errors(rep) == [], (at, [f.line() for f in errors(rep)])
        assert not any(f.problem.repairable for f in rep.findings), (at, [f.line() for f in rep.findings])
        for (lid, eid), stored in d.written.entries.items():
            assert read_entry(d.dirs, lid, eid) == stored, (at, lid, eid)
        assert _tree(outside) == outside_before, at
        kept = {_digest(os.path.join(backup, n)) for n in os.listdir(backup)} if os.path.isdir(backup) else set()
        for original, digest in replaced.items():
            here = original.replace(os.path.dirname(d0.root), copy, 1)
            if _digest(here) != digest:       # replaced by some run: its old bytes are in the backups
                assert digest in kept, (at, here)
    assert killed == len(points), f"only {killed} of {len(points)} runs were killed (not: {survived}, of {calls} calls)"
