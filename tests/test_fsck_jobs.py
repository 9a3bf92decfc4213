"""fsck's --jobs threads share one digest plan: --jobs 1 and --jobs 4 give the same findings on a
multi-log bookie with damage (flipped payload byte, truncated log, broken framing)."""
from __future__ import annotations

import os

import pytest

from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec
from bkdisk.bookie.writer import write_bookie, write_metadata_dir
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from tests.fsck_helpers import entry_record, flip_payload, mixed_ledgers, patch


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    base = tmp_path_factory.mktemp("jobs")
    ledgers = mixed_ledgers(11, b"jobs")
    spec = BookieSpec(ledgers, bookie_id="jobs-test:3181", entry_log_size_limit=48 * 1024)
    w = write_bookie(spec, str(base / "bookie"))
    md = str(base / "metadata")
    write_metadata_dir(spec, md)
    logs = sorted((p for p in w.entry_log_files if os.path.getsize(p) > 0), key=os.path.getsize)
    assert len(logs) >= 6, logs

    def where(lid: int, eid: int) -> tuple[str, int]:
        return entry_record(w, LedgerId(0, lid), eid)

    # a payload byte of ledger 1 (CRC32C) and of ledger 2 (CRC32), in different logs
    for lid, eid in ((1, 3), (2, 9)):
        flip_payload(w, LedgerId(0, lid), eid)
    # broken framing: a size prefix overwritten in the middle of a log
    log, off = where(3, 7)
    patch(log, off, b"\x7f\xff\x00\x01")
    # a truncated log: cut in the middle of one of its entries
    log, off = where(4, 5)
    with open(log, "r+b") as f:
        f.truncate(off + 100)
    return str(base / "bookie"), md


def _findings(root: str, md: str | None, jobs: int) -> list[str]:
    report = check_bookie(discover(root), CheckOptions(metadata_dir=md, jobs=jobs))
    return sorted(f.line() for f in report.findings)


@pytest.mark.parametrize("with_metadata", [True, False], ids=["metadata", "sniffed"])
def test_one_and_four_jobs_give_identical_findings(damaged, with_metadata: bool):
    root, md = damaged
    md = md if with_metadata else None
    one = _findings(root, md, 1)
    text = "\n".join(one)
    for code in ("DIGEST_MISMATCH", "LOG_FRAMING_BROKEN"):
        assert code in text, (code, text)
    assert text.count("DIGEST_MISMATCH") >= 2, text   # one CRC32C ledger, one CRC32 ledger
    assert "LOG_TRUNCATED" in text or "LOG_TORN_TAIL" in text, text
    for _ in range(3):
        assert _findings(root, md, 4) == one


@pytest.mark.parametrize("cores", [2, 4])
def test_the_entry_log_scans_yield_to_the_passes_thread_and_the_journal_lane(damaged, monkeypatch, cores):
    """With --jobs 2, each entry-log scan thread runs at a lower priority (fsck.scans.yielding_thread),
    and so does the digest thread each log's scan starts where the cores outnumber the scans (none
    is started where they do not: the walk checks the digests itself); the passes' thread and the
    lanes keep theirs."""
    import threading

    from bkdisk.entrylogs.scan import DIGEST_THREAD
    from bkdisk.fsck import scans

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    base = nice()
    seen: list[tuple[str, int]] = []
    run = threading.Thread.run

    def recorded(self):   # (each thread's priority as it ends: a pool's thread lowers its own first thing)
        try:
            return run(self)
        finally:
            seen.append((self.name, nice()))
    monkeypatch.setattr(threading.Thread, "run", recorded)
    monkeypatch.setattr(scans, "usable_cores", lambda: cores)
    root, _md = damaged
    check_bookie(discover(root), CheckOptions(jobs=2)).close()
    assert nice() == base
    lowered = min(19, base + scans.SCAN_NICE)
    pools = [n for name, n in seen if name.startswith("ThreadPoolExecutor-")]
    digests = [n for name, n in seen if name.startswith(DIGEST_THREAD)]
    lanes = [n for name, n in seen if name.startswith("fsck-scans")]
    assert pools and lanes, seen
    assert set(pools) == {lowered} and set(lanes) == {base}
    assert set(digests) == ({lowered} if cores > 2 else set())


def test_a_log_scanned_alone_keeps_its_digest_thread(tmp_path, monkeypatch):
    """With --jobs 2 and one entry log there is one scan at a time: its digests may have their thread."""
    from bkdisk.fsck import scans
    spec = BookieSpec(mixed_ledgers(3, b"alone"), bookie_id="alone:3181")
    w = write_bookie(spec, str(tmp_path / "bookie"))
    current = os.path.dirname(w.entry_log_files[0])
    logs = [os.path.join(current, n) for n in os.listdir(current) if n.endswith(".log")]
    for p in logs:
        if os.path.getsize(p) == 0:   # (the writer's next log, preallocated: a scan of its own)
            os.unlink(p)
    assert [p for p in logs if os.path.exists(p)] == w.entry_log_files
    asked: list[bool] = []
    scan = scans.scan_entry_log

    def recorded(*a, **kw):
        asked.append(kw["pipeline"])
        return scan(*a, **kw)
    monkeypatch.setattr(scans, "scan_entry_log", recorded)
    monkeypatch.setattr(scans, "usable_cores", lambda: 2)
    check_bookie(discover(str(tmp_path / "bookie")), CheckOptions(jobs=2)).close()
    assert asked and all(asked), asked
