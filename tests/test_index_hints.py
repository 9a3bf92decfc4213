"""Where the records of logs walked light start, from the bookie's own index (fsck.index_hints): the
offsets of each sparse log's indexed entries, in walk order within the limit, from any layout of the
locations (spilled or not); and a light check of a cold index-files bookie whose logs the scrub has no
offsets for asks for exactly those header pages, and finds what it finds warm."""
from __future__ import annotations

import mmap
import os
import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_read_ahead import _evict

from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.entrylogs.walk import HEADER_LOOKAHEAD, SPARSE_RECORD_BYTES
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.fsck import index_hints
from bkdisk.fsck import log_read_ahead as lra
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.indexfiles.arrays import LOCATION_DTYPE

PAGE = mmap.PAGESIZE


def _reference(locs: np.ndarray, logs: list[tuple[str, int, int]], limit: int) -> dict[str, list[int]]:
    out, room = {}, limit
    for path, log_id, size in logs:
        pos = sorted({int(p) - SIZE_PREFIX_SIZE for p in locs["pos"][locs["log"] == log_id]})
        n = int((locs["log"] == log_id).sum())
        if n and n * SPARSE_RECORD_BYTES <= size and n <= room:
            out[path], room = pos, room - n
    return out


LOCS = st.lists(st.tuples(st.integers(0, 6), st.integers(SIZE_PREFIX_SIZE, 2**32 - 1)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(locs=LOCS, sizes=st.lists(st.integers(0, 10**6), min_size=5, max_size=5),
       logs=st.permutations([0, 1, 2, 3, 5]), limit=st.integers(0, 70), chunk=st.sampled_from([1, 7, 1 << 20]),
       spilled=st.booleans())
def test_each_sparse_logs_offsets_are_its_indexed_records_in_walk_order_within_the_limit(
        tmp_path_factory, locs, sizes, logs, limit, chunk, spilled):
    arr = np.zeros(len(locs), LOCATION_DTYPE)
    arr["log"], arr["pos"] = [lg for lg, _p in locs], [p for _lg, p in locs]
    arr["file"], arr["entry"] = np.arange(len(locs)), np.arange(len(locs))
    given_logs = [(f"/b/{lg:x}.log", lg, n) for lg, n in zip(logs, sizes, strict=True)]
    source = arr
    if spilled:   # a ChunkedArray that wrote its rows to a file
        folder = SpillFolder(MemoryLimit(tmp_dir=str(tmp_path_factory.mktemp("spill"))))
        source = ChunkedArray(LOCATION_DTYPE, 48, folder, "locations")
        for k in range(0, len(arr), 5):
            source.append(arr[k:k + 5])
        assert source.spilled or len(arr) * LOCATION_DTYPE.itemsize <= 48
    old = index_hints.CHUNK
    index_hints.CHUNK = chunk
    try:
        got = index_hints.index_offsets(source, given_logs, limit)
    finally:
        index_hints.CHUNK = old
    assert {p: o.tolist() for p, o in got.items()} == _reference(arr, given_logs, limit)
    assert all(o.dtype == np.int64 for o in got.values())


def _bookie(tmp_path) -> tuple[object, object]:
    big = [bytes([i]) * (10_000 + 37 * i) for i in range(12)]   # records ~10 KB apart: sparse
    spec = BookieSpec([LedgerSpec(lid, big) for lid in (1, 2, 3)], write_journal=False,
                      entry_log_size_limit=256 * 1024)
    return write_bookie(spec, str(tmp_path)), spec


def test_a_cold_light_check_asks_for_the_header_pages_the_index_gives_and_finds_what_it_finds_warm(tmp_path,
                                                                                                monkeypatch):
    written, _spec = _bookie(tmp_path)
    os.remove(written.index_files[next(lid for lid in written.index_files if lid.ledger == 2)])   # not indexed
    dirs = discover(str(tmp_path))
    logs = frozenset(written.entry_log_files)
    assert len(logs) > 1

    def light(): return CheckOptions(light_logs=logs, jobs=1)
    warm = check_bookie(dirs, light())
    want = [f.to_json() for f in warm.findings]
    warm.close()
    _evict(*[os.path.join(f, n) for f, _d, names in os.walk(tmp_path) for n in names])
    asked: dict[str, set[int]] = {}
    real = os.posix_fadvise

    def advise(fd, off, n, advice):
        if advice == os.POSIX_FADV_WILLNEED and n:
            pages = range(off // PAGE, -(-(off + n) // PAGE))
            asked.setdefault(os.readlink(f"/proc/self/fd/{fd}"), set()).update(pages)
        return real(fd, off, n, advice)
    monkeypatch.setattr(os, "posix_fadvise", advise)
    # A walk that begins before the asking thread reaches its log takes it unasked (by design: it never
    # waits for the thread); here each walk lets the thread ask first, so that what it asks is what is checked.
    real_claim = lra.LogReadAhead.claim

    def claim(self, path):
        deadline = time.monotonic() + 10
        with self.cond:
            while self.state.get(path) == lra.NEW and not self.stopped and time.monotonic() < deadline \
                    and self.thread is not None and self.thread.is_alive():   # (an empty log is never asked)
                self.cond.wait(0.05)
        return real_claim(self, path)
    monkeypatch.setattr(lra.LogReadAhead, "claim", claim)
    cold = check_bookie(dirs, light())
    got = [f.to_json() for f in cold.findings]
    cold.close()
    assert got == want
    for log in sorted(logs):
        log_id = int(os.path.basename(log)[:-4], 16)
        held = [loc & 0xFFFFFFFF for (lid, _e), loc in written.locations.items()
                if loc >> 32 == log_id and lid.ledger != 2]
        heads = {p for at in held for p in range((at - SIZE_PREFIX_SIZE) // PAGE,
                                                 (at - SIZE_PREFIX_SIZE + HEADER_LOOKAHEAD - 1) // PAGE + 1)}
        assert asked.get(log, set()) == heads, log   # the indexed headers' pages, no other
