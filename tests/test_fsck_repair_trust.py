"""Repairs an operator can trust: symlinks never written through, backups that are
snapshots, interrupted moves finished, own temp files cleaned, lastId and lastMark gaps named, lost
entries never dropped silently, and a JSON document that tells the whole repair."""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest
from click.testing import CliRunner

from bkdisk.bookie.layout import discover
from bkdisk.diskio.atomic import atomic_move
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import HEADER_SIZE as INDEX_HEADER_SIZE
from bkdisk.formats.index import parse_header
from bkdisk.formats.lastmark import LastMark, build_last_mark
from bkdisk.formats.paths import index_relpath
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.repair.repairs import apply_repairs, plan_repairs
from bkdisk.fsck_cli import fsck_command
from tests.fsck_helpers import Disk, codes, errors, make_disk, snapshot, unprivileged

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def disk(tmp_path) -> Disk:
    return make_disk(str(tmp_path / "b"))


def _cli(*args):
    return CliRunner().invoke(fsck_command, [*args, "--no-progress"], catch_exceptions=False)


def _index_cur(disk: Disk, lid: LedgerId) -> str:
    p = disk.written.index_files[lid]
    return p[: p.index("/current/") + len("/current")]


# --- symlinks --------------------------------------------------------------------------------------

def test_a_corrupt_index_behind_a_symlinked_folder_is_read_and_the_link_reported(disk, tmp_path):
    lid = LedgerId(0, 1)
    idx = disk.written.index_files[lid]
    folder = os.path.dirname(idx)
    elsewhere = tmp_path / "elsewhere" / "h00"
    shutil.move(folder, elsewhere)
    os.symlink(elsewhere, folder)
    with open(os.path.join(elsewhere, os.path.basename(idx)), "r+b") as f:
        f.write(bytes(4))   # the signature
    rep = disk.check()
    assert "INDEX_HEADER_BAD" in codes(rep, "error"), [f.line() for f in rep.findings]
    [link] = [f for f in rep.findings if f.code == "SYMLINK_OUTSIDE_DIRS"]
    assert (link.path, link.detail) == (folder, str(elsewhere))
    before = snapshot(str(tmp_path / "elsewhere"))
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 4, r.output
    assert f"{folder} is a symlink to {elsewhere}" in r.output
    assert snapshot(str(tmp_path / "elsewhere")) == before


def test_a_misplaced_index_is_never_moved_into_a_symlinked_folder_outside(disk, tmp_path):
    lid = LedgerId(0, 1)
    right = disk.written.index_files[lid]
    cur = _index_cur(disk, lid)
    outside = tmp_path / "elsewhere" / "h01"
    os.makedirs(outside)
    os.makedirs(os.path.join(cur, "7"))
    wrong = os.path.join(cur, "7", "1.idx")
    shutil.move(right, wrong)
    shutil.rmtree(os.path.dirname(right))
    os.symlink(outside, os.path.dirname(right))   # ledgers/current/0/1 -> /elsewhere/h01
    before = snapshot(str(tmp_path / "elsewhere"))
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 4, r.output
    assert snapshot(str(tmp_path / "elsewhere")) == before
    assert os.path.exists(wrong) and not os.path.exists(outside / "1.idx")


def test_a_lost_index_is_never_rebuilt_through_a_symlinked_folder_outside(disk, tmp_path):
    lid = LedgerId(0, 255)
    shutil.rmtree(os.path.dirname(disk.written.index_files[lid]))
    # A lost index is rebuilt in the first index dir: make the folder it goes to a link to elsewhere.
    idx = os.path.join(disk.dirs.ledger_dirs[0], "current", index_relpath(lid))
    folder = os.path.dirname(idx)
    assert not os.path.lexists(folder)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    outside = tmp_path / "elsewhere" / "h01"
    os.makedirs(outside)
    os.symlink(outside, folder)
    rep = disk.check()
    assert "LEDGER_NOT_INDEXED" in codes(rep, "error"), [f.line() for f in rep.findings]
    [a] = [a for a in plan_repairs(rep).actions if a.kind == "rebuild-index"]
    assert a.path == idx and a.blocked and f"{folder} is a symlink to {outside}" in a.blocked
    before = snapshot(str(tmp_path / "elsewhere"))
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 4, r.output
    assert snapshot(str(tmp_path / "elsewhere")) == before and os.listdir(outside) == []


def test_a_symlinked_folder_inside_the_dirs_is_followed_and_repairable(disk):
    lid = LedgerId(0, 1)
    idx = disk.written.index_files[lid]
    folder = os.path.dirname(idx)
    inside = os.path.join(disk.dirs.ledger_dirs[0], "moved-h01")
    shutil.move(folder, inside)
    os.symlink(inside, folder)
    with open(os.path.join(inside, os.path.basename(idx)), "r+b") as f:
        f.write(bytes(4))
    rep = disk.check()
    assert "INDEX_HEADER_BAD" in codes(rep, "error")
    assert [(f.path, f.detail) for f in rep.findings if f.code == "SYMLINK_FOLLOWED"] == [(folder, inside)]
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y", "--backup-dir",
             os.path.join(os.path.dirname(disk.root), "bk"))
    assert r.exit_code == 1, r.output
    assert os.path.islink(folder) and not errors(disk.check())


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_symlinked_first_level_folder_is_walked_and_no_second_index_is_written(disk, tmp_path, where):
    """A link right below current/ (the first level of the hashed folders) is walked as one deeper is: its
    index files are read, their ledgers count as indexed, and a repair writes no second index for them."""
    lid = LedgerId(0, 1)
    idx = disk.written.index_files[lid]
    cur = _index_cur(disk, lid)
    first = os.path.join(cur, os.path.relpath(idx, cur).split(os.sep)[0])
    target = (os.path.join(disk.dirs.ledger_dirs[0], "moved-first") if where == "inside"
              else str(tmp_path / "elsewhere" / "first"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.move(first, target)
    os.symlink(target, first)
    rep = disk.check()
    assert not errors(rep) and not [f for f in rep.findings if f.ledger == lid.ledger and f.code.startswith(
        ("LEDGER_", "INDEX_"))], [f.line() for f in rep.findings]
    assert [f.path for f in rep.findings if f.code.startswith("SYMLINK_")] == [first]
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 0, r.output
    found = [os.path.join(d, n) for lr in disk.dirs.ledger_dirs for d, _s, ns in os.walk(lr, followlinks=True)
             for n in ns if n == os.path.basename(idx)]
    assert {os.path.realpath(p) for p in found} == {os.path.realpath(idx)}, found


def test_a_misplaced_index_that_is_a_symlink_to_outside_is_not_moved(disk, tmp_path):
    lid = LedgerId(0, 255)
    right = disk.written.index_files[lid]
    cur = _index_cur(disk, lid)
    outside = tmp_path / "elsewhere"
    os.makedirs(outside)
    shutil.move(right, outside / "ff.idx")
    os.makedirs(os.path.join(cur, "9"))
    wrong = os.path.join(cur, "9", "ff.idx")
    os.symlink(outside / "ff.idx", wrong)
    before = snapshot(str(outside))
    links = os.stat(outside / "ff.idx").st_nlink
    rep = disk.check()
    plan = plan_repairs(rep)
    [move] = [a for a in plan.actions if a.kind == "move-index"]
    assert move.blocked and wrong in move.blocked
    _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert snapshot(str(outside)) == before and os.stat(outside / "ff.idx").st_nlink == links
    assert not os.path.exists(right)


def test_a_backup_folder_symlinked_outside_is_refused_before_any_write(disk, tmp_path):
    idx = disk.written.index_files[LedgerId(0, 1)]
    with open(idx, "r+b") as f:
        f.write(bytes(4))
    outside = tmp_path / "elsewhere"
    os.makedirs(outside)
    os.symlink(outside, os.path.join(disk.dirs.ledger_dirs[0], "fsck-backup"))
    with open(idx, "rb") as f:
        damaged = f.read()
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 8 and "fsck-backup is a symlink to" in r.output
    assert os.listdir(outside) == []
    with open(idx, "rb") as f:
        assert f.read() == damaged


# --- backups are snapshots -------------------------------------------------------------------------

def test_the_backup_of_a_moved_index_is_a_copy_not_a_second_name(tmp_path):
    src = tmp_path / "a" / "1.idx"
    os.makedirs(src.parent)
    src.write_bytes(b"old bytes")
    kept = atomic_move(str(src), str(tmp_path / "b" / "1.idx"), backup_dir=str(tmp_path / "backup"))
    assert os.stat(kept).st_ino != os.stat(tmp_path / "b" / "1.idx").st_ino
    with open(tmp_path / "b" / "1.idx", "r+b") as f:
        f.write(b"NEW")
    assert open(kept, "rb").read() == b"old bytes"


# --- an interrupted move, stale temp files ---------------------------------------------------------

def test_an_interrupted_move_is_finished_by_repair(disk):
    lid = LedgerId(0, 255)
    right = disk.written.index_files[lid]
    cur = _index_cur(disk, lid)
    os.makedirs(os.path.join(cur, "3"))
    wrong = os.path.join(cur, "3", "ff.idx")
    os.link(right, wrong)            # killed between link() and unlink()
    rep = disk.check()
    assert "INDEX_DUPLICATE" not in codes(rep) and "INDEX_MISPLACED" not in codes(rep)
    [f] = [f for f in rep.findings if f.code == "INDEX_MOVE_UNFINISHED"]
    assert (f.path, f.other) == (wrong, right)
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 1, r.output
    assert os.path.exists(right) and not os.path.exists(wrong)
    assert codes(disk.check(), "warning") <= {"LEDGER_INDEX_MISSING"} and not errors(disk.check())


def test_own_stale_temp_files_are_removed_and_others_left(disk):
    lid = LedgerId(0, 1)
    folder = os.path.dirname(disk.written.index_files[lid])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = os.path.join(folder, f".1.idx.bkdisk-tmp-{dead}")
    alive = os.path.join(folder, f".1.idx.bkdisk-tmp-{os.getppid()}")    # a process that still runs
    other = os.path.join(folder, "notes.txt")
    for p in (stale, alive, other):
        with open(p, "wb") as f:
            f.write(b"x" * 10)
    rep = disk.check()
    assert [f.path for f in rep.findings if f.code == "STALE_TEMP_FILE"] == [stale]
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 1, r.output
    assert not os.path.exists(stale) and os.path.exists(alive) and os.path.exists(other)


# --- lastId and lastMark ---------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["deleted", "garbage", "behind"])
def test_a_bad_last_id_is_reported_with_what_a_restart_does(disk, damage):
    path = os.path.join(disk.dirs.ledger_dirs[0], "current", "lastId")
    if damage == "deleted":
        os.unlink(path)
    else:
        with open(path, "w") as f:
            f.write("zz\n" if damage == "garbage" else "0\n")
    rep = disk.check()
    [f] = [f for f in rep.findings if f.code == "LASTID_BAD"]
    assert f.path == path and f.severity.value == "warning"
    assert "restart" in f.message


def test_a_last_mark_missing_in_one_of_two_ledger_dirs_is_reported(disk):
    dirs = disk.dirs
    assert len(dirs.ledger_dirs) >= 2
    os.unlink(os.path.join(dirs.ledger_dirs[1], "current", "lastMark"))
    rep = disk.check()
    [f] = [f for f in rep.findings if f.code == "LASTMARK_MISSING_IN_DIR"]
    assert f.path == os.path.join(dirs.ledger_dirs[1], "current")
    assert "keeps the largest" in f.message and dirs.ledger_dirs[0] in f.message
    assert "LASTMARK_MISSING_IN_DIR" not in codes(make_disk_clean_check(disk))


def make_disk_clean_check(disk: Disk):
    for d in disk.dirs.ledger_dirs[1:]:
        shutil.copy(os.path.join(disk.dirs.ledger_dirs[0], "current", "lastMark"),
                    os.path.join(d, "current", "lastMark"))
    return disk.check()


# --- an unreadable folder blocks every repair that depends on it -----------------------------------

def test_an_unlistable_index_folder_is_an_error_and_no_index_is_written_for_it(disk):
    folder = os.path.dirname(os.path.dirname(disk.written.index_files[LedgerId(0, 1)]))   # current/0
    before = {p for p in snapshot(disk.root)}
    os.chmod(folder, 0)
    try:
        cmd = unprivileged([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", disk.root,
                            "--metadata-dir", disk.md_dir, "--repair", "-y", "--json", "--no-progress"])
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    finally:
        os.chmod(folder, 0o755)
    doc = json.loads(p.stdout)
    unreadable = [f for f in doc["repair"]["before"]["findings"] if f["code"] == "FILE_UNREADABLE"]
    assert [f["path"] for f in unreadable] == [folder] and "Permission denied" in unreadable[0]["message"]
    assert unreadable[0]["severity"] == "error" and unreadable[0]["errno"] == errno.EACCES
    assert p.returncode == 4, p.stderr
    assert {p for p in snapshot(disk.root)} == before     # no index written anywhere
    assert "INDEX_DUPLICATE" not in codes(disk.check())


# --- a truncated entry log -------------------------------------------------------------------------

def _truncate_first_log(disk: Disk) -> str:
    log = disk.written.entry_log_files[0]
    os.truncate(log, os.path.getsize(log) // 2)
    return log


def test_a_truncated_log_never_leads_to_indexes_rebuilt_without_the_lost_entries(disk):
    _truncate_first_log(disk)
    idx_before = {p: open(p, "rb").read() for p in disk.written.index_files.values()}
    plan = plan_repairs(disk.check())
    assert plan.lost, plan.lines()
    rebuilds = [a for a in plan.actions if a.kind == "rebuild-index"]
    assert rebuilds and all(a.blocked and "--rebuild-dropping-lost-entries" in a.blocked for a in rebuilds)
    text = "\n".join(plan.lines())
    assert "bin/bookkeeper shell recover -l" in text and "lost: ledger" in text
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 4 and "lost: ledger" in r.output
    assert {p: open(p, "rb").read() for p in idx_before} == idx_before
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y", "--rebuild-dropping-lost-entries",
             "--backup-dir", os.path.join(os.path.dirname(disk.root), "bk"))
    assert {p: open(p, "rb").read() for p in idx_before} != idx_before, r.output


def test_an_index_whose_header_is_refused_still_names_the_entries_a_rebuild_would_lose(disk):
    """The slots past a refused header still say which entries the bookie held: a rebuild that would lose
    some is blocked and lists them, as it is when the header is whole."""
    _truncate_first_log(disk)
    whole = plan_repairs(disk.check()).lost
    lid = next(iter(whole))
    with open(disk.written.index_files[lid], "r+b") as f:
        f.seek(3)
        f.write(b"X")                                  # 'BKLE' -> 'BKLX': the header is refused
    plan = plan_repairs(disk.check())
    assert plan.lost[lid] == whole[lid], plan.lines()
    [a] = [a for a in plan.actions if a.kind == "rebuild-index" and a.ledger == lid]
    assert a.blocked and "--rebuild-dropping-lost-entries" in a.blocked


def _fence_unrecorded(rep, lid: LedgerId):
    """The check's report as if the journals had been collected past the ledger's fence record."""
    rep.context.journal_facts.fenced.pop(lid, None)
    return rep


def test_a_rebuild_over_a_damaged_header_keeps_the_fence_the_header_still_tells(disk):
    lid = LedgerId(0, 0x1234)                          # fenced; its journal's fence record taken away below
    idx = disk.written.index_files[lid]
    with open(idx, "r+b") as f:
        f.seek(7)
        f.write(b"\x09")                               # version 9: the header is refused, its state still told
    rep = _fence_unrecorded(disk.check(), lid)
    plan = plan_repairs(rep)
    [a] = [a for a in plan.actions if a.kind == "rebuild-index" and a.ledger == lid]
    assert not a.blocked, a.blocked
    apply_repairs(rep, plan, backup_dir=os.path.join(os.path.dirname(disk.root), "bk"))
    assert parse_header(open(idx, "rb").read(INDEX_HEADER_SIZE)).fenced


# The signature, version and key length overwritten (the state's place lost); a zeroed header ("key length 0,
# state 0" by accident); a key length no master key has.
@pytest.mark.parametrize("damage", [(0, b"\xff" * 12), (0, bytes(INDEX_HEADER_SIZE)), (8, (4).to_bytes(4, "big"))],
                         ids=["overwritten", "zeroed", "short-key"])
def test_a_header_damaged_past_telling_its_state_blocks_a_rebuild_the_journals_cannot_fence(disk, damage):
    lid = LedgerId(0, 0x1234)
    idx = disk.written.index_files[lid]
    with open(idx, "r+b") as f:
        f.seek(damage[0])
        f.write(damage[1])
    [a] = [a for a in plan_repairs(_fence_unrecorded(disk.check(), lid)).actions
           if a.kind == "rebuild-index" and a.ledger == lid]
    assert a.blocked and "unfence" in a.blocked
    [a] = [a for a in plan_repairs(disk.check()).actions if a.kind == "rebuild-index" and a.ledger == lid]
    assert not a.blocked, a.blocked                    # the journals' fence record: the state is known


def test_the_human_report_leads_with_the_truncation_and_lists_its_consequences_under_it(disk):
    log = _truncate_first_log(disk)
    rep = disk.check()
    out = _cli(disk.root, "--metadata-dir", disk.md_dir).output
    listed = [l for l in out.splitlines() if l.startswith("  ") and not l.startswith("  not listed")]
    assert "LOG_TRUNCATED" in listed[0] and log in listed[0], out
    assert re.match(r"-> \d+ INDEX_LOCATION_OUT_OF_RANGE: ledger \d+ entr", listed[1].lstrip()), out
    # each lost entry once: pass 5 leaves a location past the end of its log to pass 3
    locs = [(f.path, f.entry) for f in rep.findings
            if f.code in ("INDEX_LOCATION_OUT_OF_RANGE", "INDEX_LOCATION_WRONG")]
    assert len(locs) == len(set(locs))
    assert all(f.caused_by is not None for f in rep.findings if f.code == "INDEX_LOCATION_OUT_OF_RANGE")


# --- the repair's JSON, what remains, the backup line ----------------------------------------------

def _tear_newest_journal(disk: Disk, *, mark_past_cut: bool) -> None:
    from bkdisk.journal.reader import read_journal
    j = disk.written.journal_files[-1]
    scan = read_journal(j)
    data = [r for r in scan.records if r.kind == 0]
    last = data[-1]
    mark = LastMark(scan.journal_id, last.offset + 8 if mark_past_cut else data[0].offset)
    for d in disk.dirs.ledger_dirs:
        with open(os.path.join(d, "current", "lastMark"), "wb") as fh:
            fh.write(build_last_mark(mark))
    os.truncate(j, last.offset + 4 + last.length // 2)


def test_json_repair_carries_before_actions_after_and_the_process_exit_code(disk, tmp_path):
    _tear_newest_journal(disk, mark_past_cut=False)
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y", "--json",
             "--backup-dir", str(tmp_path / "bk"))
    doc = json.loads(r.stdout if hasattr(r, "stdout") else r.output)
    assert doc["summary"]["exit_code"] == doc["repair"]["exit_code"] == r.exit_code == 1
    assert "JOURNAL_TORN_TAIL" in {f["code"] for f in doc["repair"]["before"]["findings"]}
    [a] = doc["repair"]["plan"]["actions"]
    assert (a["kind"], a["result"]) == ("cut-journal", "done")
    assert "JOURNAL_TORN_TAIL" not in {f["code"] for f in doc["repair"]["after"]["findings"]}


def test_a_plan_says_what_will_remain_and_the_backup_line_only_when_something_was_kept(disk):
    _tear_newest_journal(disk, mark_past_cut=True)
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-n")
    assert "will remain after this plan: 1 LASTMARK_PAST_END" in r.output, r.output
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 4 and "LASTMARK_PAST_END" in r.output
    assert "replaced files kept in" in r.output


def test_no_backup_line_and_no_backup_folder_when_nothing_was_replaced(disk):
    lid = LedgerId(0, 255)
    cur = _index_cur(disk, lid)
    os.makedirs(os.path.join(cur, "3"))
    os.link(disk.written.index_files[lid], os.path.join(cur, "3", "ff.idx"))
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 1, r.output
    assert "replaced files kept" not in r.output
    assert not os.path.exists(os.path.join(disk.dirs.ledger_dirs[0], "fsck-backup"))


def _damaged_indexes(disk: Disk, n: int) -> list[str]:
    """``n`` index files cut mid-slot: each rebuilt from the logs, its old bytes kept."""
    damaged = sorted(disk.written.index_files.values())[:n]
    for p in damaged:
        os.truncate(p, os.path.getsize(p) - 3)
    return damaged


def test_a_repair_stopped_by_ctrl_c_names_where_the_files_it_replaced_are(disk, tmp_path):
    _damaged_indexes(disk, 3)
    rep = disk.check()
    plan = plan_repairs(rep)
    assert len(plan.todo) >= 2, plan.lines()
    asked, said = [], []

    def confirm(a):
        asked.append(a)
        if len(asked) == 2:
            raise KeyboardInterrupt
        return True
    with pytest.raises(KeyboardInterrupt):
        apply_repairs(rep, plan, confirm=confirm, backup_dir=str(tmp_path / "kept"), log=said.append)
    [copy] = os.listdir(tmp_path / "kept")
    assert said[-1] == f"cancelled: the 1 file(s) replaced so far are kept in {tmp_path / 'kept'}", said


def test_a_backup_cut_short_by_a_full_disk_leaves_no_part_copy(tmp_path, monkeypatch):
    from bkdisk.diskio import atomic

    src = tmp_path / "1.idx"
    src.write_bytes(b"x" * 10000)

    def full(_src, out):
        os.write(out, b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(atomic, "_copy_bytes", full)
    with pytest.raises(OSError):
        atomic.backup_file(str(src), str(tmp_path / "kept"))
    assert os.listdir(tmp_path / "kept") == []


def test_a_second_repair_of_a_bookie_is_refused_while_one_runs_and_checks_still_run(disk):
    """Two repairs at once: the second would act on findings the first is making stale (and keep the first's
    output as its backups). The lock is taken before the check; a check, or a plan (-n), takes none."""
    from bkdisk.fsck.repair.guards import hold_repair_lock

    _damaged_indexes(disk, 2)
    before = snapshot(disk.root)
    held = hold_repair_lock(disk.dirs.all_dirs)     # another repair, as far as the command can tell
    try:
        fsck = [sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", disk.root, "--no-progress",
                "--metadata-dir", disk.md_dir]
        p = subprocess.run([*fsck, "--repair", "-y"], capture_output=True, text=True, timeout=300)
        first = sorted(map(os.path.realpath, disk.dirs.all_dirs))[0]
        assert p.returncode == 8 and p.stderr.strip().splitlines() == [
            f"bookie-fsck: another repair of this bookie is running (it holds {first}); not repairing until it ends"
        ], p.stderr
        assert snapshot(disk.root) == before
        for extra in ([], ["--repair", "-n"]):
            p = subprocess.run([*fsck, *extra], capture_output=True, text=True, timeout=300)
            assert p.returncode == 4 and "another repair" not in p.stderr, p.stderr
    finally:
        for fd in held:
            os.close(fd)
    p = subprocess.run([*fsck, "--repair", "-y"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr


def test_an_unreadable_journal_blocks_a_rebuild_that_needs_its_key_and_fence(disk):
    from bkdisk.diskio.mapped import DiskError
    idx = disk.written.index_files[LedgerId(0, 1)]
    with open(idx, "r+b") as f:
        f.write(bytes(4))
    rep = disk.check()
    j = disk.written.journal_files[0]
    rep.context.journal_scans[j] = DiskError(j, "cannot read (Permission denied)")
    [a] = [a for a in plan_repairs(rep).actions if a.kind == "rebuild-index"]
    assert a.blocked and j in a.blocked


def test_a_relocation_cut_between_link_and_unlink_is_finished(disk):
    p = disk.written.index_files[LedgerId(0, 1)]
    os.link(p, p + ".rloc")          # the rename of <id>.idx.rloc to <id>.idx, killed half way
    rep = disk.check()
    [f] = [f for f in rep.findings if f.code == "INDEX_MOVE_UNFINISHED"]
    assert (f.path, f.other) == (p + ".rloc", p)
    assert "STRAY_FILE" not in codes(rep)
    r = _cli(disk.root, "--metadata-dir", disk.md_dir, "--repair", "-y")
    assert r.exit_code == 1, r.output
    assert os.path.exists(p) and not os.path.exists(p + ".rloc")


def test_an_unlistable_ledger_dir_blocks_every_rebuild_when_the_indexes_are_elsewhere(tmp_path):
    d = make_disk(str(tmp_path / "b"))
    dirs = d.dirs
    index_dir = str(tmp_path / "b" / "bookie" / "index")
    for p in d.written.index_files.values():
        ld = next(x for x in dirs.ledger_dirs if p.startswith(x + os.sep))
        dest = os.path.join(index_dir, os.path.relpath(p, ld))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.move(p, dest)
    idx = os.path.join(index_dir, "current", index_relpath(LedgerId(0, 1)))
    with open(idx, "r+b") as f:
        f.write(bytes(4))
    damaged = open(idx, "rb").read()
    cur = os.path.join(dirs.ledger_dirs[1], "current")
    args = [a for j in dirs.journal_dirs for a in ("--journal-dir", j)] + \
        [a for l in dirs.ledger_dirs for a in ("--ledger-dir", l)] + ["--index-dir", index_dir]
    os.chmod(cur, 0)
    try:
        cmd = unprivileged([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", *args, "--metadata-dir",
                             d.md_dir, "--repair", "-y", "--json", "--no-progress"])
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    finally:
        os.chmod(cur, 0o755)
    doc = json.loads(p.stdout)
    [f] = [f for f in doc["repair"]["before"]["findings"] if f["code"] == "FILE_UNREADABLE" and f["path"] == cur]
    assert f["errno"] == errno.EACCES and f["severity"] == "error"
    rebuilds = [a for a in doc["repair"]["plan"]["actions"] if a["kind"] == "rebuild-index"]
    assert rebuilds and all(a["blocked"] and cur in a["blocked"] and a["result"] is None for a in rebuilds)
    assert p.returncode == 4, p.stderr
    assert open(idx, "rb").read() == damaged


def test_a_folder_the_filesystem_cannot_lock_is_repaired_unlocked_with_a_warning(disk, monkeypatch):
    """NFS emulates flock with POSIX locks, which need a file open for writing: locking a folder fails
    there (EBADF, ENOLCK). The repair goes on, and says that a second one at the same time is not excluded."""
    import errno
    import fcntl

    from bkdisk.fsck.repair import guards

    def no_locks(fd, how):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    said: list[str] = []
    assert guards.hold_repair_lock(disk.dirs.all_dirs, warn=said.append) == []
    dirs = sorted({os.path.realpath(d) for d in disk.dirs.all_dirs})
    assert said == [f"{d}: cannot lock it for the repair (Bad file descriptor); another repair of this bookie "
                    "at the same time is not excluded" for d in dirs]
    assert not [fd for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") in dirs]


def test_a_slot_past_a_closed_ledgers_last_entry_is_no_lost_entry(tmp_path):
    """An index slot for entry 30 of ledger 0, which its metadata closes at entry 22: with the metadata,
    no entry is lost and the rebuild runs, saying which slot it drops (the ledger reads as before);
    without it, nothing tells the slot is not an entry the bookie holds: the rebuild stays blocked."""
    from conftest import golden_copy
    root = golden_copy(tmp_path)
    md = str(root / "metadata")
    idx = root / "ledgers1" / "current" / "0" / "0" / "0.idx"
    with open(idx, "r+b") as f:
        f.seek(1264)                       # entry 30's slot: a location in 0.log where no entry starts
        f.write(b"\0\0\0\0\0\0\0\x55")
    plan = plan_repairs(check_bookie(discover(str(root)), CheckOptions(metadata_dir=md)))
    [a] = [a for a in plan.actions if a.kind == "rebuild-index"]
    assert not plan.lost and not a.blocked and "entries 30, past its last entry 22 (closed), are dropped" in a.line()
    blind = plan_repairs(check_bookie(discover(str(root)), CheckOptions()))
    assert blind.lost == {LedgerId(0, 0): [30]} and [a.blocked for a in blind.actions if a.kind == "rebuild-index"]
    r = _cli(str(root), "--metadata-dir", md, "--repair", "-y", "--backup-dir", str(tmp_path / "bk"))
    assert r.exit_code == 1 and "past its last entry 22" in r.output, r.output
    after = check_bookie(discover(str(root)), CheckOptions(metadata_dir=md))
    assert "INDEX_LOCATION_WRONG" not in codes(after) and not errors(after), codes(after)


def test_a_dbledgerstorage_log_cut_short_names_its_lost_entries_before_any_rebuild(tmp_path):
    """Entries of ledger 4660 whose locations point past the end of a log cut short, in no other log:
    lost, with BookKeeper's recover; its locations rebuild (which keeps only what the logs hold, so the
    bookie would deny them) comes only once they are recovered. The whole bookie names nothing lost."""
    from conftest import golden_copy
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    md = str(root / "metadata")
    whole = plan_repairs(check_bookie(discover(str(root)), CheckOptions(metadata_dir=md)))
    assert not whole.lost and not whole.actions
    os.truncate(root / "ledgers0" / "current" / "0.log", 200_000)
    plan = plan_repairs(check_bookie(discover(str(root)), CheckOptions(metadata_dir=md)))
    assert plan.lost == {LedgerId(0, 4660): list(range(5, 12))}, plan.lines()
    assert plan.recover_command and "recover -l 4660" in plan.recover_command
    [a] = [a for a in plan.actions if a.kind == "bookkeeper-rebuild"]
    assert "rebuild-db-ledger-locations-index" in a.line() and "only once the lost entries below are recovered" in \
        a.line()


def test_an_entry_log_id_in_two_ledger_dirs_is_an_error_no_rebuild_guesses_past(tmp_path):
    """Log 0 copied over by another into the first ledger dir: BookKeeper reads that one, so locations
    into log 0 read other entries. Said (it went unsaid: one wrong location of 74), and no rebuild is
    planned from logs of which the index's is not told (one rewrote the index unchanged, run after run).
    DbLedgerStorage numbers logs per dir: its two 0.log are two logs."""
    from conftest import golden_copy
    root = golden_copy(tmp_path)
    shutil.copy(root / "ledgers0" / "current" / "2.log", root / "ledgers0" / "current" / "0.log")
    rep = check_bookie(discover(str(root)), CheckOptions())
    [dup] = [f for f in rep.findings if f.code == "LOG_ID_DUPLICATE"]
    assert dup.path == str(root / "ledgers1" / "current" / "0.log") and str(root / "ledgers0" / "current" / "0.log") \
        in dup.detail
    plan = plan_repairs(rep)
    rebuilds = [a for a in plan.actions if a.kind == "rebuild-index"]
    assert rebuilds and all(a.blocked and "in two ledger dirs" in a.blocked for a in rebuilds)
    db = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    assert (db / "ledgers0" / "current" / "0.log").exists() and (db / "ledgers1" / "current" / "0.log").exists()
    assert "LOG_ID_DUPLICATE" not in codes(check_bookie(discover(str(db)), CheckOptions()))


def test_a_backup_folder_inside_a_dirs_current_is_refused_before_any_change(tmp_path):
    """Backups kept where BookKeeper (and the next check) reads the dir's own files are refused; the
    index is left as it was."""
    from conftest import golden_copy
    root = golden_copy(tmp_path)
    idx = root / "ledgers1" / "current" / "0" / "0" / "0.idx"
    with open(idx, "r+b") as f:
        f.seek(1264)
        f.write(b"\0\0\0\0\0\0\0\x55")
    before = idx.read_bytes()
    inside = root / "ledgers1" / "current" / "bk"
    r = _cli(str(root), "--metadata-dir", str(root / "metadata"), "--repair", "-y", "--backup-dir", str(inside))
    assert r.exit_code == 8 and f"{inside}: --backup-dir is inside {root / 'ledgers1' / 'current'}" in r.output
    assert idx.read_bytes() == before and not inside.exists()


def test_a_duplicate_index_names_the_entries_bookkeeper_would_deny(tmp_path):
    """Ledger 0's index copied into the first ledger dir, one slot of the copy zeroed: BookKeeper opens
    that copy, so it denies entry 2, which only the other indexes. Said (it was only 'another index')."""
    from conftest import golden_copy
    root = golden_copy(tmp_path)
    first = root / "ledgers0" / "current" / "0" / "0" / "0.idx"
    first.parent.mkdir(parents=True)
    shutil.copy(root / "ledgers1" / "current" / "0" / "0" / "0.idx", first)
    whole = check_bookie(discover(str(root)), CheckOptions())
    [same] = [f for f in whole.findings if f.code == "INDEX_DUPLICATE"]
    assert same.path == str(first) and "denies" not in same.detail
    with open(first, "r+b") as f:
        f.seek(1040)   # (entry 2's slot)
        f.write(bytes(8))
    [dup] = [f for f in check_bookie(discover(str(root)), CheckOptions()).findings if f.code == "INDEX_DUPLICATE"]
    assert dup.detail.endswith("BookKeeper reads the first, so the bookie denies entries 2 only this one indexes")


def test_a_dbledgerstorage_log_gone_names_the_entries_it_held_lost(tmp_path):
    """Locations into a log that is gone (DBINDEX_LOCATION_MISSING_LOG), their entries in no other log:
    lost, as when the log is cut short, before the locations rebuild."""
    from conftest import golden_copy
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    os.unlink(root / "ledgers0" / "current" / "0.log")
    rep = check_bookie(discover(str(root)), CheckOptions(metadata_dir=str(root / "metadata")))
    assert "DBINDEX_LOCATION_MISSING_LOG" in codes(rep)
    plan = plan_repairs(rep)
    assert plan.lost and plan.recover_command, plan.lines()
    [a] = [a for a in plan.actions if a.kind == "bookkeeper-rebuild" and "locations" in a.line()]
    assert "only once the lost entries below are recovered" in a.line()


def test_a_private_file_leaves_what_is_not_a_regular_file_as_it_is(tmp_path):
    """--out naming a device (/dev/null, a terminal): written, its mode left alone (it was made 0600)."""
    from bkdisk.diskio.atomic import private_file
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod(dev, 0o666)
    with private_file(str(dev)) as f:
        f.write(b"x")
    assert stat.S_IMODE(os.stat(dev).st_mode) == 0o666
    with private_file(str(tmp_path / "md.bin")) as f:
        f.write(b"x")
    assert stat.S_IMODE(os.stat(tmp_path / "md.bin").st_mode) == 0o600
