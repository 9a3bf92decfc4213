"""Files and folders of ledger storage that cannot be read, on copies of the golden disks, checked as an
unprivileged user: each is reported where it failed, and what it hides is unchecked, never called lost,
missing or wrong (no ENTRY_MISSING, no "found no entry there", no ledger missing from an index read in
part); a RocksDB folder that cannot be listed is a finding, not the end of the check."""
from __future__ import annotations

import os

import pytest
from fsck_helpers import check_unprivileged
from test_fsck_golden_faults import _clean_copy

LOSS = {"ENTRY_MISSING", "ENTRIES_MISSING", "LOG_MISSING", "INDEX_LOCATION_MISSING_LOG",
        "DBINDEX_LOCATION_MISSING_LOG", "DBINDEX_LOCATION_WRONG", "DBINDEX_LEDGER_UNKNOWN", "DBINDEX_LEDGER_MISSING",
        "REPLAY_NOT_IN_STORAGE", "REPLAY_ENTRY_DROPPED", "LASTID_BAD", "LASTMARK_MISSING_IN_DIR"}


def _check_without(tmp_path, corpus: str, relpath: str, mode: int, *more: str) -> tuple[int, dict]:
    """(exit code, --json report) of a check of a copy of ``corpus`` whose ``relpath`` has ``mode``."""
    c = _clean_copy(corpus, tmp_path)
    target = os.path.join(c.root, relpath)
    assert os.path.exists(target), target
    rc, doc, _err = check_unprivileged(c.root, c.md_dir, target, mode, *more)
    return rc, doc


def _codes(doc: dict) -> set[str]:
    return {f["code"] for f in doc["findings"]}


@pytest.mark.parametrize("corpus, relpath, mode", [
    ("interleaved-v4-smallpage", "ledgers/current/0/0/0.idx", 0o000),
    ("interleaved-v4-smallpage", "ledgers/current/0/0", 0o311),
    ("interleaved-v4-smallpage", "ledgers/current", 0o311),
    ("interleaved-v6-hostport", "ledgers1/current", 0o000),
    ("interleaved-v6-hostport", "ledgers1", 0o000),
    ("sorted-v5-bookieid", "ledgers/current/ff/fe/7ffffffffffffffe.idx", 0o000),
    ("dbstorage-v6-bookieid", "ledgers0/current/1.log", 0o000),
    ("dbstorage-v6-bookieid", "ledgers1/current", 0o311),
    ("dbstorage-v6-bookieid", "ledgers0/current", 0o000),
])
def test_entries_where_the_check_could_not_look_are_unchecked_not_missing(tmp_path, corpus, relpath, mode):
    rc, doc = _check_without(tmp_path, corpus, relpath, mode)
    codes = _codes(doc)
    assert not LOSS & codes, sorted(LOSS & codes)
    assert rc == 4 and "FILE_UNREADABLE" in codes
    if relpath.endswith(".log"):   # (the log that could not be read is not counted as checked)
        assert doc["stats"]["entry_logs"] == _clean_copy(corpus, tmp_path / "clean").check().stats["entry_logs"] - 1
    [unchecked] = [f for f in doc["findings"] if f["code"] == "ENTRIES_UNCHECKED"]
    assert "whether this bookie holds those it lacks is unknown" in unchecked["message"]
    assert "(ledgers " in unchecked["message"]


@pytest.mark.parametrize("db", ["locations", "ledgers"])
def test_a_rocksdb_folder_that_cannot_be_listed_is_a_finding_not_the_end_of_the_check(tmp_path, db):
    # RocksDB lists its folder for the WAL files when it opens: the bookie cannot open it either.
    rc, doc = _check_without(tmp_path, "dbstorage-v6-bookieid", f"ledgers0/current/{db}", 0o311)
    [f] = [f for f in doc["findings"] if f["code"] == "DBINDEX_UNREADABLE"]
    assert f["path"].endswith(f"ledgers0/current/{db}") and "cannot list (Permission denied)" in f["message"]
    assert rc == 4 and not LOSS & _codes(doc)


def test_a_ledgers_index_read_in_part_does_not_call_its_ledgers_missing(tmp_path):
    rc, doc = _check_without(tmp_path, "dbstorage-v6-bookieid", "ledgers0/current/ledgers/000008.sst", 0o000)
    assert "DBINDEX_UNREADABLE" in _codes(doc) and not LOSS & _codes(doc) and rc == 4


@pytest.mark.parametrize("relpath, mode", [("ledgers0/current/locations/CURRENT", 0o000),
                                           ("ledgers0/current/locations", 0o311), ("ledgers0/current/ledgers", 0o000),
                                           ("ledgers0/current/ledgers/000008.sst", 0o000)])
def test_a_database_the_system_refuses_to_read_is_not_planned_for_a_rebuild(tmp_path, relpath, mode):
    """Permission denied says nothing of the bytes: the operator fixes the permissions; BookKeeper's
    rebuild would replace a database that may be sound."""
    rc, doc = _check_without(tmp_path, "dbstorage-v6-bookieid", relpath, mode, "-n")
    plan = doc["repair"]["plan"]
    assert [a for a in plan["actions"] if a["kind"] == "bookkeeper-rebuild"] == []
    assert "DBINDEX_UNREADABLE" in {f["code"] for f in plan["remaining"]} and rc == 4


@pytest.mark.parametrize("corpus, relpath", [("interleaved-v6-hostport", "ledgers0/current/VERSION"),
                                             ("dbstorage-v6-bookieid", "journal/current/VERSION")])
def test_a_cookie_that_cannot_be_read_is_named_once(tmp_path, corpus, relpath):
    rc, doc = _check_without(tmp_path, corpus, relpath, 0o000)
    found = [f for f in doc["findings"] if f["code"] == "FILE_UNREADABLE"]
    assert len(found) == 1 and found[0]["path"].endswith(relpath), found
    assert "cannot read (Permission denied)" in found[0]["message"]
    assert rc == 4 and doc["summary"]["errors"] == 1, doc["summary"]


def test_a_ledger_dir_that_cannot_be_searched_is_one_of_the_bookies_dirs_not_a_missing_one(tmp_path):
    """Found by the cookie that names it, it is the bookie's own dir whose current/ could not be listed:
    no 'no current folder', no cookie naming a dir too many; inventory says it could not list it, exit 4."""
    import subprocess
    import sys

    from fsck_helpers import unprivileged
    rc, doc = _check_without(tmp_path, "interleaved-v6-hostport", "ledgers1", 0o000)
    codes = _codes(doc)
    assert not {"LAYOUT_NO_CURRENT", "COOKIE_MISMATCH"} & codes, codes
    [f] = [f for f in doc["findings"] if f["code"] == "FILE_UNREADABLE"]
    assert f["path"].endswith("ledgers1/current") and "Permission denied" in f["message"]
    c = _clean_copy("interleaved-v6-hostport", tmp_path / "inv")
    target = os.path.join(c.root, "ledgers1")
    os.chmod(target, 0o000)
    try:
        p = subprocess.run(unprivileged([sys.executable, "-c", "from bkdisk.cli import main; main()", "inventory",
                                         c.root]), capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    finally:
        os.chmod(target, 0o755)
    assert p.returncode == 4, p.stderr
    assert f"{target}/current: cannot list (Permission denied)" in p.stderr
