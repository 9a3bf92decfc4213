"""fsck --jobs > 1 scans the journals and entry logs (and checks the journals' digests) on background
threads while passes 1-3 walk and read the .idx files: the report is the one a sequential check gives,
an unexpected error in the background is raised by the check, and the RocksDB reader is not loaded
for an index-file bookie."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

import bkdisk.fsck.scans
from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec
from bkdisk.bookie.writer import write_bookie, write_metadata_dir
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import RECORD_LENGTH_SIZE, RecordKind
from bkdisk.fsck import api as fsck_api
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.passes.p5_crosscheck import checks as p5_checks
from bkdisk.journal.scan import scan_journal
from tests.fsck_helpers import entry_record, flip, flip_payload, mixed_ledgers, patch

SCANS = "fsck-scans"   # the background threads' name


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """A bookie of several entry logs and journals with faults in each kind of file."""
    base = tmp_path_factory.mktemp("overlap")
    ledgers = mixed_ledgers(5, b"overlap")
    spec = BookieSpec(ledgers, bookie_id="overlap-test:3181", entry_log_size_limit=48 * 1024,
                      journal_max_size=128 * 1024, journal_prealloc_size=128 * 1024)
    w = write_bookie(spec, str(base / "bookie"))
    md = str(base / "metadata")
    write_metadata_dir(spec, md)
    assert len([p for p in w.entry_log_files if os.path.getsize(p) > 0]) >= 4
    assert len(w.journal_files) >= 2, w.journal_files

    def where(lid: int, eid: int) -> tuple[str, int]:
        return entry_record(w, LedgerId(0, lid), eid)

    # entry logs: a payload byte of a CRC32C and of a CRC32 ledger, and broken framing
    for lid, eid in ((1, 3), (2, 9)):
        flip_payload(w, LedgerId(0, lid), eid)
    log, off = where(3, 7)
    patch(log, off, bytes(4))   # a zero size: framing broken, resynced after
    # journals: the last payload byte of a data record in the middle of each of the first two journals
    for j in w.journal_files[:2]:
        recs = scan_journal(j).records
        data = recs[recs["kind"] == RecordKind.DATA]
        r = data[len(data) // 2]
        flip(j, int(r["offset"]) + RECORD_LENGTH_SIZE + int(r["size"]) - 1)
    # index files: a zeroed header, and stray bytes at the end of another
    with open(w.index_files[LedgerId(0, 4)], "r+b") as f:
        f.write(bytes(4))
    with open(w.index_files[LedgerId(0, 6)], "ab") as f:
        f.write(b"\x01\x02\x03")
    return str(base / "bookie"), md


def _report(root: str, md: str | None, jobs: int, **kw) -> dict:
    doc = check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=jobs, **kw)).to_json()
    for p in doc["passes"]:
        p.pop("seconds")
    doc["stats"].pop("seconds")
    return doc


@pytest.mark.parametrize("with_metadata", [True, False], ids=["metadata", "sniffed"])
def test_overlapped_and_sequential_checks_give_the_same_report(damaged, with_metadata: bool):
    root, md = damaged
    md = md if with_metadata else None
    one = _report(root, md, 1)
    codes = [f["code"] for f in one["findings"]]
    for code in ("DIGEST_MISMATCH", "LOG_FRAMING_BROKEN", "INDEX_HEADER_BAD", "INDEX_TRUNCATED"):
        assert code in codes, (code, codes)
    assert codes.count("DIGEST_MISMATCH") >= 2, codes
    assert codes.count("JOURNAL_RECORD_CORRUPT") >= 2, codes   # one digest mismatch in each damaged journal
    for _ in range(3):
        two = _report(root, md, 2)
        assert json.dumps(two, sort_keys=True) == json.dumps(one, sort_keys=True)   # findings in the same order


def test_without_digests_too(damaged):
    root, md = damaged
    assert _report(root, md, 2, verify_digests=False) == _report(root, md, 1, verify_digests=False)


def _threads_of(monkeypatch, name: str) -> list[str]:
    """Wrap fsck.scans's ``name`` so that the names of the threads that call it are recorded."""
    seen: list[str] = []
    real = getattr(bkdisk.fsck.scans, name)

    def spy(*a, **kw):
        seen.append(threading.current_thread().name)
        return real(*a, **kw)
    monkeypatch.setattr(bkdisk.fsck.scans, name, spy)
    return seen


def test_the_scans_run_on_the_background_only_with_more_than_one_job(damaged, monkeypatch):
    root, md = damaged
    journals = _threads_of(monkeypatch, "scan_journal")
    logs = _threads_of(monkeypatch, "scan_entry_log")
    check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=2))
    assert journals and set(journals) == {SCANS}, journals
    assert logs and not {threading.current_thread().name} & set(logs), logs
    n_journals, n_logs = len(journals), len(logs)
    check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=1))
    assert set(journals[n_journals:]) == set(logs[n_logs:]) == {threading.current_thread().name}
    assert len(journals) == 2 * n_journals and len(logs) == 2 * n_logs   # each file scanned once per check


def test_pass_5_plans_its_ranges_on_a_lane_after_the_index_was_read_on_the_checking_thread(damaged, monkeypatch):
    """The join's ranges and routed locations are made while passes 3 and 4 report; the lane never reads
    the index first (two threads would each walk it)."""
    root, md = damaged
    index = _threads_of(monkeypatch, "index_inventory")
    planned: list[str] = []
    real = p5_checks.plan_ranges

    def spy(ctx):
        planned.append(threading.current_thread().name)
        assert ctx.computed("index_inventory"), "the ranges planned before the index was read"
        return real(ctx)
    monkeypatch.setattr(p5_checks, "plan_ranges", spy)
    both = [check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=jobs)) for jobs in (2, 1)]
    me = threading.current_thread().name
    assert planned == [SCANS, me] and index == [me, me], (planned, index)
    assert [f.to_json() for f in both[0].findings] == [f.to_json() for f in both[1].findings]


def test_an_error_planning_the_ranges_on_their_lane_is_raised_by_pass_5(damaged, monkeypatch):
    root, md = damaged

    def broken(ctx):
        raise RuntimeError("planning broke")
    monkeypatch.setattr(p5_checks, "plan_ranges", broken)
    with pytest.raises(RuntimeError, match="planning broke"):
        check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=2))
    assert not [th for th in threading.enumerate() if th.name == SCANS], "background threads left running"


def test_a_pass_that_fails_while_the_ranges_are_planned_stops_the_planning(damaged, monkeypatch):
    """The planning lane routes the whole index: a check that failed before pass 5 stops it at its next
    chunk instead of waiting for it (here a planning that would never end on its own)."""
    root, md = damaged
    planning = threading.Event()

    def endless(*a, keep_going=lambda: None, **kw):
        planning.set()
        while True:
            keep_going()
            time.sleep(0.01)
    monkeypatch.setattr(p5_checks, "routed_locations", endless)
    passes = list(fsck_api.PASSES)

    def broken(ctx):
        planning.wait(60)
        raise RuntimeError("pass 4 broke")
    passes[[n for n, _run in passes].index(4)] = (4, broken)
    monkeypatch.setattr(fsck_api, "PASSES", passes)
    outcome: list[BaseException | None] = []

    def run():
        try:
            check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=2))
            outcome.append(None)
        except BaseException as e:   # what the check raised is the result
            outcome.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join(120)   # a guard against a hang, not a timing
    assert not t.is_alive(), "the check waits for a planning that never ends"
    [e] = outcome
    assert isinstance(e, RuntimeError) and str(e) == "pass 4 broke", repr(e)
    assert not [th for th in threading.enumerate() if th.name == SCANS], "background threads left running"


def test_progress_is_reported_from_the_checking_thread_only(damaged):
    root, md = damaged
    calls: list[tuple[str, str, int, int]] = []
    check_bookie(discover(root), CheckOptions(
        metadata_dir=md, jobs=2, progress=lambda what, done, total: calls.append(
            (threading.current_thread().name, what, done, total))))
    assert {c[0] for c in calls} == {threading.current_thread().name}
    logs = [c for c in calls if c[1] == "entry logs"]
    assert logs and logs[-1][2] == logs[-1][3] > 0, logs
    assert [c[1] for c in calls if c[1].startswith("pass ")][::2] == [f"pass {i}: {n}" for i, n in _pass_names()]


def _pass_names():
    from bkdisk.fsck.problems import PASS_NAMES
    return sorted(PASS_NAMES.items())


@pytest.mark.parametrize("name", ["scan_entry_log", "scan_journal"])
@pytest.mark.parametrize("jobs", [1, 2])
def test_an_unexpected_error_in_a_scan_is_raised_by_the_check(damaged, monkeypatch, name: str, jobs: int):
    root, md = damaged

    def broken(*a, **kw):
        raise RuntimeError(f"{name} broke")
    monkeypatch.setattr(bkdisk.fsck.scans, name, broken)
    outcome: list[BaseException | None] = []

    def run():
        try:
            check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=jobs))
            outcome.append(None)
        except BaseException as e:   # what the check raised is the result
            outcome.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join(120)   # a guard against a hang, not a timing: the check takes well under a second
    assert not t.is_alive(), "the check hangs when a background scan fails"
    [e] = outcome
    assert isinstance(e, RuntimeError) and str(e) == f"{name} broke", repr(e)
    assert not [th for th in threading.enumerate() if th.name == SCANS], "background threads left running"


def test_an_index_file_check_does_not_load_the_rocksdb_reader(damaged):
    root, md = damaged
    code = ("import sys; from bkdisk.bookie.layout import discover; from bkdisk.fsck.api import check_bookie; "
            "from bkdisk.fsck.context import CheckOptions; "
            f"r = check_bookie(discover({root!r}), CheckOptions(jobs=2)); assert r.findings; "
            "print(sorted(m for m in sys.modules if m.startswith(('bkdisk.rocksdbfiles', 'bkdisk.formats.dbledger', "
            "'bkdisk.formats.metadata'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
