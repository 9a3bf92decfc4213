"""A light walk (no digests) of a log whose records are known from its last deep read asks the kernel
for its headers' pages ahead, all at once, and finds what it finds without the hints; a deep scan
reads every byte and takes no hints. The scrub hands hints only for a sparse log's records."""
from __future__ import annotations

import mmap
import os

import numpy as np
from conftest import GOLDEN
from test_entrylog_scan import assert_same_scan
from test_scrub_hashes import rows

from bkdisk.audit.scrub_hashes import SPARSE_RECORD_BYTES, HashWriter, record_offsets
from bkdisk.digests.plan import DigestPlan
from bkdisk.diskio import read_ahead
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.walk import HEADER_LOOKAHEAD

LOG = GOLDEN / "interleaved-v6-hostport" / "ledgers1" / "current" / "0.log"


def _asking(monkeypatch) -> list[tuple[int, int, int]]:
    asked: list[tuple[int, int, int]] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: asked.append((off, n, advice)))
    return asked


def test_a_walk_without_digests_asks_ahead_for_the_pages_of_its_hinted_headers_and_finds_the_same(monkeypatch):
    want = scan_entry_log(LOG)
    offsets = want.entries["offset"].astype(np.int64)
    assert len(offsets) > 1
    asked = _asking(monkeypatch)
    assert_same_scan(scan_entry_log(LOG, header_hints=offsets), want)
    assert asked == []   # (the log was just read: its pages are in the page cache)
    monkeypatch.setattr(read_ahead, "resident_pages", lambda fd, n: np.zeros(-(-n // mmap.PAGESIZE), np.bool_))
    assert_same_scan(scan_entry_log(LOG, header_hints=offsets), want)   # as on a cold disk
    assert asked and {a for _o, _n, a in asked} == {os.POSIX_FADV_WILLNEED}
    page = mmap.PAGESIZE
    got = {p for o, n, _a in asked for p in range(o // page, (o + n) // page)}
    heads = {p for o in offsets.tolist() for p in range(o // page, (o + HEADER_LOOKAHEAD - 1) // page + 1)}
    assert got == heads   # each header's pages, and no other


def test_a_deep_scan_reads_every_byte_and_asks_for_no_hinted_pages(monkeypatch):
    want = scan_entry_log(LOG, digests=DigestPlan())
    asked = _asking(monkeypatch)
    got = scan_entry_log(LOG, digests=DigestPlan(), header_hints=want.entries["offset"].astype(np.int64))
    assert_same_scan(got, want)
    assert asked == []


def test_the_scrub_hints_a_sparse_logs_record_offsets_from_its_last_deep_read_and_none_else(tmp_path):
    w = HashWriter(str(tmp_path), "/mnt/bk1")
    w.add(7, rows(4, 0, [bytes([i]) * 50 for i in range(4)]))
    w.close()
    kept = [1024 + 100 * i for i in range(4) if i != 1]   # (entry 1 had no payload hash)
    sparse = len(kept) * SPARSE_RECORD_BYTES
    assert record_offsets(str(tmp_path), "/mnt/bk1", 7, sparse).tolist() == kept
    assert record_offsets(str(tmp_path), "/mnt/bk1", 7, sparse - 1) is None   # dense: read-ahead serves it
    assert record_offsets(str(tmp_path), "/mnt/bk1", 8, sparse) is None       # no file of the log
    assert record_offsets(None, "/mnt/bk1", 7, sparse) is None                # no state yet
