"""The fault catalogue injected into copies of the golden disks that real BookKeeper wrote.

Writer-built disks (test_fsck_faults.py) can share a blind spot with our own writer; these faults
are made in BookKeeper's bytes, located through each corpus's manifest (BookKeeper's own scan of
its files), and each must give its finding at the right file, offset, ledger and entry. Repairable
faults must repair to a check without errors in which every entry of the manifest is served again
through its index, byte for byte.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil

import pytest
from click.testing import CliRunner
from conftest import GOLDEN
from fsck_helpers import flip, patch

from bkdisk.bookie.layout import discover
from bkdisk.bookie.lookup import read_entry
from bkdisk.formats.cookie import parse_cookie, serialize_cookie
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE
from bkdisk.formats.entrylog import ENTRY_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import INDEX_MAGIC, LOCATION, pack_location, slot_offset
from bkdisk.formats.lastmark import LastMark, build_last_mark
from bkdisk.formats.paths import CURRENT_DIR, index_relpath
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck_cli import fsck_command
from bkdisk.journal.reader import read_journal

INDEX_CORPORA = ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage"]
ALL_CORPORA = INDEX_CORPORA + ["dbstorage-v6-bookieid"]   # entry-log, journal and cookie faults
SIZE_PREFIX = ENTRY_SIZE.sizeof()


@dataclasses.dataclass
class Copy:
    root: str
    manifest: dict

    @property
    def md_dir(self) -> str:
        return os.path.join(self.root, "metadata")

    def check(self):
        return check_bookie(discover(self.root), CheckOptions(metadata_dir=self.md_dir))

    def log_path(self, rec: dict) -> str:
        return os.path.join(self.root, rec["ledger_dir"], CURRENT_DIR, rec["entry_log_file"])

    def index_path(self, ledger: int) -> str:
        rel = index_relpath(LedgerId(0, ledger))
        [p] = [os.path.join(self.root, d, CURRENT_DIR, rel) for d in self.manifest["ledger_dirs"]
               if os.path.exists(os.path.join(self.root, d, CURRENT_DIR, rel))]
        return p

    def records(self, **match) -> list[dict]:
        return [r for r in self.manifest["entry_log_records"]
                if all(str(r[k]) == str(v) for k, v in match.items())]


def _copy(corpus: str, tmp_path) -> Copy:
    dst = tmp_path / corpus
    shutil.copytree(GOLDEN / corpus, dst, ignore=shutil.ignore_patterns("tool-output"))
    for dp, _dn, fn in os.walk(dst):   # the golden tree is read-only; its copy must be writable
        os.chmod(dp, 0o755)
        for n in fn:
            os.chmod(os.path.join(dp, n), 0o644)
    return Copy(str(dst), json.loads((GOLDEN / corpus / "manifest.json").read_text()))


def _only(report, code: str) -> list:
    found = [f for f in report.findings if f.code == code]
    assert found, f"expected {code}, got {[f.line() for f in report.findings]}"
    return found


def _error_codes(report) -> set[str]:
    return {f.code for f in report.findings if f.severity.value == "error"}


def _repair(c: Copy) -> None:
    r = CliRunner().invoke(fsck_command, [c.root, "--metadata-dir", c.md_dir, "--repair", "--yes", "--no-progress",
                                          "--backup-dir", c.root + "-backup"], catch_exceptions=False)
    assert r.exit_code == 1, r.output
    after = c.check()
    assert _error_codes(after) == set(), [f.line() for f in after.findings if f.severity.value == "error"]


def _every_manifest_entry_is_served(c: Copy) -> None:
    dirs = discover(c.root)
    for e in c.manifest["entries"]:
        got = read_entry(dirs, LedgerId(0, int(e["ledger_id"])), e["entry_id"])
        assert got is not None and hashlib.sha256(got).hexdigest() == e["stored_sha256"], (e["ledger_id"],
                                                                                            e["entry_id"])


def _clean_copy(corpus: str, tmp_path) -> Copy:
    c = _copy(corpus, tmp_path)
    assert _error_codes(c.check()) == set(), "the untouched copy must check clean"
    return c


@pytest.fixture(params=INDEX_CORPORA)
def copy(request, tmp_path) -> Copy:
    return _clean_copy(request.param, tmp_path)


@pytest.fixture(params=ALL_CORPORA)
def any_copy(request, tmp_path) -> Copy:
    return _clean_copy(request.param, tmp_path)


def _a_record_with_payload(c: Copy) -> dict:
    """A stored entry with a payload, of a CRC32C ledger (a digest any check can verify), not the last of its ledger."""
    crc32c = {led["ledger_id"] for led in c.manifest["ledgers"] if led["digest_type"] == "CRC32C"}
    last = {led["ledger_id"]: led["last_entry_id"] for led in c.manifest["ledgers"]}
    return next(r for r in c.manifest["entry_log_records"]
                if r["size"] > ENTRY_V1_HEADER_SIZE + 64 and r["ledger_id"] in crc32c
                and r["entry_id"] < last[r["ledger_id"]])


def test_flipped_payload_byte_in_bookkeepers_bytes_is_that_entrys_digest_mismatch(any_copy):
    rec = _a_record_with_payload(any_copy)
    flip(any_copy.log_path(rec), rec["offset"] + SIZE_PREFIX + rec["size"] - 7)
    bad = _only(any_copy.check(), "DIGEST_MISMATCH")
    assert [(f.path, f.offset, f.ledger, f.entry) for f in bad] == [
        (any_copy.log_path(rec), rec["offset"], int(rec["ledger_id"]), rec["entry_id"])]


def test_entry_log_cut_inside_an_entry_is_truncation_at_that_entry(any_copy):
    rec = _a_record_with_payload(any_copy)
    path = any_copy.log_path(rec)
    os.truncate(path, rec["offset"] + SIZE_PREFIX + rec["size"] // 2)
    report = any_copy.check()
    assert any(f.path == path and f.offset == rec["offset"] for f in _only(report, "LOG_TRUNCATED"))
    assert report.exit_code == 4


def test_zeroed_index_signature_is_rebuilt_from_bookkeepers_entry_logs(copy):
    ledger = int(_a_record_with_payload(copy)["ledger_id"])
    p = copy.index_path(ledger)
    patch(p, 0, bytes(len(INDEX_MAGIC)))
    [f] = _only(copy.check(), "INDEX_HEADER_BAD")
    assert (f.path, f.ledger) == (p, ledger)
    _repair(copy)
    _every_manifest_entry_is_served(copy)


def test_index_slot_pointing_at_the_next_entry_is_a_wrong_location(copy):
    rec = _a_record_with_payload(copy)
    ledger, entry = int(rec["ledger_id"]), rec["entry_id"]
    nxt = copy.records(ledger_id=ledger, entry_id=entry + 1)[0]
    log_id = int(nxt["entry_log_file"].split(".")[0], 16)
    p = copy.index_path(ledger)
    # An index location points just past the entry's size prefix (BookKeeper's scan offset + 4).
    patch(p, slot_offset(entry), LOCATION.build(pack_location(log_id, nxt["offset"] + SIZE_PREFIX)))
    [f] = _only(copy.check(), "INDEX_LOCATION_WRONG")
    assert (f.path, f.ledger, f.entry, f.offset) == (p, ledger, entry, slot_offset(entry))
    _repair(copy)
    _every_manifest_entry_is_served(copy)


def test_index_in_another_hashed_folder_is_found_and_moved_back(copy):
    ledger = int(_a_record_with_payload(copy)["ledger_id"])
    p = copy.index_path(ledger)
    cur = p[: p.index(os.sep + CURRENT_DIR + os.sep) + len(CURRENT_DIR) + 2]
    wrong = os.path.join(cur, "7e", "7e", os.path.basename(p))
    os.makedirs(os.path.dirname(wrong))
    shutil.move(p, wrong)
    [f] = _only(copy.check(), "INDEX_MISPLACED")
    assert (f.path, f.ledger) == (wrong, ledger)
    _repair(copy)
    assert os.path.exists(p) and not os.path.exists(wrong)
    _every_manifest_entry_is_served(copy)


def _journal_data_record(c: Copy) -> tuple[str, object]:
    crc32c = {int(led["ledger_id"]) for led in c.manifest["ledgers"] if led["digest_type"] == "CRC32C"}
    for name in sorted(os.listdir(os.path.join(c.root, "journal", CURRENT_DIR))):
        if name.endswith(".txn"):
            path = os.path.join(c.root, "journal", CURRENT_DIR, name)
            recs = [r for r in read_journal(path).records
                    if r.kind == 0 and r.length > 100 and r.ledger_id in crc32c]
            if recs:
                return path, recs[len(recs) // 2]
    raise AssertionError("no journal data record with a payload")


def test_flipped_byte_in_a_bookkeeper_journal_record_is_that_record_corrupt(any_copy):
    path, r = _journal_data_record(any_copy)
    flip(path, r.offset + SIZE_PREFIX + r.length - 3)
    [f] = _only(any_copy.check(), "JOURNAL_RECORD_CORRUPT")
    assert (f.path, f.offset, f.ledger, f.entry) == (path, r.offset, r.ledger_id, r.entry_id)


def test_lastmark_past_the_end_of_bookkeepers_journal(any_copy):
    path, _r = _journal_data_record(any_copy)
    jid = read_journal(path).journal_id
    for d in any_copy.manifest["ledger_dirs"]:
        with open(os.path.join(any_copy.root, d, CURRENT_DIR, "lastMark"), "wb") as fh:
            fh.write(build_last_mark(LastMark(jid, os.path.getsize(path) + 4096)))
    report = any_copy.check()
    assert _only(report, "LASTMARK_PAST_END")
    assert report.exit_code == 4


def test_a_ledger_dir_cookie_from_another_cluster_is_a_mismatch(any_copy):
    p = os.path.join(any_copy.root, any_copy.manifest["ledger_dirs"][-1], CURRENT_DIR, "VERSION")
    c = parse_cookie(open(p, "rb").read())
    with open(p, "wb") as fh:
        fh.write(serialize_cookie(dataclasses.replace(c, instance_id="another-cluster")))
    report = any_copy.check()
    assert any(f.path == p for f in _only(report, "COOKIE_MISMATCH"))
    assert report.exit_code == 4


def test_a_bad_last_data_record_before_a_fence_is_corrupt_not_a_torn_tail_to_cut(tmp_path):
    """BookKeeper's newest journal ends with a data record and then a fence. A flipped bit in that data
    record is a record corrupt mid-journal, not a torn write: no repair cuts the journal there, which
    would drop the fence after it (a ledger not yet fenced in its index would then be open again)."""
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    [jdir] = c.manifest["journal_dirs"]
    folder = os.path.join(c.root, jdir, CURRENT_DIR)
    path = os.path.join(folder, max(n for n in os.listdir(folder) if n.endswith(".txn")))
    scan = read_journal(path)
    data, fence = scan.records[-2:]
    assert (data.kind.name, fence.kind.name) == ("DATA", "FENCE")
    for d in c.manifest["ledger_dirs"]:   # the tail after the mark, as after a crash
        with open(os.path.join(c.root, d, CURRENT_DIR, "lastMark"), "wb") as fh:
            fh.write(build_last_mark(LastMark(scan.journal_id, data.offset)))
    flip(path, data.offset + SIZE_PREFIX + data.length - 3)
    report = c.check()
    assert "JOURNAL_TORN_TAIL" not in {f.code for f in report.findings}
    [f] = _only(report, "JOURNAL_RECORD_CORRUPT")
    assert (f.path, f.offset, f.ledger, f.entry) == (path, data.offset, data.ledger_id, data.entry_id)
    assert all(x.cut_at is None for x in report.findings)


def test_the_mark_a_replay_checkpoints_past_the_zero_length_is_not_past_the_end(any_copy):
    """BookKeeper's replay stops after reading the zero length that ends a journal's records, and the flush
    after the replay checkpoints that position: 4 bytes past the zero length. One byte more is past the end."""
    path, _r = _journal_data_record(any_copy)
    scan = read_journal(path)
    assert scan.end.kind.name == "CLEAN"
    end = scan.end.offset   # the zero length (after the last record, and the padding of its flush)

    def check_with_mark(offset: int):
        for d in any_copy.manifest["ledger_dirs"]:
            with open(os.path.join(any_copy.root, d, CURRENT_DIR, "lastMark"), "wb") as fh:
                fh.write(build_last_mark(LastMark(scan.journal_id, offset)))
        return any_copy.check()
    assert "LASTMARK_PAST_END" not in {f.code for f in check_with_mark(end + 4).findings}
    assert _only(check_with_mark(end + 5), "LASTMARK_PAST_END")


def test_a_mark_inside_a_record_or_the_header_is_not_where_a_replay_can_start(any_copy):
    """BookKeeper's replay reads a record length at the mark's offset: at a record's start it replays from
    there; inside a record, or inside the journal's header, it reads other bytes as a length."""
    path, r = _journal_data_record(any_copy)
    scan = read_journal(path)

    def codes_with_mark(offset: int) -> set[str]:
        for d in any_copy.manifest["ledger_dirs"]:
            with open(os.path.join(any_copy.root, d, CURRENT_DIR, "lastMark"), "wb") as fh:
                fh.write(build_last_mark(LastMark(scan.journal_id, offset)))
        report = any_copy.check()
        return {f.code for f in report.findings}
    assert "LASTMARK_MID_RECORD" not in codes_with_mark(r.offset)
    assert "LASTMARK_MID_RECORD" in codes_with_mark(r.offset + 1)
    assert "LASTMARK_MID_RECORD" in codes_with_mark(4)   # (after the magic: inside any header)
    assert "LASTMARK_MID_RECORD" not in codes_with_mark(0)
