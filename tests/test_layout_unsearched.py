"""Folders left unsearched below SEARCH_DEPTH under a ROOT that holds bookies are said (one warning line),
not passed over in silence; folders that cannot hold a bookie's dirs are not."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bkdisk.bookie.layout import SEARCH_DEPTH, discover, discover_all
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats.digests import DigestType

BKDISK = Path(sys.executable).parent / "bkdisk"


def _bookie_dir(path: Path, marker: str) -> Path:
    """A bookie dir: ``path/current`` holding ``marker`` (``1.txn`` a journal, ``0.log`` an entry log)."""
    (path / "current").mkdir(parents=True)
    (path / "current" / marker).write_bytes(b"")
    return path


def _discover(root: Path) -> tuple[list, list[str]]:
    notes: list[str] = []
    return discover_all(str(root), notes), notes


def test_a_deep_bookie_beside_a_shallow_one_is_named_and_the_shallow_one_still_found(tmp_path):
    _bookie_dir(tmp_path / "bk1" / "journal", "1.txn")
    _bookie_dir(tmp_path / "bk1" / "ledgers", "0.log")
    deep = tmp_path / "a" / "b" / "c" / "d" / "bk2"   # a bookie folder 5 levels down
    _bookie_dir(deep / "journal", "1.txn")
    _bookie_dir(deep / "ledgers", "0.log")
    found, notes = _discover(tmp_path)
    assert [(b.journal_dirs, b.ledger_dirs) for b in found] == \
        [([str(tmp_path / "bk1" / "journal")], [str(tmp_path / "bk1" / "ledgers")])]
    cut = tmp_path / "a" / "b" / "c"
    assert notes == [f"folders below {cut} were not searched (more than {SEARCH_DEPTH} levels below {tmp_path}); "
                     f"give that folder as a ROOT of its own to include its bookies"]
    assert discover_all(str(cut))   # what the note says to do finds the deep bookie


def test_deep_folders_that_cannot_hold_a_bookie_dir_are_not_said(tmp_path):
    # Folders of the bookie's own dirs, beside their current/ (a bookie dir at depth 2 and one at depth 3).
    _bookie_dir(tmp_path / "bk" / "journal", "1.txn")
    (tmp_path / "bk" / "journal" / "lost+found" / "x" / "y" / "z").mkdir(parents=True)
    _bookie_dir(tmp_path / "bk" / "ledgers", "0.log")
    (tmp_path / "bk" / "ledgers" / "previous" / "a" / "b" / "c").mkdir(parents=True)
    _bookie_dir(tmp_path / "p" / "q" / "ledgers2", "1.log")
    (tmp_path / "p" / "q" / "ledgers2" / "lost+found" / "x").mkdir(parents=True)
    # Leaf folders just below the cut: a bookie dir needs a current/ inside it, two levels.
    for leaf in ("leaf1", "leaf2"):
        (tmp_path / "data" / "a" / "b" / leaf).mkdir(parents=True)
    found, notes = _discover(tmp_path)
    assert len(found) == 1 and len(found[0].ledger_dirs) == 2
    assert notes == []
    assert discover(str(tmp_path)).journal_dirs == [str(tmp_path / "bk" / "journal")]   # the other caller


def _spec(bookie_id: str) -> BookieSpec:
    ledgers = [LedgerSpec(i, [bytes([i]) * 200 for _ in range(5)], DigestType.CRC32C, b"pw") for i in (1, 2)]
    return BookieSpec(ledgers, bookie_id=bookie_id)


def test_inventory_warns_on_stderr_in_one_line_and_exits_as_before(tmp_path):
    root = tmp_path / "root"
    write_bookie(_spec("bk-shallow:3181"), str(root / "bk1"))
    before = subprocess.run([str(BKDISK), "inventory", str(root)], capture_output=True, text=True, timeout=300)
    write_bookie(_spec("bk-deep:3181"), str(root / "a" / "b" / "c" / "d" / "bk2"))
    r = subprocess.run([str(BKDISK), "inventory", str(root)], capture_output=True, text=True, timeout=300)
    assert r.returncode == before.returncode == 0, r.stderr
    assert r.stdout == before.stdout and "bookie bk-shallow:3181: 10 entries in 2 ledgers" in r.stdout
    assert "bk-deep" not in r.stdout
    assert before.stderr == ""
    cut = root / "a" / "b" / "c"
    assert r.stderr.splitlines() == [
        f"bkdisk: warning: folders below {cut} were not searched (more than {SEARCH_DEPTH} levels below {root}); "
        f"give that folder as a ROOT of its own to include its bookies"]


def test_a_root_that_is_no_folder_is_said_for_what_it_is(tmp_path):
    """Missing, a link that leads nowhere, a file, a device, and a folder this user cannot reach (run
    unprivileged, a process whose permission checks are real): each one line naming the path and why."""
    from fsck_helpers import unprivileged
    (tmp_path / "file").write_bytes(b"")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "locked" / "in").mkdir(parents=True)
    cases = {str(tmp_path / "missing"): "no such folder", str(tmp_path / "dangling"):
             "no such folder (a symbolic link that leads nowhere)", str(tmp_path / "file"): "a file, not a folder",
             "/dev/null": "not a folder", str(tmp_path / "locked" / "in"): "cannot be reached (Permission denied)"}
    (tmp_path / "locked").chmod(0)
    try:
        for root, why in cases.items():
            r = subprocess.run(unprivileged([str(BKDISK), "inventory", root]), capture_output=True, text=True,
                               timeout=60)
            assert (r.returncode, r.stderr) == (8, f"bkdisk: {root}: {why}\n"), r.stderr
    finally:
        (tmp_path / "locked").chmod(0o755)
