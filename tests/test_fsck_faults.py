"""The fault catalogue: each fault injected into a writer-built bookie gives the right finding,
with its code, ledger, entry, path and offset; repairable faults repair to a clean check."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from bkdisk.bookie.lookup import read_entry
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import unpack_location
from bkdisk.formats.lastmark import LastMark, build_last_mark
from bkdisk.formats.paths import entry_log_name, index_relpath
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck_cli import fsck_command
from tests.fsck_helpers import Disk, codes, entry_record, errors, flip, make_disk, patch, unprivileged


@pytest.fixture
def disk(tmp_path) -> Disk:
    return make_disk(str(tmp_path))


def _run_cli(args: list[str]):
    return CliRunner().invoke(fsck_command, args, catch_exceptions=False)


def _one(report, code):
    found = [f for f in report.findings if f.code == code]
    assert found, f"expected {code}, got {[f.line() for f in report.findings]}"
    return found


def _entry_log_of(disk: Disk, lid: LedgerId, eid: int) -> tuple[str, int]:
    """(log path, offset of the size prefix) of an entry, from what the writer recorded."""
    return entry_record(disk.written, lid, eid)


def _assert_all_entries_readable(disk: Disk, skip: set = frozenset()) -> None:
    dirs = disk.dirs
    for (lid, eid), stored in disk.written.entries.items():
        if (lid, eid) in skip:
            continue
        assert read_entry(dirs, lid, eid) == stored, (lid, eid)


def _repair_and_recheck(disk: Disk, *, skip_readable: set = frozenset()) -> None:
    r = _run_cli([disk.root, "--metadata-dir", disk.md_dir, "--repair", "--yes", "--no-progress",
                  "--backup-dir", os.path.join(os.path.dirname(disk.root), "backup")])
    assert r.exit_code == 1, r.output
    after = disk.check()
    assert errors(after) == [], [f.line() for f in errors(after)]
    _assert_all_entries_readable(disk, skip_readable)


# --- clean -------------------------------------------------------------------------------------

def test_clean_writer_bookie_checks_clean_with_exit_0(disk):
    r = _run_cli([disk.root, "--metadata-dir", disk.md_dir, "--no-progress"])
    assert r.exit_code == 0, r.output
    rep = disk.check()
    assert codes(rep, "error") == set() and codes(rep, "warning") == set()
    assert [p.number for p in rep.passes] == [1, 2, 3, 4, 5, 6, 7]


def test_check_changes_no_byte_and_no_mtime(disk):
    def snapshot():
        out = {}
        for dp, dirs, files in os.walk(os.path.dirname(disk.root)):
            for n in dirs:
                st = os.stat(os.path.join(dp, n))
                out[os.path.join(dp, n)] = ("dir", st.st_mtime_ns, st.st_mode)
            for n in files:
                p = os.path.join(dp, n)
                st = os.stat(p)
                with open(p, "rb") as f:
                    out[p] = (f.read(), st.st_mtime_ns, st.st_size, st.st_mode)
        return out
    flip(_entry_log_of(disk, LedgerId(0, 1), 3)[0], _entry_log_of(disk, LedgerId(0, 1), 3)[1] + 4 + 40)
    patch(disk.written.index_files[LedgerId(0, 0)], 0, bytes(4))   # a repairable fault, for the dry run
    before = snapshot()
    r = _run_cli([disk.root, "--metadata-dir", disk.md_dir, "--json", "--no-progress"])
    assert r.exit_code == 4
    r = _run_cli([disk.root, "--repair", "--dry-run", "--no-progress"])
    assert r.exit_code == 4 and "rebuild-index" in r.output
    assert snapshot() == before


# --- entry logs --------------------------------------------------------------------------------

def test_flipped_payload_byte_is_a_digest_mismatch_of_that_entry(disk):
    lid = LedgerId(0, 1)
    path, off = _entry_log_of(disk, lid, 5)
    flip(path, off + 4 + 32 + 4 + 10)   # CRC32C: 4-byte digest, then the payload
    rep = disk.check()
    [f] = _one(rep, "DIGEST_MISMATCH")
    assert (f.ledger, f.entry, f.path, f.offset) == (1, 5, path, off)
    assert rep.exit_code == 4


def test_flipped_entry_header_byte_is_a_digest_mismatch(disk):
    lid = LedgerId(0, 0)
    path, off = _entry_log_of(disk, lid, 7)
    flip(path, off + 4 + 31)            # low byte of the ledger-length field
    [f] = _one(disk.check(), "DIGEST_MISMATCH")
    assert (f.ledger, f.entry, f.offset) == (0, 7, off)


def test_scoped_ledger_digest_mismatch_names_scope_and_ledger(disk):
    lid = LedgerId(0x5EED0000CAFE, 0x42)
    path, off = _entry_log_of(disk, lid, 4)
    flip(path, off + 4 + 41 + 4 + 1)
    [f] = _one(disk.check(), "DIGEST_MISMATCH")
    assert (f.scope, f.ledger, f.entry) == (lid.scope, lid.ledger, 4)
    assert f.to_json()["ledger_qualified_name"] == lid.qualified_name


def test_entry_log_truncated_mid_entry(disk):
    last = disk.written.entry_log_files[-1]
    lid, eid = next(k for k, loc in disk.written.locations.items()
                    if entry_log_name(unpack_location(loc)[0]) == os.path.basename(last))
    path, off = _entry_log_of(disk, lid, eid)
    size = os.path.getsize(path)
    os.truncate(path, off + 4 + 20)
    rep = disk.check()
    [f] = _one(rep, "LOG_TRUNCATED")
    assert (f.path, f.offset) == (path, off)
    assert rep.exit_code == 4
    assert size > off + 24


def test_entry_log_header_zeroed_is_reported_and_entries_still_found(disk):
    path = disk.written.entry_log_files[-1]      # the current log: no ledgers map
    patch(path, 0, bytes(1024))
    rep = disk.check()
    [f] = _one(rep, "LOG_HEADER_BAD")
    assert (f.path, f.offset) == (path, 0)
    assert codes(rep, "error") == {"LOG_HEADER_BAD"}   # every entry still inventoried and cross-checked


def test_ledgers_map_disagreeing_with_the_body(disk):
    from bkdisk.formats.entrylog import parse_header
    path = disk.written.entry_log_files[0]
    data = open(path, "rb").read()
    h = parse_header(data)
    assert h.ledgers_map_offset > 0
    first_pair = h.ledgers_map_offset + 24
    ledger = int.from_bytes(data[first_pair:first_pair + 8], "big")
    patch(path, first_pair + 8, (12345).to_bytes(8, "big"))
    [f] = _one(disk.check(), "LEDGERS_MAP_MISMATCH")
    assert (f.path, f.ledger) == (path, ledger)


def test_zeroed_region_in_an_entry_log_is_framing_damage_and_resync_keeps_later_entries(disk):
    lid = LedgerId(0, 1)
    path, off = _entry_log_of(disk, lid, 2)
    patch(path, off, bytes(64))
    rep = disk.check()
    [f] = _one(rep, "LOG_FRAMING_BROKEN")
    assert (f.path, f.offset) == (path, off)
    later = [(k, v) for k, v in disk.written.locations.items()
             if f"{v >> 32:x}.log" == os.path.basename(path) and (v & 0xFFFFFFFF) - 4 > off]
    assert later, "the test needs entries after the damage"
    wrong = {(f.ledger, f.entry) for f in rep.findings if f.code == "INDEX_LOCATION_WRONG"}
    assert all((k[0].ledger, k[1]) not in wrong for k, _ in later)


# --- index files -------------------------------------------------------------------------------

def test_idx_truncated_mid_slot_is_reported_and_repaired(disk):
    lid = LedgerId(0, 0)
    p = disk.written.index_files[lid]
    os.truncate(p, 1024 + 8 * 10 + 3)
    rep = disk.check()
    [f] = _one(rep, "INDEX_TRUNCATED")
    assert (f.path, f.ledger) == (p, 0)
    assert {g.entry for g in rep.findings if g.code == "ENTRY_NOT_INDEXED" and g.ledger == 0} == set(range(10, 40))
    _repair_and_recheck(disk)


def test_idx_signature_zeroed_is_rebuilt_from_entry_logs_and_journal_key(disk):
    lid = LedgerId(0, 0x1234)
    p = disk.written.index_files[lid]
    before = open(p, "rb").read()
    patch(p, 0, bytes(4))
    rep = disk.check()
    [f] = _one(rep, "INDEX_HEADER_BAD")
    assert (f.path, f.ledger, f.offset) == (p, 0x1234, 0)
    _repair_and_recheck(disk)
    assert open(p, "rb").read() == before      # fenced bit and master key came back from the journal


def test_idx_location_pointing_at_the_wrong_offset(disk):
    lid = LedgerId(0, 1)
    p = disk.written.index_files[lid]
    loc = disk.written.locations[(lid, 3)]
    patch(p, 1024 + 8 * 3, (loc + 7).to_bytes(8, "big"))
    rep = disk.check()
    [f] = _one(rep, "INDEX_LOCATION_WRONG")
    assert (f.path, f.ledger, f.entry, f.offset) == (p, 1, 3, 1024 + 24)
    _repair_and_recheck(disk)


def test_idx_location_pointing_at_a_missing_entry_log(disk):
    lid = LedgerId(0, 256)
    p = disk.written.index_files[lid]
    loc = disk.written.locations[(lid, 2)]
    patch(p, 1024 + 16, ((0x77 << 32) | (loc & 0xFFFFFFFF)).to_bytes(8, "big"))
    rep = disk.check()
    [f] = _one(rep, "INDEX_LOCATION_MISSING_LOG")
    assert (f.path, f.ledger, f.entry) == (p, 256, 2)
    assert f.extra == {"log_id": 0x77}   # what root causes link it by
    _repair_and_recheck(disk)


def test_idx_in_the_wrong_hashed_folder_is_moved_back(disk):
    lid = LedgerId(0, 255)
    p = disk.written.index_files[lid]
    cur = p[: p.index("/current/") + len("/current/")]
    wrong = os.path.join(cur, "1", "2", "ff.idx")
    os.makedirs(os.path.dirname(wrong))
    shutil.move(p, wrong)
    rep = disk.check()
    [f] = _one(rep, "INDEX_MISPLACED")
    assert (f.path, f.ledger) == (wrong, 255)
    _repair_and_recheck(disk)
    assert os.path.exists(p) and not os.path.exists(wrong)


def test_same_ledger_indexed_in_two_ledger_dirs(disk):
    lid = LedgerId(0, 1)
    p = disk.written.index_files[lid]
    other_dir = next(d for d in disk.dirs.ledger_dirs if not p.startswith(d + os.sep))
    dup = os.path.join(other_dir, "current", index_relpath(lid))
    os.makedirs(os.path.dirname(dup), exist_ok=True)
    shutil.copy(p, dup)
    rep = disk.check()
    [f] = _one(rep, "INDEX_DUPLICATE")
    assert f.ledger == 1 and {f.path, f.other} == {p, dup}
    assert rep.exit_code == 4


def test_scoped_ledger_idx_in_the_2_level_place(disk):
    lid = LedgerId(0x5EED0000CAFE, 0x42)
    p = disk.written.index_files[lid]
    cur = p[: p.index("/current/") + len("/current/")]
    wrong = os.path.join(cur, "0", "42", os.path.basename(p))
    os.makedirs(os.path.dirname(wrong), exist_ok=True)
    shutil.move(p, wrong)
    rep = disk.check()
    [f] = _one(rep, "INDEX_SCOPED_IN_2LEVEL")
    assert (f.path, f.scope, f.ledger) == (wrong, lid.scope, lid.ledger)
    _repair_and_recheck(disk)


# --- journals and lastMark ---------------------------------------------------------------------

def _journal_records(path):
    from bkdisk.journal.reader import read_journal
    return read_journal(path)


def test_journal_record_corrupted_mid_file(disk):
    j = disk.written.journal_files[0]
    recs = [r for r in _journal_records(j).records if r.kind == 0]
    r = recs[len(recs) // 2]
    patch(j, r.offset, (-5).to_bytes(4, "big", signed=True))
    [f] = _one(disk.check(), "JOURNAL_RECORD_CORRUPT")
    assert (f.path, f.offset) == (j, r.offset)


def test_torn_journal_tail_is_cut_by_repair(disk):
    j = disk.written.journal_files[-1]
    scan = _journal_records(j)
    data_recs = [r for r in scan.records if r.kind == 0]
    last = data_recs[-1]
    # The mark sits before the torn record, as after a crash: the tail was never checkpointed.
    for d in disk.dirs.ledger_dirs:
        with open(os.path.join(d, "current", "lastMark"), "wb") as fh:
            fh.write(build_last_mark(LastMark(scan.journal_id, data_recs[0].offset)))
    os.truncate(j, last.offset + 4 + last.length // 2)
    rep = disk.check()
    [f] = _one(rep, "JOURNAL_TORN_TAIL")
    assert (f.path, f.offset) == (j, last.offset)
    _repair_and_recheck(disk)
    assert _journal_records(j).end.kind.name == "CLEAN"


def test_lastmark_past_the_end_of_its_journal(disk):
    j = disk.written.journal_files[-1]
    jid = _journal_records(j).journal_id
    for d in disk.dirs.ledger_dirs:
        with open(os.path.join(d, "current", "lastMark"), "wb") as fh:
            fh.write(build_last_mark(LastMark(jid, os.path.getsize(j) - 16)))
    rep = disk.check()
    [f] = _one(rep, "LASTMARK_PAST_END")
    assert f.path.endswith("lastMark") and str(os.path.getsize(j) - 16) in f.detail
    assert rep.exit_code == 4


def test_lastmark_at_a_missing_journal(disk):
    for d in disk.dirs.ledger_dirs:
        with open(os.path.join(d, "current", "lastMark"), "wb") as fh:
            fh.write(build_last_mark(LastMark(0x1A2FFFFFFFF, 512)))
    [f] = _one(disk.check(), "LASTMARK_MISSING_JOURNAL")
    assert "1a2ffffffff.txn" in f.detail


# --- cookies and bookie ids ----------------------------------------------------------------------

def test_cookies_that_disagree_between_dirs(disk):
    import dataclasses

    from bkdisk.formats.cookie import parse_cookie, serialize_cookie
    p = os.path.join(disk.dirs.ledger_dirs[1], "current", "VERSION")
    c = parse_cookie(open(p, "rb").read())
    open(p, "wb").write(serialize_cookie(dataclasses.replace(c, instance_id="another-cluster")))
    rep = disk.check()
    fs = _one(rep, "COOKIE_MISMATCH")
    assert any("instance id" in f.detail and f.path == p for f in fs)
    assert rep.exit_code == 4


def test_invalid_bookie_id_in_a_cookie(disk):
    import dataclasses

    from bkdisk.formats.cookie import parse_cookie, serialize_cookie
    for d in disk.dirs.all_dirs:
        p = os.path.join(d, "current", "VERSION")
        c = parse_cookie(open(p, "rb").read())
        open(p, "wb").write(serialize_cookie(dataclasses.replace(c, bookie_id="bookie 1/rack$a")))
    rep = disk.check()
    assert len(_one(rep, "BOOKIE_ID_INVALID")) == len(disk.dirs.all_dirs)


# --- files that are not BookKeeper's -------------------------------------------------------------

def test_non_bookkeeper_files_named_like_bookie_files(disk):
    cur = os.path.join(disk.dirs.ledger_dirs[0], "current")
    jcur = os.path.join(disk.dirs.journal_dirs[0], "current")
    text = b"this is a shopping list, not a bookie file\n" * 40
    os.makedirs(os.path.join(cur, "0", "9"), exist_ok=True)
    for p in (os.path.join(cur, "0", "9", "9.idx"), os.path.join(cur, "ff.log"), os.path.join(jcur, "1.txn")):
        open(p, "wb").write(text)
    rep = disk.check()
    assert [f.path for f in _one(rep, "INDEX_HEADER_BAD")] == [os.path.join(cur, "0", "9", "9.idx")]
    assert os.path.join(cur, "ff.log") in [f.path for f in _one(rep, "LOG_HEADER_BAD")]
    assert [f.path for f in _one(rep, "JOURNAL_HEADER_BAD")] == [os.path.join(jcur, "1.txn")]


def test_unreadable_file_is_reported_when_run_without_read_privileges(tmp_path):
    d = make_disk(str(tmp_path))
    victim = d.written.index_files[LedgerId(0, 1)]
    os.chmod(victim, 0o000)
    # Root reads anything; without two capabilities it obeys file permissions like anyone.
    cmd = unprivileged([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", d.root, "--json",
                        "--no-progress"])
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    import json
    doc = json.loads(p.stdout)
    unreadable = [f for f in doc["findings"] if f["code"] == "FILE_UNREADABLE"]
    assert [f["path"] for f in unreadable] == [victim], p.stderr
    assert p.returncode == 4


def test_flipped_byte_inside_a_journal_record_is_a_digest_mismatch_mid_file(disk):
    j = disk.written.journal_files[0]
    recs = [r for r in _journal_records(j).records if r.kind == 0 and r.ledger_id == 1 and r.length > 100]
    r = recs[len(recs) // 2]
    flip(j, r.offset + 4 + r.length - 3)
    [f] = _one(disk.check(), "JOURNAL_RECORD_CORRUPT")
    assert (f.path, f.offset, f.ledger, f.entry) == (j, r.offset, r.ledger_id, r.entry_id)


def test_torn_write_into_the_preallocated_zeros_is_a_torn_tail(disk):
    j = disk.written.journal_files[-1]
    scan = _journal_records(j)
    data_recs = [r for r in scan.records if r.kind == 0]
    last = data_recs[-1]
    assert last.ledger_id in (0, 1, 0x1234, 0x42) and last.length > 60, "the test needs a verifiable last record"
    for d in disk.dirs.ledger_dirs:
        with open(os.path.join(d, "current", "lastMark"), "wb") as fh:
            fh.write(build_last_mark(LastMark(scan.journal_id, data_recs[0].offset)))
    # Only the length and the first half of the body reached the disk; the rest is preallocated zeros.
    half = last.offset + 4 + last.length // 2
    patch(j, half, bytes(os.path.getsize(j) - half))
    rep = disk.check()
    [f] = _one(rep, "JOURNAL_TORN_TAIL")
    assert (f.path, f.offset, f.ledger, f.entry) == (j, last.offset, last.ledger_id, last.entry_id)
    _repair_and_recheck(disk)


def test_zeroed_header_of_a_rolled_log_loses_the_map_offset_but_the_map_is_not_damage(disk):
    from bkdisk.formats.entrylog import parse_header
    path = disk.written.entry_log_files[0]
    assert parse_header(open(path, "rb").read()).ledgers_map_offset > 0, "the test needs a rolled log"
    patch(path, 0, bytes(1024))
    rep = disk.check()
    [f] = _one(rep, "LOG_HEADER_BAD")
    assert (f.path, f.offset) == (path, 0)
    assert codes(rep, "error") == {"LOG_HEADER_BAD"}


def test_repair_keeps_the_owner_and_mode_of_the_file_it_replaces(disk):
    lid = LedgerId(0, 0x1234)
    p = disk.written.index_files[lid]
    os.chmod(p, 0o600)
    if os.geteuid() == 0:
        os.chown(p, 65534, 65534)
    want = os.stat(p)
    patch(p, 0, bytes(4))
    _repair_and_recheck(disk)
    got = os.stat(p)
    assert (got.st_mode & 0o7777, got.st_uid, got.st_gid) == (want.st_mode & 0o7777, want.st_uid, want.st_gid)


def test_corrupt_first_entries_of_a_ledger_without_metadata_are_still_found(disk):
    # No metadata: the digest type is sniffed, and the first entries it tries are the corrupt ones.
    lid = LedgerId(0, 0x1234)
    bad = []
    for eid in range(5):
        path, off = _entry_log_of(disk, lid, eid)
        flip(path, off + 4 + 32 + 4 + 3)
        bad.append((eid, off))
    rep = check_bookie(disk.dirs)
    found = sorted((f.entry, f.offset) for f in rep.findings if f.code == "DIGEST_MISMATCH")
    assert found == bad


def test_pass_2_names_every_duplicate_by_its_first_file_in_listing_order():
    import numpy as np

    from bkdisk.fsck.passes.p2_hierarchy import _duplicates
    from bkdisk.indexfiles.arrays import INDEX_FILE_DTYPE
    rows = np.zeros(9, INDEX_FILE_DTYPE)
    # rows:          0  1  2  3  4  5  6  7  8   (row 6 is not an index name: never a duplicate)
    rows["scope"] = [0, 0, 7, 0, 0, 7, 0, 0, 0]
    rows["ledger"] = [5, 3, 5, 5, 9, 5, 0, 3, 5]
    rows["named"] = [1, 1, 1, 1, 1, 1, 0, 1, 1]
    assert _duplicates(rows) == [(0, [3, 8]), (1, [7]), (2, [5])]
    rows["ledger"] = [1, 2, 3, 4, 5, 6, 0, 8, 9]
    assert _duplicates(rows) == []
    assert _duplicates(np.zeros(0, INDEX_FILE_DTYPE)) == []


@pytest.mark.parametrize("in_storage, spilled", [(True, False), (False, False), (False, True)])
def test_records_after_zeros_mid_journal_are_lost_on_restart_unless_storage_holds_them(disk, in_storage, spilled,
                                                                                      monkeypatch):
    """Two records zeroed in the middle of a journal a restart replays: BookKeeper's replay stops at the
    zero length, so the records after it are never replayed. Those whose entries ledger storage holds
    are what a reused journal file keeps past its end (the warning alone); an entry storage does not
    hold (its ledger's index lost) is lost on restart: an error naming how many and the first."""
    j = max(disk.written.journal_files, key=lambda p: len(_journal_records(p).records))
    scan = _journal_records(j)
    recs = scan.records
    for d in disk.dirs.ledger_dirs:   # the mark at the start of this journal: all of it is replayed
        with open(os.path.join(d, "current", "lastMark"), "wb") as fh:
            fh.write(build_last_mark(LastMark(scan.journal_id, recs[0].offset)))
    k = len(recs) // 2
    patch(j, recs[k].offset, bytes(recs[k + 2].offset - recs[k].offset))
    after = [r for r in recs[k + 2:] if r.kind == 0]
    lost = LedgerId(after[0].scope_id, after[0].ledger_id)
    if not in_storage:
        os.unlink(disk.written.index_files[lost])
    if spilled:   # (the journals' records, those past the end too, spill a few at a time)
        from bkdisk.diskio.scan_sink import ScanSink
        from bkdisk.fsck import context as fsck_context
        monkeypatch.setattr(fsck_context, "JOURNAL_SHARE", 1e-9)
        monkeypatch.setattr(ScanSink, "part_bytes", 2048)
    from bkdisk.fsck.passes import p6_journals
    lookups = []   # (the records after the mark and those past the end: one pass over storage)
    real = p6_journals._held_in_storage
    monkeypatch.setattr(p6_journals, "_held_in_storage", lambda ctx, ids: lookups.append(1) or real(ctx, ids))
    rep = disk.check()
    assert "JOURNAL_TAIL_GARBAGE" in codes(rep) and len(lookups) == 1
    found = [f for f in rep.findings if f.code == "JOURNAL_RECORDS_NOT_REPLAYED"]
    if in_storage:
        assert found == [], [f.line() for f in found]
        return
    [f] = found
    n = sum(1 for r in after if (r.scope_id, r.ledger_id) == (lost.scope, lost.ledger))
    assert (f.path, f.offset, f.ledger, f.entry) == (j, recs[k].offset, lost.ledger, after[0].entry_id)
    assert f.detail.startswith(f"{n} of the {len(after)} entries in records from offset {recs[k + 2].offset} on")
    assert rep.exit_code == 4
