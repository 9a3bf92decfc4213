"""Journal names, empty journals and lastMark files as BookKeeper 4.16 reads them, on copies of the golden
disks: a `.txn` name Long.parseLong refuses stops the bookie; an empty journal holds no record; a lastMark
gives its first 16 bytes; a journal dir that cannot be listed hides its journals, it does not lose them."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
from fsck_helpers import check_unprivileged, flip, patch, unprivileged
from test_fsck_golden_faults import ALL_CORPORA, SIZE_PREFIX, Copy, _clean_copy, _only

from bkdisk.formats import journal as fj
from bkdisk.formats.digests import DigestType, compute_digest
from bkdisk.formats.index import KEY_OFFSET
from bkdisk.formats.lastmark import LastMark, build_last_mark
from bkdisk.formats.paths import CURRENT_DIR, journal_name, parse_journal_name
from bkdisk.journal.reader import read_journal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=ALL_CORPORA)
def any_copy(request, tmp_path) -> Copy:
    return _clean_copy(request.param, tmp_path)


def _journal_folder(c: Copy) -> str:
    [jdir] = c.manifest["journal_dirs"]
    return os.path.join(c.root, jdir, CURRENT_DIR)


def _journal_ids(folder: str) -> list[int]:
    return sorted(i for n in os.listdir(folder) if (i := parse_journal_name(n)) is not None)


def _last_marks(c: Copy) -> list[str]:
    return sorted(glob.glob(os.path.join(c.root, "*", CURRENT_DIR, "lastMark")))


def _lines_but(report, *codes: str) -> list[str]:
    return sorted(f.line() for f in report.findings if f.code not in codes)


def test_txn_names_bookkeeper_cannot_parse_are_errors_and_no_journals(any_copy):
    folder = _journal_folder(any_copy)
    before = any_copy.check()
    newest = os.path.join(folder, journal_name(_journal_ids(folder)[-1]))
    bad = [os.path.join(folder, n) for n in ("8000000000000000.txn", "journal.txn")]
    for p in bad:   # a real journal's bytes, under names listJournalIds throws on
        shutil.copyfile(newest, p)
    report = any_copy.check()
    assert sorted(f.path for f in _only(report, "JOURNAL_NAME_BAD")) == sorted(bad)
    assert report.exit_code == 4
    # Neither is read as a journal (2^63 would be the newest one, replayed after lastMark).
    assert _lines_but(report, "JOURNAL_NAME_BAD") == _lines_but(before)


def test_a_lastmark_longer_than_16_bytes_gives_the_mark_its_first_16_hold(any_copy):
    before = any_copy.check()
    paths = _last_marks(any_copy)
    assert paths
    for p in paths:
        with open(p, "ab") as fh:
            fh.write(b"\x07")
    report = any_copy.check()
    assert sorted(f.path for f in _only(report, "LASTMARK_TRAILING_BYTES")) == paths
    assert _lines_but(report, "LASTMARK_TRAILING_BYTES") == _lines_but(before)


def test_a_short_lastmark_is_skipped_and_said_once(any_copy):
    paths = _last_marks(any_copy)
    for p in paths:
        os.truncate(p, 15)
    report = any_copy.check()
    bad = _only(report, "LASTMARK_BAD")
    assert sorted(f.path for f in bad) == paths
    assert all(f.message.count("16") == 2 and "15 bytes" in f.message for f in bad), [f.message for f in bad]
    assert _only(report, "LASTMARK_MISSING")


def test_empty_journals_hold_no_record(any_copy):
    folder = _journal_folder(any_copy)
    before = any_copy.check()
    top = _journal_ids(folder)[-1]
    between, newest = (os.path.join(folder, journal_name(top + k)) for k in (1, 2))
    for p in (between, newest):
        open(p, "wb").close()
    report = any_copy.check()
    assert [f.path for f in _only(report, "JOURNAL_EMPTY")] == [newest]
    [f] = _only(report, "JOURNAL_EMPTY_REPLAYED")
    assert f.path == between and f.severity.value == "warning"
    assert _lines_but(report, "JOURNAL_EMPTY", "JOURNAL_EMPTY_REPLAYED") == _lines_but(before)


def test_a_journal_dir_that_cannot_be_listed_hides_its_journals_it_does_not_lose_them(tmp_path):
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    folder = _journal_folder(c)
    os.chmod(folder, 0o000)
    try:
        cmd = unprivileged([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", c.root, "--json",
                            "--no-progress", "--metadata-dir", c.md_dir])
        env = dict(os.environ, PYTHONPATH=ROOT)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    finally:
        os.chmod(folder, 0o755)
    doc = json.loads(p.stdout)
    codes = {f["code"] for f in doc["findings"]}
    assert any(f["code"] == "FILE_UNREADABLE" and f["path"] == folder for f in doc["findings"]), p.stderr
    assert "LASTMARK_MISSING_JOURNAL" not in codes


def _first_record(c: Copy, kind: str, *, last: bool = False):
    """(journal path, journal id, record) of the first journal holding a record of ``kind``: its first
    such record, or its last."""
    folder = _journal_folder(c)
    for jid in _journal_ids(folder):
        path = os.path.join(folder, journal_name(jid))
        found = [r for r in read_journal(path).records if r.kind.name == kind]
        if found:
            return path, jid, found[-1 if last else 0]
    raise AssertionError(f"the test needs a {kind} record")


def _explicit_lac_record(c: Copy):
    return _first_record(c, "EXPLICIT_LAC", last=True)


def _mark_at(c: Copy, jid: int, offset: int) -> None:
    for p in _last_marks(c):
        with open(p, "wb") as fh:
            fh.write(build_last_mark(LastMark(jid, offset)))


LAC_AT = SIZE_PREFIX + 8 + 8 + 4   # the LAC body: after the ledger, the entry and the body's length


def test_a_newer_explicit_lac_a_restart_replays_is_not_compared_with_storage(tmp_path):
    """A newer explicit LAC after lastMark is what a crash before the checkpoint leaves: the replay
    writes it into storage, which may hold an older one until then."""
    c = _clean_copy("dbstorage-v6-bookieid", tmp_path)
    path, jid, r = _explicit_lac_record(c)
    from bkdisk.bookie.metadata_dir import digest_plan, load_metadata_dir
    plan = digest_plan(load_metadata_dir(c.md_dir)[0])
    key = (0, r.ledger_id)
    password = plan.passwords.get(key)
    covered = r.ledger_id.to_bytes(8, "big") + (int.from_bytes(r.lac_body[8:16], "big") + 1).to_bytes(8, "big")
    body = covered + compute_digest(DigestType(int(plan.known[key])), covered, password=password)
    assert len(body) == len(r.lac_body)
    patch(path, r.offset + LAC_AT, body)
    _mark_at(c, jid, r.offset)
    codes = {f.code for f in c.check().findings}
    assert not {"DBINDEX_EXPLICIT_LAC_MISMATCH", "JOURNAL_REPLAYED_LAC_BAD", "JOURNAL_EXPLICIT_LAC_BAD"} & codes
    # The same record before lastMark is one storage must hold already.
    _mark_at(c, jid, r.offset + SIZE_PREFIX + r.length)
    assert "DBINDEX_EXPLICIT_LAC_MISMATCH" in {f.code for f in c.check().findings}


@pytest.mark.parametrize("replayed", [True, False])
def test_a_damaged_explicit_lac_record_is_told_by_its_digest(tmp_path, replayed):
    """Replayed, a damaged LAC reaches storage and the clients reading it (an error); before lastMark no
    restart reads it, and storage's LAC, which verifies, stands (a warning, not the index's fault)."""
    c = _clean_copy("dbstorage-v6-bookieid", tmp_path)
    path, jid, r = _explicit_lac_record(c)
    if replayed:
        _mark_at(c, jid, r.offset)
    flip(path, r.offset + LAC_AT + 8 + 7)   # the LAC's low byte
    report = c.check()
    codes = {f.code for f in report.findings}
    assert "DBINDEX_EXPLICIT_LAC_MISMATCH" not in codes
    [f] = _only(report, "JOURNAL_REPLAYED_LAC_BAD" if replayed else "JOURNAL_EXPLICIT_LAC_BAD")
    assert f.ledger == r.ledger_id and f.severity.value == ("error" if replayed else "warning")
    if replayed:   # (the record a restart replays, where the operator finds it)
        assert (f.path, f.offset) == (path, r.offset)


def _key_record(c: Copy):
    return _first_record(c, "LEDGER_KEY")


KEY_BYTE = SIZE_PREFIX + 8 + 8 + 4 + 3   # a byte of the key: after the ledger, the entry and the key length


@pytest.mark.parametrize("corpus", ["interleaved-v6-hostport", "dbstorage-v6-bookieid"])
def test_a_damaged_ledger_key_record_before_lastmark_is_the_journals_fault_not_the_index(tmp_path, corpus):
    c = _clean_copy(corpus, tmp_path)
    path, _jid, r = _key_record(c)
    flip(path, r.offset + KEY_BYTE)
    report = c.check()
    [f] = _only(report, "JOURNAL_MASTER_KEY_BAD")
    assert f.ledger == r.ledger_id and "no restart reads it" in f.message
    assert (f.path, f.offset) == (path, r.offset) and "(the index: " in f.message   # (the damaged record)
    assert not {"INDEX_MASTER_KEY_MISMATCH", "DBINDEX_MASTER_KEY_MISMATCH"} & {g.code for g in report.findings}
    # Without the password the check cannot tell which key is damaged: the index is not cleared.
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    blind = check_bookie(discover(c.root))
    [g] = [g for g in blind.findings if g.code.endswith("MASTER_KEY_MISMATCH")]
    assert "which one is damaged is unknown" in g.message and g.severity.value == "error"


@pytest.mark.parametrize("indexed", [True, False])
def test_a_damaged_ledger_key_record_a_restart_replays_is_an_error(tmp_path, indexed):
    """Replayed, the record's key becomes the ledger's handle's: adds made with the password are refused,
    whether or not storage already holds the ledger (after a crash it may not)."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    path, jid, r = _key_record(c)
    for p in _last_marks(c):
        with open(p, "wb") as fh:
            fh.write(build_last_mark(LastMark(jid, r.offset)))
    if not indexed:
        os.remove(c.index_path(r.ledger_id))
    flip(path, r.offset + KEY_BYTE)
    report = c.check()
    [f] = _only(report, "JOURNAL_REPLAYED_KEY_BAD")
    assert f.ledger == r.ledger_id and "a restart replays it" in f.message and f.severity.value == "error"
    assert (f.path, f.offset) == (path, r.offset)
    assert "INDEX_MASTER_KEY_MISMATCH" not in {g.code for g in report.findings}   # (said once, by the journal)


def test_two_keys_for_one_ledger_after_lastmark_stop_the_start(tmp_path):
    """The first replayed record makes the ledger's handle; the handle refuses the second's key."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    folder = _journal_folder(c)
    path, _jid, r = _key_record(c)
    newest = os.path.join(folder, journal_name(_journal_ids(folder)[-1]))
    scan = read_journal(newest)
    end = scan.valid_end
    damaged = bytearray(r.master_key)
    damaged[3] ^= 1
    records = b"".join(fj.RECORD_LENGTH.build(len(b)) + b for b in
                       (fj.build_ledger_key_body(r.ledger_id, bytes(damaged)),
                        fj.build_ledger_key_body(r.ledger_id, r.master_key)))
    with open(newest, "r+b") as fh:   # into the zeros after the journal's last record
        fh.seek(end)
        fh.write(records)
    for p in _last_marks(c):
        with open(p, "wb") as fh:
            fh.write(build_last_mark(LastMark(scan.journal_id, end)))
    report = c.check()
    [f] = _only(report, "JOURNAL_REPLAYED_KEYS_DIFFER")
    second = end + fj.RECORD_LENGTH.sizeof() + len(fj.build_ledger_key_body(r.ledger_id, bytes(damaged)))
    name = os.path.basename(newest)
    assert f.ledger == r.ledger_id and (f.path, f.offset) == (newest, second)   # (the key the replay refuses)
    assert (f"2 keys: {bytes(damaged).hex()} (first at {name} offset {end}), {r.master_key.hex()} (first at "
            f"{name} offset {second}; the password's)") in f.message


def test_a_lastmark_of_journal_0_or_below_names_no_journal(tmp_path):
    # BookKeeper looks for the marked journal only when its id is above 0, and replays every journal.
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    for mark in (LastMark(0, 512), LastMark(-1, 0)):
        for p in _last_marks(c):
            with open(p, "wb") as fh:
                fh.write(build_last_mark(mark))
        codes = {f.code for f in c.check().findings}
        assert "LASTMARK_MISSING_JOURNAL" not in codes and "REPLAY_PENDING" in codes, codes


def test_a_damaged_key_in_the_index_is_the_index_fault(tmp_path):
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    _path, _jid, r = _key_record(c)
    flip(c.index_path(r.ledger_id), KEY_OFFSET + 3)
    [f] = _only(c.check(), "INDEX_MASTER_KEY_MISMATCH")
    assert "the index's key is damaged" in f.message


@pytest.mark.parametrize("corpus", ["interleaved-v6-hostport", "sorted-v5-bookieid"])
def test_a_sector_header_whose_version_says_4_is_named_damaged(tmp_path, corpus):
    """Versions 5 and 6 write a 512-byte header; read as version 4 (8 bytes), the journal's records end
    at the zeros at offset 8 and BookKeeper takes none of them."""
    c = _clean_copy(corpus, tmp_path)
    folder = _journal_folder(c)
    path = os.path.join(folder, journal_name(_journal_ids(folder)[-1]))
    with open(path, "r+b") as fh:
        fh.seek(4)
        fh.write((4).to_bytes(4, "big"))
    [f] = _only(c.check(), "JOURNAL_TAIL_GARBAGE")
    assert (f.path, f.offset) == (path, 8) and "the header's version 4 is damaged" in f.message, f.message


def _newest_journal_records(c: Copy):
    folder = _journal_folder(c)
    path = os.path.join(folder, journal_name(_journal_ids(folder)[-1]))
    return path, [r for r in read_journal(path).records if r.kind.name != "PADDING"]


def _past_the_end(path: str, r) -> None:
    """``r``'s length made to run past the file's end, as a torn last record's does."""
    patch(path, r.offset, fj.RECORD_LENGTH.build(os.path.getsize(path)))


def test_a_damaged_length_before_a_lone_fence_is_no_torn_tail_to_cut(tmp_path):
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    path, recs = _newest_journal_records(c)
    data, fence = recs[-2:]
    assert (data.kind.name, fence.kind.name) == ("DATA", "FENCE")
    _past_the_end(path, data)
    report = c.check()
    assert "JOURNAL_TORN_TAIL" not in {f.code for f in report.findings}
    [f] = _only(report, "JOURNAL_RECORD_CORRUPT")
    assert f.offset == data.offset and f"a fence record follows at offset {fence.offset}" in f.message


def test_a_damaged_length_before_a_lone_data_record_that_verifies_is_no_torn_tail(tmp_path):
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    path, recs = _newest_journal_records(c)
    before, last, fence = recs[-3:]
    patch(path, fence.offset, bytes(SIZE_PREFIX + fence.length))   # the data record is now the journal's last
    _past_the_end(path, before)
    [f] = _only(c.check(), "JOURNAL_RECORD_CORRUPT")
    assert f.offset == before.offset
    assert f"a data record whose digest verifies follows at offset {last.offset}" in f.message


def test_a_last_record_cut_short_by_the_files_end_is_still_a_torn_tail(tmp_path):
    c = _clean_copy("interleaved-v4-smallpage", tmp_path)
    path, recs = _newest_journal_records(c)
    last, fence = recs[-2:]
    patch(path, fence.offset, bytes(SIZE_PREFIX + fence.length))
    os.truncate(path, last.offset + SIZE_PREFIX + last.length // 2)   # a crash while the file grew
    [f] = _only(c.check(), "JOURNAL_TORN_TAIL")
    assert f.offset == last.offset


def test_a_damaged_key_record_dbledgerstorage_replays_stops_the_start(tmp_path):
    # LedgerMetadataIndex.setMasterKey refuses a key other than the one it holds: the replay throws.
    c = _clean_copy("dbstorage-v6-bookieid", tmp_path)
    path, jid, r = _key_record(c)
    _mark_at(c, jid, r.offset)
    flip(path, r.offset + KEY_BYTE)
    [f] = _only(c.check(), "JOURNAL_REPLAYED_KEY_BAD")
    assert "DbLedgerStorage refuses a key other than the one it holds, and the start fails" in f.message


def test_an_explicit_lac_body_verifies_as_bookkeeper_verifies_it():
    """DigestManager.verifyDigestAndReturnLac: the body's ledger id must be the ledger's, and only the
    type's digest length is compared."""
    from types import SimpleNamespace

    from bkdisk.digests.plan import DigestPlan
    from bkdisk.formats.ids import LedgerId
    from bkdisk.fsck.explicit_lacs import lac_digest_ok
    ctx = SimpleNamespace(digest_plan=DigestPlan(known={(0, 5): DigestType.DUMMY, (0, 6): DigestType.CRC32C}))
    covered = (5).to_bytes(8, "big") + (9).to_bytes(8, "big")
    assert lac_digest_ok(ctx, LedgerId(0, 5), covered) is True
    assert lac_digest_ok(ctx, LedgerId(0, 5), (6).to_bytes(8, "big") + covered[8:]) is False   # another ledger's
    six = (6).to_bytes(8, "big") + covered[8:]
    good = six + compute_digest(DigestType.CRC32C, six)
    assert lac_digest_ok(ctx, LedgerId(0, 6), good + b"\x00\x07") is True   # (bytes after the digest unread)
    assert lac_digest_ok(ctx, LedgerId(0, 6), good[:-1] + bytes([good[-1] ^ 1])) is False
    assert lac_digest_ok(ctx, LedgerId(0, 7), good) is None   # (no type in metadata)


@pytest.mark.parametrize("with_metadata", [True, False])
def test_an_entry_a_restart_skips_for_want_of_its_ledger_is_said_lost(tmp_path, with_metadata):
    """Replayed without a ledger-key record of its ledger before it, an entry's key comes from storage;
    storage knowing no such ledger, BookieImpl's replay skips the entry as a deleted ledger's."""
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    folder = _journal_folder(c)
    newest = _journal_ids(folder)[-1]
    recs = read_journal(os.path.join(folder, journal_name(newest))).records
    assert not [r for r in recs if r.kind.name == "LEDGER_KEY"], "the test needs a journal without key records"
    _mark_at(c, newest, 512)
    lost = 256
    os.remove(c.index_path(lost))
    report = c.check() if with_metadata else check_bookie(discover(c.root))
    code = "REPLAY_ENTRY_DROPPED" if with_metadata else "REPLAY_LEDGER_UNKNOWN"
    dropped = _only(report, code)
    assert {f.ledger for f in dropped} == {lost}
    assert len(dropped) == len([r for r in recs if r.kind.name == "DATA" and r.ledger_id == lost])
    assert all("a restart skips it" in f.message for f in dropped)
    assert lost not in {f.ledger for f in report.findings if f.code == "REPLAY_NOT_IN_STORAGE"}


def test_an_entry_whose_ledger_key_is_replayed_before_it_is_replayed_into_storage(tmp_path):
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    folder = _journal_folder(c)
    _mark_at(c, _journal_ids(folder)[0], 512)   # every journal replayed, the ledger-key records with them
    os.remove(c.index_path(256))
    report = c.check()
    assert 256 in {f.ledger for f in _only(report, "REPLAY_NOT_IN_STORAGE")}
    assert not {"REPLAY_ENTRY_DROPPED", "REPLAY_LEDGER_UNKNOWN"} & {f.code for f in report.findings}


def test_an_explicit_lac_in_an_index_header_whose_digest_fails_is_bad(tmp_path):
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    path = c.index_path(255)
    body_at = KEY_OFFSET + 20 + 4 + 4   # after the 20-byte key, the state and the body's length
    flip(path, body_at + 16 + 3)        # a byte of the digest after the ledger id and the LAC
    [f] = _only(c.check(), "INDEX_EXPLICIT_LAC_BAD")
    assert (f.path, f.ledger) == (path, 255) and "a digest that verifies" in f.message


def test_a_lastmark_without_any_journal_dir_names_the_missing_journal(tmp_path):
    # The dirs found hold no journal dir at all: the mark's journal is missing, and the check goes on.
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    shutil.rmtree(os.path.dirname(_journal_folder(c)))
    assert _only(c.check(), "LASTMARK_MISSING_JOURNAL")


@pytest.mark.parametrize("mode", [0o311, 0o000])
@pytest.mark.parametrize("corpus", ["interleaved-v6-hostport", "dbstorage-v6-bookieid"])
def test_entries_after_lastmark_are_not_said_missing_from_a_ledger_dir_that_could_not_be_listed(tmp_path, corpus,
                                                                                                 mode):
    """Every record replayed (the mark at the first journal's start) and the second ledger dir unlistable:
    its logs and indexes are unseen, so whether storage holds the entries there is unknown, not missing.
    BookKeeper opens its logs and lastMark by name: what a listing misses is not lost."""
    c = _clean_copy(corpus, tmp_path)
    path, jid, r = _first_record(c, "DATA")
    _mark_at(c, jid, r.offset)
    said = {"REPLAY_NOT_IN_STORAGE", "REPLAY_ENTRY_DROPPED", "REPLAY_LEDGER_UNKNOWN"}
    seen = c.check()
    assert not said & {f.code for f in seen.findings}   # (storage holds every entry the journal has)
    [pending] = _only(seen, "REPLAY_PENDING")
    assert "unknown" not in pending.message
    folder = os.path.join(c.root, c.manifest["ledger_dirs"][1], CURRENT_DIR)
    # (0o311: its files opened by name, lastMark among them; not listed)
    _rc, doc, err = check_unprivileged(c.root, c.md_dir, folder, mode)
    codes = {f["code"] for f in doc["findings"]}
    assert any(f["code"] == "FILE_UNREADABLE" and f["path"] == folder for f in doc["findings"]), err
    assert not said & codes
    [pending] = [f for f in doc["findings"] if f["code"] == "REPLAY_PENDING"]
    assert f"is unknown: {folder} could not be listed" in pending["message"]
    # The log the index points into there is unchecked, not lost; its lastMark is read by name, or unknown.
    assert not {"LOG_MISSING", "INDEX_LOCATION_MISSING_LOG", "DBINDEX_LOCATION_MISSING_LOG",
                "LASTMARK_MISSING_IN_DIR"} & codes
    logs = [f for f in doc["findings"] if f["code"] == "LOG_UNLISTED"]
    if corpus.startswith("dbstorage") and not mode:   # (its locations database there is unreadable too)
        assert logs == [] and "DBINDEX_UNREADABLE" in codes and doc["summary"]["errors"] == 2
        return
    [log] = logs
    assert (f"found it by name in {folder}, which could not be listed" if mode else
            f"{folder} could not be listed and may hold it") in log["message"]
    assert doc["summary"]["errors"] == 1   # (the folder)


def test_the_lastmark_of_a_ledger_dir_that_could_not_be_listed_is_read_by_name(tmp_path):
    """BookKeeper opens each ledger dir's lastMark by name and keeps the largest: an unlistable dir's
    mark still decides where the replay starts."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    path, jid, first = _first_record(c, "DATA")
    _path, _jid, later = _first_record(c, "DATA", last=True)
    marks = _last_marks(c)
    folder = os.path.join(c.root, c.manifest["ledger_dirs"][1], CURRENT_DIR)
    for p in marks:
        with open(p, "wb") as fh:
            fh.write(build_last_mark(LastMark(jid, later.offset if p.startswith(folder) else first.offset)))
    _rc, doc, err = check_unprivileged(c.root, c.md_dir, folder, 0o311)
    [pending] = [f for f in doc["findings"] if f["code"] == "REPLAY_PENDING"]
    assert (pending["path"], pending["offset"]) == (path, later.offset), err


def _append_records(path: str, bodies: list[bytes]) -> list[int]:
    """Records written into the zeros after the journal's last record; their offsets."""
    at, offsets = read_journal(path).valid_end, []
    with open(path, "r+b") as fh:
        for b in bodies:
            fh.seek(at)
            fh.write(fj.RECORD_LENGTH.build(len(b)) + b)
            offsets.append(at)
            at += fj.RECORD_LENGTH.sizeof() + len(b)
    return offsets


def test_entries_replayed_before_the_ledgers_first_key_record_are_dropped(tmp_path):
    """BookieImpl's replay takes the records in order: an entry of a ledger storage does not hold, met
    before any ledger-key record of it, finds no key (readMasterKey: NoLedgerException) and is skipped,
    though a key record comes later; entries after that record are replayed."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    path, jid, key = _key_record(c)
    newest = os.path.join(_journal_folder(c), journal_name(_journal_ids(_journal_folder(c))[-1]))
    [later] = _append_records(newest, [fj.build_ledger_key_body(key.ledger_id, key.master_key)])
    _mark_at(c, jid, key.offset + SIZE_PREFIX + key.length)   # (just past the ledger's own key record)
    os.remove(c.index_path(key.ledger_id))
    report = c.check()
    dropped = _only(report, "REPLAY_ENTRY_DROPPED")
    assert dropped and {f.ledger for f in dropped} == {key.ledger_id}
    assert all((f.path, f.offset) < (newest, later) for f in dropped)   # (every entry before the late key)
    assert not [f for f in report.findings if f.code == "REPLAY_NOT_IN_STORAGE" and f.ledger == key.ledger_id]


def test_a_ledger_keyed_after_lastmark_is_not_missing_from_dbledgerstorage(tmp_path):
    """A ledger opened after the checkpoint: the replay's setMasterKey adds it to the ledgers index."""
    c = _clean_copy("dbstorage-v6-bookieid", tmp_path)
    newest = os.path.join(_journal_folder(c), journal_name(_journal_ids(_journal_folder(c))[-1]))
    new = 0x5555
    [at] = _append_records(newest, [fj.build_ledger_key_body(new, bytes(range(20)))])
    _mark_at(c, _journal_ids(_journal_folder(c))[-1], at)
    assert not [f for f in c.check().findings if f.code == "DBINDEX_LEDGER_MISSING"]
    _mark_at(c, _journal_ids(_journal_folder(c))[-1], at + 100)   # (before lastMark: the index should hold it)
    [f] = _only(c.check(), "DBINDEX_LEDGER_MISSING")
    assert f.ledger == new


def test_a_damaged_explicit_lac_the_replay_skips_is_not_said_to_reach_storage(tmp_path):
    """An explicit-LAC record of a ledger storage does not hold, with no ledger-key record replayed before
    it, finds no key and is skipped as a deleted ledger's (BookieImpl's replay, readMasterKey): its damaged
    body never reaches storage."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    path, jid, r = _explicit_lac_record(c)
    _mark_at(c, jid, r.offset)
    flip(path, r.offset + LAC_AT + 8 + 7)
    [f] = _only(c.check(), "JOURNAL_REPLAYED_LAC_BAD")   # (storage holds the ledger: the replay writes it)
    os.remove(c.index_path(r.ledger_id))
    assert "JOURNAL_REPLAYED_LAC_BAD" not in {g.code for g in c.check().findings}


@pytest.mark.parametrize("lost", [None, 256])
def test_records_a_restart_cannot_reach_for_the_missing_marked_journal_are_not_said_replayed(tmp_path, lost):
    """lastMark names a journal its dir lacks: BookieImpl's replay throws before reading the dir's journals
    and the bookie shuts down, so the records after the mark in the later journals are not replayed."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    folder = _journal_folder(c)
    first, *later = _journal_ids(folder)
    _mark_at(c, first, 512)
    os.remove(os.path.join(folder, journal_name(first)))
    if lost is not None:
        os.remove(c.index_path(lost))
    report = c.check()
    assert _only(report, "LASTMARK_MISSING_JOURNAL")
    [pending] = _only(report, "REPLAY_PENDING")
    assert f"are not replayed: a restart stops at journal dir {os.path.dirname(folder)}, whose lastMark names " \
           f"{journal_name(first)}, which it lacks" in pending.message, pending.message
    assert "would be replayed" not in pending.message
    assert not {"REPLAY_NOT_IN_STORAGE", "REPLAY_ENTRY_DROPPED", "REPLAY_LEDGER_UNKNOWN"} & \
        {f.code for f in report.findings}
    assert ("are only in the journal" in pending.message) == (lost is not None), pending.message


@pytest.mark.parametrize("key_first", [True, False])
def test_a_damaged_index_key_costs_what_the_replay_order_makes_it(tmp_path, key_first):
    """The index's key damaged, the journal's key the password's and replayed: BookieImpl's replay makes the
    ledger's handle from its first record. A ledger-key record first gives the handle the journal's key (the
    start succeeds); an entry first gives it the index's, and the key record after it is refused (the start
    fails)."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    path, jid, key = _key_record(c)
    flip(c.index_path(key.ledger_id), KEY_OFFSET + 3)
    if key_first:
        _mark_at(c, jid, key.offset)
    else:   # replayed from just past the ledger's own key record, a key record of it appended at the end
        newest = os.path.join(_journal_folder(c), journal_name(_journal_ids(_journal_folder(c))[-1]))
        _append_records(newest, [fj.build_ledger_key_body(key.ledger_id, key.master_key)])
        _mark_at(c, jid, key.offset + SIZE_PREFIX + key.length)
    [f] = _only(c.check(), "INDEX_MASTER_KEY_MISMATCH")
    assert "the index's key is damaged" in f.message
    if key_first:
        assert "replays the journal's ledger-key record before any other record of the ledger" in f.message
        assert "adds made with the password are accepted" in f.message and "start fails" not in f.message
    else:
        assert f"replays the ledger's entry record ({os.path.basename(path)} offset " in f.message, f.message
        assert f.message.endswith("the handle is made from the index's key and refuses the record's, and the "
                                  "start fails)"), f.message


@pytest.mark.parametrize("key_first", [True, False])
def test_without_the_password_the_replay_order_still_says_whether_the_start_fails(tmp_path, key_first):
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    _path, jid, key = _key_record(c)
    flip(c.index_path(key.ledger_id), KEY_OFFSET + 3)
    if not key_first:
        newest = os.path.join(_journal_folder(c), journal_name(_journal_ids(_journal_folder(c))[-1]))
        _append_records(newest, [fj.build_ledger_key_body(key.ledger_id, key.master_key)])
    _mark_at(c, jid, key.offset if key_first else key.offset + SIZE_PREFIX + key.length)
    [f] = _only(check_bookie(discover(c.root)), "INDEX_MASTER_KEY_MISMATCH")
    assert "which one is damaged is unknown" in f.message
    if key_first:
        assert "the handle takes its key and refuses adds made with any other key until the bookie restarts" in \
            f.message and "start fails" not in f.message, f.message
    else:
        assert "the handle is made from the index's key and refuses the record's, and the start fails" in f.message


@pytest.mark.parametrize("damaged", ["index", "journal"])
def test_a_key_record_past_where_the_replay_stops_is_not_said_replayed(tmp_path, damaged):
    """The ledger's only key record after lastMark lies in a journal the replay never reaches (the dir's
    lastMark names a journal it lacks: BookieImpl's replay throws before reading the dir): the key
    mismatch costs what an unreplayed record costs, and no text says a restart replays it."""
    c = _clean_copy("interleaved-v6-hostport", tmp_path)
    _path, _jid, key = _key_record(c)
    folder = _journal_folder(c)
    first, *_later, newest = _journal_ids(folder)
    recorded = bytearray(key.master_key)
    if damaged == "index":
        flip(c.index_path(key.ledger_id), KEY_OFFSET + 3)
    else:
        recorded[3] ^= 0xFF
    _append_records(os.path.join(folder, journal_name(newest)), [fj.build_ledger_key_body(key.ledger_id,
                                                                                         bytes(recorded))])
    _mark_at(c, first, 512)
    os.remove(os.path.join(folder, journal_name(first)))
    report = c.check()
    assert _only(report, "LASTMARK_MISSING_JOURNAL")
    assert not [g for g in report.findings if "a restart replays" in g.message or g.code.startswith("JOURNAL_REPLAYED")]
    if damaged == "index":
        [f] = _only(report, "INDEX_MASTER_KEY_MISMATCH")
        assert "the index's key is damaged, and a handle made from it" in f.message, f.message
    else:
        [f] = _only(report, "JOURNAL_MASTER_KEY_BAD")
        assert f"the journal's ledger-key record is the damaged one, and no restart reads it: the replay stops at " \
               f"journal dir {os.path.dirname(folder)}, whose lastMark names {journal_name(first)}, which it lacks, " \
               "before reaching it" in f.message, f.message
