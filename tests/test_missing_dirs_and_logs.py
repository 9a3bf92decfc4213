"""A dir the cookie names whose current/ is gone or leads nowhere (an unmounted disk behind a link, a
loop, a file in its place), and an entry log that cannot be read, are said by name: fsck reports the
dir, the inventory warns and exits 4, and the readable logs are still listed. Before, the inventory
dropped such a dir without a word and exited 0, and stopped at the first unreadable log."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from conftest import GOLDEN, golden_copy

from bkdisk.fsck_cli import fsck_command
from bkdisk.inventory_cli import inventory

CORPUS = "interleaved-v6-hostport"
GONE = "ledgers1"


def _entries_per_dir() -> dict[str, int]:
    doc = json.loads((GOLDEN / CORPUS / "manifest.json").read_text())
    r = CliRunner().invoke(inventory, [str(GOLDEN / CORPUS), "--jsonl"])
    assert r.exit_code == 0
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == len(doc["entries"])
    out: dict[str, int] = {}
    for row in rows:
        out[row["ledger_dir"]] = out.get(row["ledger_dir"], 0) + 1
    return out


def _break_current(root, how: str) -> str:
    cur = root / GONE / "current"
    for p in sorted(cur.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    cur.rmdir()
    if how == "dangling link":
        os.symlink("/nonexistent/unmounted-disk", cur)
        return "a symbolic link to /nonexistent/unmounted-disk, which leads nowhere (no such file or directory)"
    if how == "link loop":
        os.symlink("current", cur)
        return "a symbolic link loop (current)"
    if how == "file":
        cur.write_bytes(b"")
        return "a file, not a folder"
    return "none"


HOWS = ["dangling link", "link loop", "file", "missing"]


@pytest.mark.parametrize("how", HOWS)
def test_fsck_names_the_dir_and_what_is_in_place_of_its_current(tmp_path, how):
    root = golden_copy(tmp_path, CORPUS)
    found = _break_current(root, how)
    r = CliRunner().invoke(fsck_command, [str(root), "--no-progress", "--json"], catch_exceptions=False)
    assert r.exit_code == 4, r.output
    doc = json.loads(r.stdout)
    [f] = [f for f in doc["findings"] if f["code"] == "LAYOUT_NO_CURRENT"]
    assert f["path"] == str(root / GONE)
    assert f["message"].endswith(f"expected a 'current' folder in {root / GONE}, found {found}")


@pytest.mark.parametrize("how", HOWS)
def test_inventory_warns_about_the_dir_and_lists_the_others(tmp_path, how):
    per_dir = _entries_per_dir()
    root = golden_copy(tmp_path, CORPUS)
    _break_current(root, how)
    r = CliRunner().invoke(inventory, [str(root), "--jsonl"])
    assert r.exit_code == 4, r.stderr
    assert f"bkdisk: warning: {root / GONE / 'current'}: cannot list (" in r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == sum(n for d, n in per_dir.items() if d != GONE) and rows


def test_an_unreadable_entry_log_is_a_warning_and_the_logs_after_it_are_listed(tmp_path):
    root = golden_copy(tmp_path, CORPUS)
    logs = sorted((root / GONE / "current").glob("*.log"))
    assert len(logs) >= 2
    first, rest = logs[0], logs[1:]
    r = CliRunner().invoke(inventory, [str(root), "--jsonl"])
    whole = [json.loads(x) for x in r.stdout.splitlines()]
    first.unlink()
    os.mkfifo(first)   # opened without blocking and refused: not a regular file
    r = CliRunner().invoke(inventory, [str(root), "--jsonl"])
    assert r.exit_code == 4, r.stderr
    assert r.stderr.strip() == f"bkdisk: warning: {first}: not a regular file"
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    first_id = int(first.stem, 16)
    assert rows == [x for x in whole if not (x["ledger_dir"] == GONE and x["log_id"] == first_id)]
    assert any(x["ledger_dir"] == GONE and x["log_id"] == int(p.stem, 16) for p in rest for x in rows)
