"""The entry-log scan checks one window's digests on a second thread while it walks the next: the
same results as the one-thread scan on damaged, many-window logs, and a failure in the checking
thread surfaces from the scan instead of being lost or hanging it."""
from __future__ import annotations

import os
import random
import threading

import numpy as np
import pytest

import bkdisk.digests.verify as digests
import bkdisk.entrylogs.scan as scan_module
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.digests.kernels import DIGEST_BAD
from bkdisk.digests.plan import DigestPlan
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.formats.digests import DigestType


@pytest.fixture(scope="module")
def damaged_log(tmp_path_factory) -> str:
    """One log of mixed digests and sizes, with payload flips and a zeroed stretch, over many windows."""
    rnd = random.Random(11)
    d = tmp_path_factory.mktemp("pipeline")
    ledgers = [LedgerSpec(lid, [rnd.randbytes(rnd.choice([10, 700, 9000, 70_000])) for _ in range(30)],
                          digest_type=dt)
               for lid, dt in zip(range(1, 9), [DigestType.CRC32C, DigestType.CRC32, DigestType.DUMMY,
                                                DigestType.CRC32C] * 2)]
    wb = write_bookie(BookieSpec(ledgers, entry_log_size_limit=1 << 30, write_journal=False), str(d))
    log = wb.entry_log_files[0]
    size = os.path.getsize(log)
    clean = scan_entry_log(log, pipeline=False)
    middle = clean.entries[len(clean.entries) // 2]
    with open(log, "r+b") as f:
        f.seek(int(middle["offset"]))   # a zeroed size prefix: framing breaks and resyncs past it
        f.write(bytes(4))
        for at in sorted(rnd.sample(range(2000, size - 2000), 12)):
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x41]))
    return log


@pytest.mark.parametrize("window", [4096, 65536, 1 << 20])
def test_pipelined_scan_equals_the_one_thread_scan_on_a_damaged_log(damaged_log: str, window: int):
    one = scan_entry_log(damaged_log, window=window, digests=DigestPlan(), payload_hash="sha256", pipeline=False)
    two = scan_entry_log(damaged_log, window=window, digests=DigestPlan(), payload_hash="sha256", pipeline=True)
    assert len(one.problems) > 0 and (one.digests["status"] == DIGEST_BAD).any()
    assert one.entries.tolist() == two.entries.tolist()
    assert one.problems.tolist() == two.problems.tolist()
    assert one.digests.tolist() == two.digests.tolist()
    assert one.payload_hashes == two.payload_hashes


@pytest.mark.parametrize("window, pipeline", [(4096, True), (65536, False), (1 << 20, True)])
def test_a_scan_taking_digest_facts_in_its_walk_equals_the_scan_without(damaged_log: str, window: int, pipeline: bool):
    one = scan_entry_log(damaged_log, window=window, digests=DigestPlan(), payload_hash="sha256", pipeline=pipeline)
    two = scan_entry_log(damaged_log, window=window, digests=DigestPlan(), payload_hash="sha256", pipeline=pipeline,
                         digest_facts=True)
    assert (one.digests["status"] == DIGEST_BAD).any()
    assert one.entries.tolist() == two.entries.tolist()
    assert one.digests.tolist() == two.digests.tolist()
    assert one.payload_hashes == two.payload_hashes


@pytest.mark.parametrize("window", [4096, 16384])
def test_windows_of_decided_ledgers_settled_from_facts_equal_the_scan_without(damaged_log: str, window: int,
                                                                               monkeypatch):
    """A second log of the same ledgers (decided by the first): its windows are settled from the facts
    alone where they can be, with the rows a check of the bytes gives."""
    settled: list[bool] = []
    real = digests.digests_from_facts

    def spy(*a):
        k = real(*a)
        settled.append(k >= 0)
        return k
    monkeypatch.setattr(digests, "digests_from_facts", spy)
    with_facts, without = DigestPlan(), DigestPlan()
    for _second in range(2):
        one = scan_entry_log(damaged_log, window=window, digests=without, pipeline=False)
        two = scan_entry_log(damaged_log, window=window, digests=with_facts, pipeline=False, digest_facts=True)
        assert (one.digests["status"] == DIGEST_BAD).any()
        assert one.digests.tolist() == two.digests.tolist()
        assert np.array_equal(with_facts.decided_table()[1], without.decided_table()[1])
    assert any(settled) and not all(settled)   # (windows of CRC32 ledgers need their bytes)


def test_digests_are_checked_on_a_second_thread_only_when_pipelined(damaged_log: str, monkeypatch):
    seen: set[str] = set()
    real = scan_module.verify_entry_digests

    def spy(*a, **k):
        seen.add(threading.current_thread().name)
        return real(*a, **k)
    monkeypatch.setattr(scan_module, "verify_entry_digests", spy)
    main = threading.current_thread().name
    scan_entry_log(damaged_log, window=65536, digests=DigestPlan(), pipeline=False)
    assert seen == {main}
    seen.clear()
    scan_entry_log(damaged_log, window=65536, digests=DigestPlan(), pipeline=True)
    assert seen and main not in seen


@pytest.mark.parametrize("which", ["first", "middle", "last"])
def test_a_failure_in_the_checking_thread_is_raised_by_the_scan(damaged_log: str, monkeypatch, which: str):
    real = scan_module.verify_entry_digests
    calls: list[int] = []

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(scan_module, "verify_entry_digests", counting)
    scan_entry_log(damaged_log, window=65536, digests=DigestPlan(), pipeline=True)
    n = len(calls)
    target = {"first": 0, "middle": n // 2, "last": n - 1}[which]
    calls.clear()

    def failing(*a, **k):
        calls.append(1)
        if len(calls) - 1 == target:
            raise RuntimeError("checker broke")
        return real(*a, **k)
    monkeypatch.setattr(scan_module, "verify_entry_digests", failing)
    before = _digest_threads()   # (threads of earlier tests may end meanwhile: not counted)
    with pytest.raises(RuntimeError, match="checker broke"):
        scan_entry_log(damaged_log, window=65536, digests=DigestPlan(), pipeline=True)
    assert n > 3 and len(calls) == target + 1   # nothing checked after the failure
    assert not _digest_threads() - before   # the checking thread is gone with the scan


def _digest_threads() -> set[threading.Thread]:
    """Scans' digest-checking threads alive (other threads, a server's or another test's, may start
    at any time and are not the scan's)."""
    return {t for t in threading.enumerate() if t.name.startswith(scan_module.DIGEST_THREAD)}


def test_the_plan_sees_windows_in_file_order_when_pipelined(damaged_log: str, monkeypatch):
    bases: list[int] = []
    real = digests.verify_entry_digests

    def spy(data, entries, plan=None, *, base=0, **options):
        bases.append(base)
        return real(data, entries, plan, base=base, **options)
    monkeypatch.setattr(scan_module, "verify_entry_digests", spy)
    scan_entry_log(damaged_log, window=4096, digests=DigestPlan(), pipeline=True)
    assert len(bases) > 10 and bases == sorted(bases) and np.unique(bases).size == len(bases)
