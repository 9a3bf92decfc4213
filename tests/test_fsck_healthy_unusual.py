"""Healthy but unusual bookies check clean: after a crash, with deleted ledgers, several journal
dirs, separate index dirs; and dir discovery copes with several bookies, symlinks and odd configs."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN

from bkdisk.bookie.layout import LayoutError, discover, discover_all, from_conf
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie, write_metadata_dir
from bkdisk.formats.cookie import parse_cookie, serialize_cookie
from bkdisk.formats.digests import DigestType
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.lastmark import LastMark, build_last_mark
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.journal.reader import read_journal
from tests.fsck_helpers import make_disk


def _codes(rep, severity):
    return {f.code for f in rep.findings if f.severity.value == severity}


def _spec(**kw) -> BookieSpec:
    ledgers = [LedgerSpec(i, [bytes([i & 0xff]) * (100 + 37 * e) for e in range(12)], DigestType.CRC32C, b"pw")
               for i in (1, 2, 3, 0x105)]
    return BookieSpec(ledgers, bookie_id="bk-unusual.rack-z", entry_log_size_limit=4096, **kw)


def test_after_a_crash_entries_only_in_the_journal_are_not_missing(tmp_path):
    spec = _spec()
    w = write_bookie(spec, str(tmp_path / "b"))
    md = str(tmp_path / "md")
    write_metadata_dir(spec, md)
    # The crash: the index of ledger 3 never reached the disk, ledger 2's last slots were not flushed,
    # and lastMark still points at the start of the journal, so a restart replays all of it.
    os.unlink(w.index_files[LedgerId(0, 3)])
    p2 = w.index_files[LedgerId(0, 2)]
    with open(p2, "r+b") as f:
        f.seek(1024 + 8 * 7)
        f.write(bytes(8 * 5))
    jid = read_journal(w.journal_files[0]).journal_id
    for d in discover(str(tmp_path / "b")).ledger_dirs:
        Path(d, "current", "lastMark").write_bytes(build_last_mark(LastMark(jid, 512)))
    rep = check_bookie(discover(str(tmp_path / "b")), CheckOptions(metadata_dir=md))
    assert _codes(rep, "error") == set(), [f.line() for f in rep.errors]
    assert "REPLAY_PENDING" in _codes(rep, "info")
    pending = {(f.ledger, f.entry) for f in rep.findings if f.code == "REPLAY_NOT_IN_STORAGE"}
    assert pending == {(3, e) for e in range(12)} | {(2, e) for e in range(7, 12)}


def test_a_ledger_deleted_from_metadata_is_garbage_not_an_error(tmp_path):
    spec = _spec()
    w = write_bookie(spec, str(tmp_path / "b"))
    md = tmp_path / "md"
    write_metadata_dir(spec, str(md))
    # Garbage collection removed ledger 1: its metadata and index are gone, its entries await compaction.
    (md / "1.bin").unlink()
    os.unlink(w.index_files[LedgerId(0, 1)])
    rep = check_bookie(discover(str(tmp_path / "b")), CheckOptions(metadata_dir=str(md)))
    assert _codes(rep, "error") == set() and _codes(rep, "warning") == set()
    assert "GARBAGE_ENTRIES" in _codes(rep, "info")
    # Without metadata a deleted ledger and a lost index look alike: a warning, and no repair.
    rep = check_bookie(discover(str(tmp_path / "b")))
    [f] = [f for f in rep.findings if f.code == "LEDGER_INDEX_MISSING"]
    assert f.ledger == 1 and rep.errors == []


def test_a_lost_index_of_a_ledger_in_metadata_is_an_error_and_is_rebuilt(tmp_path):
    from click.testing import CliRunner

    from bkdisk.fsck_cli import fsck_command
    spec = _spec()
    w = write_bookie(spec, str(tmp_path / "b"))
    md = str(tmp_path / "md")
    write_metadata_dir(spec, md)
    lost = w.index_files[LedgerId(0, 1)]
    before = Path(lost).read_bytes()
    os.unlink(lost)
    rep = check_bookie(discover(str(tmp_path / "b")), CheckOptions(metadata_dir=md))
    assert [f.ledger for f in rep.findings if f.code == "LEDGER_NOT_INDEXED"] == [1]
    r = CliRunner().invoke(fsck_command, [str(tmp_path / "b"), "--metadata-dir", md, "--repair", "--yes",
                                          "--no-progress", "--backup-dir", str(tmp_path / "bk")])
    assert r.exit_code == 1, r.output
    assert Path(lost).read_bytes() == before


def test_several_journal_dirs_are_ordered_as_the_cookie_lists_them(tmp_path):
    names = [f"journal{i}" for i in (1, 2, 10)]
    spec = _spec(journal_dirs=names)
    write_bookie(spec, str(tmp_path))
    dirs = discover(str(tmp_path))
    assert [os.path.basename(d) for d in dirs.journal_dirs] == names
    rep = check_bookie(dirs)
    assert rep.errors == [], [f.line() for f in rep.errors]
    assert {os.path.basename(p) for p in os.listdir(tmp_path / "ledgers" / "current") if "lastMark" in p} == \
        {"lastMark.0", "lastMark.1", "lastMark.2"}


def test_separate_index_dirs_are_found_from_root_and_check_clean(tmp_path):
    spec = _spec()
    root = tmp_path / "b"
    w = write_bookie(spec, str(root))
    idx = root / "index"
    (idx / "current").mkdir(parents=True)
    for p in w.index_files.values():
        rel = Path(p).relative_to(root / "ledgers" / "current")
        (idx / "current" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(p, idx / "current" / rel)
    for d in ("journal", "ledgers", "index"):
        vp = root / d / "current" / "VERSION"
        c = parse_cookie((root / "journal" / "current" / "VERSION").read_bytes())
        vp.write_bytes(serialize_cookie(dataclasses.replace(c, index_dirs=(str(idx),))))
    dirs = discover(str(root))
    assert dirs.index_dirs == [str(idx)] and dirs.ledger_dirs == [str(root / "ledgers")]
    rep = check_bookie(dirs)
    assert rep.errors == [] and _codes(rep, "warning") == set(), [f.line() for f in rep.findings]


def test_a_root_with_several_bookies_is_refused_by_fsck_and_inventoried_bookie_by_bookie():
    root = GOLDEN / "cluster-3"
    assert root.is_dir()
    with pytest.raises(LayoutError, match="holds 3 bookies"):
        discover(str(root))
    assert len(discover_all(str(root))) == 3
    p = subprocess.run([sys.executable, "-c", "from bkdisk.cli import main; main()", "inventory", str(root), "--jsonl"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(l) for l in p.stdout.splitlines()]
    m = json.loads((root / "manifest.json").read_text())
    held = {b["bookie_id"]: b["entries_held"] for b in m["bookies"]}
    got = {}
    for r in rows:
        got[r["bookie_id"]] = got.get(r["bookie_id"], 0) + 1
    assert got == held
    f = subprocess.run([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", str(root)],
                       capture_output=True, text=True, timeout=300)
    assert f.returncode == 8 and len(f.stderr.strip().splitlines()) == 1


def test_symlinked_dirs_under_root_are_followed(tmp_path):
    write_bookie(_spec(), str(tmp_path / "disk"))
    root = tmp_path / "root"
    root.mkdir()
    for d in ("journal", "ledgers"):
        os.symlink(tmp_path / "disk" / d, root / d)
    os.symlink(root, root / "loop")   # a loop must not hang or duplicate
    dirs = discover(str(root))
    assert dirs.journal_dirs == [str(root / "journal")] and dirs.ledger_dirs == [str(root / "ledgers")]
    assert check_bookie(dirs).errors == []


def test_a_latin1_conf_and_relative_cookie_paths_compare_as_strings(tmp_path):
    spec = _spec()
    write_bookie(spec, str(tmp_path))
    rel_j, rel_l = "journal", "ledgers"
    for d in ("journal", "ledgers"):
        vp = tmp_path / d / "current" / "VERSION"
        c = parse_cookie(vp.read_bytes())
        vp.write_bytes(serialize_cookie(dataclasses.replace(c, journal_dirs=(rel_j,), ledger_dirs=(rel_l,))))
    conf = tmp_path / "bk_server.conf"
    conf.write_bytes(b"# r\xe9pertoire des journaux\njournalDirectories=journal\nledgerDirectories=ledgers\n")
    dirs = from_conf(str(conf))
    rep = check_bookie(dirs)
    assert rep.errors == [], [f.line() for f in rep.errors]
    conf.write_bytes(b"journalDirectories=./journal\nledgerDirectories=ledgers\n")
    rep = check_bookie(from_conf(str(conf)))
    assert {f.code for f in rep.errors} == {"COOKIE_DIR_CONF_MISMATCH"}


def test_repair_refuses_to_rebuild_an_index_while_an_entry_log_cannot_be_read(tmp_path):
    d = make_disk(str(tmp_path))
    from bkdisk.fsck.repair.repairs import plan_repairs
    idx = d.written.index_files[LedgerId(0, 1)]
    with open(idx, "r+b") as f:
        f.write(bytes(4))
    rep = d.check()
    ctx = rep.context
    victim = d.written.entry_log_files[0]
    disk_error = __import__("bkdisk.diskio.mapped", fromlist=["DiskError"]).DiskError
    ctx.log_scans[victim] = disk_error(victim, "permission denied")
    actions = [a for a in plan_repairs(rep).actions if a.kind == "rebuild-index"]
    assert actions and all(a.blocked and "could not be read" in a.blocked for a in actions)


def _mark(dirs, journal_path, offset):
    jid = read_journal(journal_path).journal_id
    for d in dirs.ledger_dirs:
        Path(d, "current", "lastMark").write_bytes(build_last_mark(LastMark(jid, offset)))


def test_a_torn_tail_in_a_journal_before_lastmark_is_a_warning(tmp_path):
    spec = _spec(journal_max_size=8192)
    w = write_bookie(spec, str(tmp_path))
    assert len(w.journal_files) >= 3, "the test needs several journals"
    old = w.journal_files[0]
    last = [r for r in read_journal(old).records if r.kind == 0][-1]
    os.truncate(old, last.offset + 4 + last.length // 2)
    rep = check_bookie(discover(str(tmp_path)))
    assert rep.errors == [], [f.line() for f in rep.errors]
    [f] = [f for f in rep.findings if f.code == "JOURNAL_OLD_TORN_TAIL"]
    assert (f.path, f.offset) == (old, last.offset)


def test_a_torn_entry_at_the_end_of_the_current_log_after_a_crash_is_a_warning(tmp_path):
    spec = _spec()
    w = write_bookie(spec, str(tmp_path))
    dirs = discover(str(tmp_path))
    cur = w.entry_log_files[-1]
    (lid, eid), loc = max(((k, v) for k, v in w.locations.items() if v >> 32 == len(w.entry_log_files) - 1),
                          key=lambda kv: kv[1] & 0xFFFFFFFF)
    off = (loc & 0xFFFFFFFF) - 4
    os.truncate(cur, off + 4 + 20)
    # The crash came before the index was flushed and before the checkpoint: the slot is empty and
    # the journal still holds the entry for replay.
    idx = w.index_files[lid]
    with open(idx, "r+b") as f:
        f.seek(1024 + 8 * eid)
        f.write(bytes(8))
    _mark(dirs, w.journal_files[0], 512)
    rep = check_bookie(discover(str(tmp_path)))
    assert rep.errors == [], [f.line() for f in rep.errors]
    [f] = [f for f in rep.findings if f.code == "LOG_TORN_TAIL"]
    assert (f.path, f.offset) == (cur, off)


def test_an_all_zero_body_mid_journal_with_records_after_it_is_corruption_not_a_torn_tail(tmp_path):
    spec = _spec(journal_prealloc_size=64 << 20, journal_max_size=64 << 20)
    w = write_bookie(spec, str(tmp_path))
    j = w.journal_files[-1]
    recs = [r for r in read_journal(j).records if r.kind == 0]
    # An all-zero body mid-journal, with valid records after it: corruption, not a torn tail.
    r = recs[len(recs) // 2]
    with open(j, "r+b") as f:
        f.seek(r.offset + 4)
        f.write(bytes(r.length))
    rep = check_bookie(discover(str(tmp_path)))
    [f] = [f for f in rep.findings if f.code == "JOURNAL_RECORD_CORRUPT"]
    assert f.offset == r.offset and os.path.getsize(j) >= 64 << 20


def test_an_interrupted_index_relocation_is_a_warning_and_repair_renames_it(tmp_path):
    from click.testing import CliRunner

    from bkdisk.fsck_cli import fsck_command
    spec = _spec()
    w = write_bookie(spec, str(tmp_path))
    p = w.index_files[LedgerId(0, 2)]
    os.rename(p, p + ".rloc")
    rep = check_bookie(discover(str(tmp_path)))
    assert rep.errors == [], [f.line() for f in rep.errors]
    [f] = [f for f in rep.findings if f.code == "INDEX_RELOCATION_LEFTOVER"]
    assert (f.path, f.ledger) == (p + ".rloc", 2)
    r = CliRunner().invoke(fsck_command, [str(tmp_path), "--repair", "--yes", "--no-progress",
                                          "--backup-dir", str(tmp_path / "bk")])
    assert r.exit_code == 1, r.output
    assert os.path.exists(p) and not os.path.exists(p + ".rloc")
    assert [f for f in check_bookie(discover(str(tmp_path))).findings if f.severity.value != "info"] == []


@pytest.mark.parametrize("journals, leftovers", [(1, ["lastMark.1", "lastMark.7"]), (3, ["lastMark", "lastMark.3"])])
def test_lastmark_files_bookkeeper_does_not_read_are_leftovers_not_errors(tmp_path, journals, leftovers):
    """BookKeeper reads ``lastMark`` with one journal dir and ``lastMark.<i>`` per journal dir with several:
    a file of the other naming, or numbered past the dirs (an earlier layout's), is never opened, whatever
    it holds (a mark naming a journal long gone, or not a mark at all). Said as info, checked no further."""
    spec = _spec(journal_dirs=[f"journal{i}" for i in range(journals)])
    write_bookie(spec, str(tmp_path))
    current = tmp_path / "ledgers" / "current"
    (current / leftovers[0]).write_bytes(build_last_mark(LastMark(0x7777, 123)))   # no such journal
    (current / leftovers[1]).write_bytes(b"not a mark")
    rep = check_bookie(discover(str(tmp_path)))
    assert rep.errors == [] and rep.exit_code == 0, [f.line() for f in rep.findings]
    assert _codes(rep, "warning") == set(), [f.line() for f in rep.findings]
    said = sorted((os.path.basename(f.path), f.detail) for f in rep.findings if f.code == "LASTMARK_NOT_READ")
    reads = "lastMark" if journals == 1 else "lastMark.0, lastMark.1, lastMark.2"
    assert said == sorted((n, f"with {journals} journal dir{'s' if journals > 1 else ''} it reads {reads} only")
                          for n in leftovers)
