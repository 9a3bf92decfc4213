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
from fsck_helpers import unprivileged
from test_fsck_golden_faults import ALL_CORPORA, Copy, _clean_copy, _only

from bkdisk.formats.paths import CURRENT_DIR, journal_name, parse_journal_name

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
