"""A check forced to spill (a memory limit far below what its tables need) gives exactly the findings,
in the same order, of a check that holds everything in memory; and it leaves no temporary folder."""
from __future__ import annotations

import io
import os
import re
import shutil

import pytest
from click.testing import CliRunner

from bkdisk.bookie.layout import discover, discover_all
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie, write_metadata_dir
from bkdisk.diskio import scan_sink
from bkdisk.diskio.scan_sink import ScanSink
from bkdisk.diskio.spill import PREFIX, MemoryLimit
from bkdisk.entrylogs.scan_parts import ChunkedLogScan
from bkdisk.formats.digests import DigestType
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.lastmark import LastMark, build_last_mark
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.passes.p5_crosscheck import checks as p5_crosscheck
from bkdisk.fsck_cli import fsck_command
from bkdisk.journal.reader import read_journal
from tests.conftest import GOLDEN
from tests.fsck_helpers import entry_record, flip, flip_payload, make_disk, patch

TINY = 1 / 256   # MiB: every scan spills, the cross-check runs over many ranges of logs


def _findings(report) -> list[dict]:
    return [f.to_json() for f in report.findings]


def _both(dirs, tmp: str, monkeypatch, **kw) -> tuple[list[dict], list[dict]]:
    ranges = []
    real = p5_crosscheck.split_ranges
    monkeypatch.setattr(p5_crosscheck, "split_ranges", lambda *a: ranges.append(real(*a)) or ranges[-1])
    held = check_bookie(dirs, CheckOptions(**kw))
    spilled = check_bookie(dirs, CheckOptions(memory=MemoryLimit(TINY, tmp), **kw))
    try:
        ctx = spilled.context
        if ctx.log_files:
            assert ctx.scan_store.spilled > 0 and os.listdir(ctx.spill.path), "the tiny limit did not spill"
            assert len(ranges[-1]) > 0 or len(ctx.log_files) == 1, "the cross-check ran over one range"
        assert held.context.scan_store.spilled == 0
        return _findings(held), _findings(spilled)
    finally:
        held.close()
        spilled.close()
        assert not [n for n in os.listdir(tmp) if n.startswith(PREFIX)]


def _damage(disk) -> None:
    """Faults of every cross-check at once: wrong locations, entries no index points at, a ledger
    whose index is gone, a superseded copy, digests and framing."""
    w = disk.written
    one = LedgerId(0, 1)
    p = w.index_files[one]
    patch(p, 1024 + 8 * 3, (w.locations[(one, 3)] + 7).to_bytes(8, "big"))        # a wrong location
    patch(p, 1024 + 8 * 4, w.locations[(one, 9)].to_bytes(8, "big"))               # points at another entry
    os.truncate(w.index_files[LedgerId(0, 0)], 1024 + 8 * 10 + 3)                   # entries 10.. not indexed
    os.unlink(w.index_files[LedgerId(0, 0x1234)])                                   # a ledger without its index
    flip_payload(w, one, 20)
    path, off = entry_record(w, LedgerId(0, 255), 2)
    patch(path, off, bytes(64))                                                     # framing damage


@pytest.mark.parametrize("with_metadata", [True, False])
def test_spilled_check_of_a_damaged_bookie_gives_the_same_findings(tmp_path, monkeypatch, with_metadata):
    disk = make_disk(str(tmp_path / "d"))
    _damage(disk)
    tmp = tmp_path / "spill"
    tmp.mkdir()
    kw = {"metadata_dir": disk.md_dir} if with_metadata else {}
    held, spilled = _both(disk.dirs, str(tmp), monkeypatch, **kw)
    codes = {f["code"] for f in held}
    assert {"INDEX_LOCATION_WRONG", "ENTRY_NOT_INDEXED", "DIGEST_MISMATCH", "LOG_FRAMING_BROKEN",
            "GARBAGE_ENTRIES"} <= codes
    assert ("LEDGER_NOT_INDEXED" if with_metadata else "LEDGER_INDEX_MISSING") in codes
    assert spilled == held


@pytest.mark.parametrize("pairs", [True, False])
def test_spilled_check_with_jobs_and_payload_hashes_gives_the_same_findings(tmp_path, monkeypatch, pairs):
    """With --jobs, pass 5 joins two ranges at once while two joins of its largest log fit in its pair
    share (made room for here, or not: at the tiny limit a log's join alone is past it)."""
    disk = make_disk(str(tmp_path / "d"))
    _damage(disk)
    tmp = tmp_path / "spill"
    tmp.mkdir()
    widths = []
    real = p5_crosscheck.in_order
    monkeypatch.setattr(p5_crosscheck, "in_order",
                        lambda fn, items, width: widths.append(width) or real(fn, items, width))
    if pairs:
        monkeypatch.setattr(p5_crosscheck, "PAIR_SHARE", 1 << 40)
    held, spilled = _both(disk.dirs, str(tmp), monkeypatch, metadata_dir=disk.md_dir, jobs=2, payload_hash="sha256")
    assert spilled == held and held
    assert widths == [2, 2] if pairs else widths == [2, 1]   # (held with memory to spare, then spilled)


@pytest.mark.parametrize("corpus", ["interleaved-v6-hostport", "interleaved-v4-smallpage", "sorted-v5-bookieid"])
def test_spilled_check_of_golden_bookies_gives_the_same_findings(tmp_path, monkeypatch, corpus):
    for dirs in discover_all(str(GOLDEN / corpus)):
        held, spilled = _both(dirs, str(tmp_path), monkeypatch)
        assert spilled == held


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_check_whose_scans_spill_many_small_parts_gives_the_same_findings(tmp_path, monkeypatch, jobs):
    """Every scan handed over a part a window, windows of a few records, readers taking a few rows at a
    time across the parts' edges, journal digest windows across them: the findings of a check that
    holds each scan in one part."""
    disk = make_disk(str(tmp_path / "d"))
    _damage(disk)
    j = disk.written.journal_files[0]
    data = [r for r in read_journal(j).records if r.kind == 0 and r.length > 100]
    checked = [r for r in data if r.ledger_id in (1, 0x1234)]   # (CRC32C: their digests are verified)
    for r in (checked[1], checked[len(checked) // 2], checked[-2]):
        flip(j, r.offset + 4 + r.length - 3)
    tmp = tmp_path / "spill"
    tmp.mkdir()
    kw = {"metadata_dir": disk.md_dir, "jobs": jobs, "payload_hash": "sha256"}
    held = check_bookie(disk.dirs, CheckOptions(**kw))
    monkeypatch.setattr(ScanSink, "part_bytes", 1)
    monkeypatch.setattr(scan_sink, "PART_ROWS", 7)
    monkeypatch.setattr(MemoryLimit, "window", property(lambda self: 4096))
    spilled = check_bookie(disk.dirs, CheckOptions(memory=MemoryLimit(TINY, str(tmp)), **kw))
    try:
        scans = [s for s in spilled.context.log_scans.values() if isinstance(s, ChunkedLogScan)]
        assert scans and all(s.spilled for s in scans) and max(s.count() for s in scans) > 7
        assert [f["code"] for f in _findings(held)].count("JOURNAL_RECORD_CORRUPT") == 3
        assert _findings(spilled) == _findings(held)
    finally:
        held.close()
        spilled.close()
    assert os.listdir(tmp) == []


def test_a_tmp_dir_inside_the_bookie_is_refused_in_one_line(tmp_path):
    disk = make_disk(str(tmp_path / "d"))
    inside = os.path.join(disk.dirs.ledger_dirs[0], "current")
    before = sorted(os.listdir(inside))
    r = CliRunner().invoke(fsck_command, [disk.root, "--no-progress", "--tmp-dir", inside], catch_exceptions=False)
    assert r.exit_code == 8
    assert r.output.strip().splitlines() == [
        f"bookie-fsck: {inside}: --tmp-dir is inside the bookie's dir {disk.dirs.ledger_dirs[0]}; "
        "expected a folder outside every bookie dir"]
    assert sorted(os.listdir(inside)) == before


def test_cli_with_a_tiny_limit_prints_the_same_report_and_removes_its_folder(tmp_path):
    disk = make_disk(str(tmp_path / "d"))
    _damage(disk)
    tmp = tmp_path / "spill"
    tmp.mkdir()
    stale = tmp / f"{PREFIX}999999999-1-x"   # a folder a killed run left (no such process)
    stale.mkdir()
    outs = []
    for extra in ([], ["--memory-limit", "1", "--tmp-dir", str(tmp)]):
        r = CliRunner().invoke(fsck_command, [disk.root, "--no-progress", "-v", "--metadata-dir", disk.md_dir, *extra],
                               catch_exceptions=False)
        assert r.exit_code == 4
        outs.append([re.sub(r" in [0-9.]+ s\.$", "", line) for line in r.output.splitlines()])
    assert outs[0] == outs[1]
    assert os.listdir(tmp) == []
    shutil.rmtree(tmp)


def test_spilled_check_after_a_crash_and_a_deletion_gives_the_same_findings(tmp_path, monkeypatch):
    """Records after lastMark looked up among spilled locations; a deleted ledger's entries as garbage."""
    ledgers = [LedgerSpec(i, [bytes([i & 0xff]) * (100 + 37 * e) for e in range(12)], DigestType.CRC32C, b"pw")
               for i in (1, 2, 3, 0x105)]
    spec = BookieSpec(ledgers, bookie_id="bk-spill.rack-z", entry_log_size_limit=4096)
    w = write_bookie(spec, str(tmp_path / "b"))
    md = tmp_path / "md"
    write_metadata_dir(spec, str(md))
    os.unlink(w.index_files[LedgerId(0, 3)])
    patch(w.index_files[LedgerId(0, 2)], 1024 + 8 * 7, bytes(8 * 5))
    jid = read_journal(w.journal_files[0]).journal_id
    dirs = discover(str(tmp_path / "b"))
    for d in dirs.ledger_dirs:
        with open(os.path.join(d, "current", "lastMark"), "wb") as f:
            f.write(build_last_mark(LastMark(jid, 512)))
    (md / "1.bin").unlink()
    os.unlink(w.index_files[LedgerId(0, 1)])
    tmp = tmp_path / "spill"
    tmp.mkdir()
    held, spilled = _both(dirs, str(tmp), monkeypatch, metadata_dir=str(md))
    assert {"REPLAY_PENDING", "REPLAY_NOT_IN_STORAGE"} <= {f["code"] for f in held}
    assert spilled == held


@pytest.mark.parametrize("with_metadata", [True, False])
def test_scan_disk_rows_from_spilled_scans_are_the_rows_from_memory(tmp_path, with_metadata):
    """The audit's replicas (with payload hashes) and findings come from fsck's scans: spilled or held,
    whole or cut into batches, the same rows in the same order."""
    from bkdisk.audit import rows as audit_rows
    from bkdisk.audit.metadata_source import MetadataDirSource
    from bkdisk.audit.rows import DiskInput, RunInfo, batch_table, iter_disk, replica_batch_rows, split_tables
    disk = make_disk(str(tmp_path / "d"))
    _damage(disk)
    tmp = tmp_path / "spill"
    tmp.mkdir()
    md = MetadataDirSource(disk.md_dir).load() if with_metadata else {}
    run = RunInfo("r", "0", "h")
    tables, sizes = [], []
    for memory, most in ((None, None), (MemoryLimit(TINY, str(tmp)), None), (None, 5)):
        with pytest.MonkeyPatch.context() as mp:
            if most:   # held scans cut into parts too
                mp.setattr(audit_rows, "MAX_REPLICA_BATCH_ROWS", most)
            batches = list(iter_disk(DiskInput(disk.root), md, run, guard=False, memory=memory))
            sizes.append(([b.num_rows for b in batches if batch_table(b) == "replicas"], replica_batch_rows(memory)))
        t = split_tables(batches)
        t["disks"] = t["disks"].drop_columns(["scan_seconds"])
        tables.append({k: v.to_pylist() for k, v in t.items()})
    assert tables[0]["replicas"] and tables[0]["findings"]
    assert all(r["payload_sha256"] for r in tables[0]["replicas"] if r["digest_ok"] is not None)
    assert tables[1] == tables[0] and tables[2] == tables[0]
    logs = len(disk.written.entry_log_files)
    for got, most in sizes[1:]:   # batches of a bounded number of rows, whatever an entry log holds
        assert max(got) <= most and len(got) > logs
    assert os.listdir(tmp) == []


def test_inventory_rows_in_parts_are_the_rows_at_once(tmp_path):
    from bkdisk.bookie.inventory import scan_bookie
    from bkdisk.digests.plan import DigestPlan
    disk = make_disk(str(tmp_path / "d"))
    for rows in scan_bookie(disk.dirs, DigestPlan(), payload_hash="sha256"):
        assert not isinstance(rows, str)
        whole = b"".join(rows.jsonl_parts(rows=1 << 30))
        assert b"".join(rows.jsonl_parts(rows=7)) == whole and whole.count(b"\n") == len(rows)
        written = io.BytesIO()   # each part from the one buffer the parts before it used
        rows.write_jsonl(written, rows=7)
        assert written.getvalue() == whole


def test_a_check_keeps_more_of_its_log_scans_than_one_that_keeps_a_payload_hash_per_entry(tmp_path):
    from bkdisk.fsck.context import CheckContext
    from bkdisk.fsck.scan_store import HASHED_LOG_SHARE, LOG_SHARE
    disk = make_disk(str(tmp_path / "d"))
    limit = MemoryLimit(1024, str(tmp_path))
    plain = CheckContext(disk.dirs, CheckOptions(memory=limit))
    hashing = CheckContext(disk.dirs, CheckOptions(memory=limit, payload_hash="sha256"))
    try:
        assert plain.scan_store.limit == limit.share(LOG_SHARE)
        assert hashing.scan_store.limit == limit.share(HASHED_LOG_SHARE) < plain.scan_store.limit
    finally:
        plain.close()
        hashing.close()
