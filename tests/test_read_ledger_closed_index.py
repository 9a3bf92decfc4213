"""read-ledger run by a user the index's permissions shut out: one warning line names the unreadable index
and the disk's entry logs are scanned instead, giving the entries a run with the index readable gives.

The command runs as a process whose permission checks are real. Run as root, it keeps uid 0 but loses
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv), so that a ``chmod 000`` binds it as it binds any user;
it is not switched to another user, who may not reach the interpreter (a pyenv under /root, mode 0700)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN

from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, index_relpath

SCANNED = "; its entry logs were scanned instead"


def _read_ledger(root: Path, ledger: int) -> subprocess.CompletedProcess:
    unprivileged = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    cmd = [*unprivileged, sys.executable, "-c", "from bkdisk.cli import main; main()", "read-ledger",
           "--ledger-id", str(ledger), str(root), "--metadata-dir", str(root / "metadata"), "--jsonl"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _closed(path: Path, root: Path, ledger: int) -> subprocess.CompletedProcess:
    mode = path.stat().st_mode
    path.chmod(0)
    try:
        return _read_ledger(root, ledger)
    finally:
        path.chmod(mode)


@pytest.fixture
def bookie(tmp_path: Path) -> Path:
    root = tmp_path / "bk"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root, symlinks=True)
    return root


LEDGER = 0x1234     # its index and every entry in ledgers1


@pytest.mark.parametrize("closed, why", [
    ("index", "cannot read (Permission denied)"),
    ("index's folder", "cannot tell whether it is there (Permission denied)"),
])
def test_an_index_this_user_cannot_read_is_said_in_one_line_and_every_entry_read_from_the_logs(bookie, closed, why):
    idx = bookie / "ledgers1" / CURRENT_DIR / index_relpath(LedgerId(0, LEDGER))
    readable = _read_ledger(bookie, LEDGER)
    assert readable.returncode == 0 and readable.stderr == "", readable.stderr
    assert [json.loads(line)["lost"] for line in readable.stdout.splitlines()] == [False] * 11
    res = _closed(idx if closed == "index" else idx.parent.parent, bookie, LEDGER)   # (current/12, not current/)
    (warning,) = res.stderr.splitlines()
    assert warning.startswith(f"bkdisk: warning: {bookie}: the ledger's index is damaged (") and \
        warning.endswith(SCANNED), warning
    assert f"{idx}: {why}" in warning, warning
    assert res.returncode == 0 and res.stdout == readable.stdout


def test_a_ledger_dir_this_user_cannot_list_is_said_and_the_other_dirs_logs_scanned(bookie):
    """ledgers1/current/ closed holds ledger 0's index and the logs of all its entries but the last, which
    is in ledgers0's 2.log: that one is read, the rest are lost (nothing else holds them)."""
    cur = bookie / "ledgers1" / CURRENT_DIR
    readable = [json.loads(line) for line in _read_ledger(bookie, 0).stdout.splitlines()]
    assert [e["lost"] for e in readable] == [False] * 23
    res = _closed(cur, bookie, 0)
    assert res.returncode == 4
    warning, lost = res.stderr.splitlines()
    assert warning == (f"bkdisk: warning: {bookie}: the ledger's index is damaged ({cur}: expected a folder of index "
                       f"files this user can search, found it closed (permission denied)){SCANNED}")
    assert lost == "bkdisk: 22 of 23 entries lost (no intact copy)"
    got = [json.loads(line) for line in res.stdout.splitlines()]
    assert got[22] == readable[22] and [e["lost"] for e in got] == [True] * 22 + [False]


def test_a_ledger_dir_this_user_can_search_but_not_list_is_read_by_name(bookie):
    """ledgers1/current/ with mode 311: its index and logs are opened by name, as BookKeeper opens them;
    nothing needs it listed, so every entry is read and nothing is said."""
    cur = bookie / "ledgers1" / CURRENT_DIR
    readable = _read_ledger(bookie, 0).stdout
    mode = cur.stat().st_mode
    cur.chmod(0o311)
    try:
        res = _read_ledger(bookie, 0)
    finally:
        cur.chmod(mode)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout == readable
