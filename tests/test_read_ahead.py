"""Files asked of the kernel before they are read (diskio.read_ahead, fsck.log_read_ahead, the index
reader's blocks): on a cold disk they are asked together, ahead of their reads and within the bytes
allowed ahead; on a warm one nothing is asked; and what the check finds is the same either way.

The files are written under pytest's temporary folder, which must be on a file system whose pages can
be dropped from the cache (POSIX_FADV_DONTNEED after fsync): a tmpfs cannot, and the tests say so."""
from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import GOLDEN
from test_entrylog_scan import assert_same_scan

from bkdisk.bookie.layout import discover
from bkdisk.diskio import read_ahead
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.fsck import log_read_ahead as lra
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.indexfiles.scan import walk_index_dirs

PAGE = mmap.PAGESIZE
LOG = GOLDEN / "interleaved-v6-hostport" / "ledgers1" / "current" / "0.log"


def resident(path, offset: int = 0) -> bool:
    """Whether the page at ``offset`` is in the page cache (mincore, which reads nothing: a read that
    may not wait starts reading the page it misses)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pages = read_ahead.resident_pages(fd, offset + 1)
        assert pages is not None, "mincore cannot tell"
        return bool(pages[offset // PAGE])
    finally:
        os.close(fd)


def _evict(*paths) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    for p in paths:
        assert not resident(p), f"{p}: its pages stay cached after POSIX_FADV_DONTNEED (a tmpfs?)"


def _file(path, n: int, seed: int = 0) -> str:
    path.write_bytes(np.random.default_rng(seed).bytes(n))
    return str(path)


def _soon(what, within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(0.01)
    return False


def _cached_soon(path: str, offset: int = 0) -> bool:
    return _soon(lambda: resident(path, offset))


def test_cached_tells_a_dropped_page_from_a_read_one(tmp_path):
    p = _file(tmp_path / "f", 64 * PAGE)
    _evict(p)
    assert not read_ahead.cached(p, 10 * PAGE)
    with open(p, "rb") as f:
        f.seek(10 * PAGE)
        f.read(1)
    assert read_ahead.cached(p, 10 * PAGE) and resident(p, 10 * PAGE)   # (a read, and mincore, agree)
    assert read_ahead.cached(str(tmp_path / "missing"))   # cannot tell: its read says why


def test_cached_reads_nothing_where_mincore_answers(tmp_path):
    """A read that may not wait starts reading the page it misses, and on a fast device that read can
    land before the answer: a cold page then looks cached. Asked of mincore, the page stays cold."""
    p = _file(tmp_path / "f", 64 * PAGE)
    _evict(p)
    assert not any(read_ahead.cached(p, at * PAGE) for at in (0, 10, 32, 63))
    time.sleep(0.3)
    assert not any(resident(p, at * PAGE) for at in (0, 10, 32, 63))


def test_asked_files_are_read_into_the_cache_without_being_read(tmp_path):
    files = [_file(tmp_path / f"{i}.idx", 3 * PAGE, i) for i in range(20)]
    _evict(*files)
    read_ahead.ask_for_files([*files, str(tmp_path / "vanished.idx")])
    assert all(_cached_soon(p) for p in files)


@pytest.mark.parametrize("cold", [True, False])
def test_the_index_reader_asks_for_a_cold_block_of_files_at_once_and_reads_the_same(tmp_path, monkeypatch, cold):
    bookie = tmp_path / "b"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", bookie, symlinks=True)
    dirs = [str(bookie / "ledgers0"), str(bookie / "ledgers1")]
    want = walk_index_dirs(dirs)
    idx = [p for p in want.paths]
    assert len(idx) > 1
    if cold:
        _evict(*idx)
    asked: list[list[str]] = []
    real = read_ahead.ask_for_files
    monkeypatch.setattr(read_ahead, "ask_for_files", lambda paths: asked.append(list(paths)) or real([]))
    got = walk_index_dirs(dirs)
    assert list(got.paths) == idx and np.array_equal(got.files, want.files)
    assert np.array_equal(got.locations, want.locations)
    if cold:   # the dirs' files (fewer than a block's) asked together, before any of them was read
        assert asked == [idx]
    else:
        assert asked == []


def _logs(tmp_path, n: int, pages: int) -> list[str]:
    return [_file(tmp_path / f"{i:x}.log", pages * PAGE, i) for i in range(n)]


def test_logs_are_asked_in_walk_order_never_more_bytes_ahead_than_allowed(tmp_path):
    logs = _logs(tmp_path, 6, 16)
    _evict(*logs)
    ahead = lra.LogReadAhead(logs, ahead_bytes=40 * PAGE)
    ahead.start()
    try:
        assert _soon(lambda: ahead.state[logs[2]] == lra.ASKED)
        with ahead.cond:
            states = [ahead.state[p] for p in logs]
            assert ahead.pending <= 40 * PAGE + 16 * PAGE
        # two logs whole, the third for the room left (8 pages): then the limit is reached
        assert states[:3] == [lra.ASKED] * 3 and states[3:] == [lra.NEW] * 3
        assert [ahead.asked[p] for p in logs[:3]] == [16 * PAGE, 16 * PAGE, 8 * PAGE]
        assert _cached_soon(logs[1], 15 * PAGE) and not resident(logs[2], 15 * PAGE)
        for i, p in enumerate(logs):
            if i >= 3:   # asked as the walks before it made room (a walk that comes first asks itself)
                assert _soon(lambda p=p: ahead.state[p] == lra.ASKED)
            hints, asked = ahead.claim(p)
            assert hints is None and asked
            assert _cached_soon(p), f"log {i} was not read ahead"
    finally:
        ahead.stop()
    assert not ahead.thread.is_alive()


def test_a_light_log_is_asked_for_its_hinted_header_pages_only(tmp_path):
    log = _file(tmp_path / "0.log", 64 * PAGE)
    _evict(log)
    hints = np.array([5 * PAGE + 100, 20 * PAGE + 7, 40 * PAGE + PAGE - 8], np.int64)
    ahead = lra.LogReadAhead([log], frozenset([log]), lambda p: hints)
    ahead.start()
    assert _soon(lambda: ahead.state[log] == lra.ASKED)   # (a walk that came first would ask itself)
    got, asked = ahead.claim(log)
    ahead.stop()
    assert asked and got is hints
    assert all(_cached_soon(log, o - o % PAGE) for o in hints.tolist())
    assert _cached_soon(log, 41 * PAGE)                      # the last header runs into the next page
    assert not resident(log, 30 * PAGE) and not resident(log, 60 * PAGE)


def test_a_warm_log_is_left_to_its_walk_and_a_walk_that_came_first_is_not_asked_for(tmp_path):
    logs = _logs(tmp_path, 2, 8)
    for p in logs:
        open(p, "rb").read()
    seen: list[str] = []
    ahead = lra.LogReadAhead(logs, frozenset(logs), lambda p: seen.append(p) or np.zeros(1, np.int64))
    assert ahead.claim(logs[0]) == (None, False)   # its walk began before the thread
    ahead.start()
    assert ahead.claim(logs[1]) == (None, False)   # cached: its walk asks for what it needs
    ahead.stop()
    assert seen == []   # no offsets read (or held) for a log not asked for


def test_stop_ends_a_thread_waiting_for_room(tmp_path):
    logs = _logs(tmp_path, 3, 8)
    _evict(*logs)
    ahead = lra.LogReadAhead(logs, ahead_bytes=PAGE)
    ahead.start()
    time.sleep(0.1)
    t = threading.Thread(target=ahead.stop)
    t.start()
    t.join(10)
    assert not t.is_alive() and not ahead.thread.is_alive()


def test_a_walk_whose_header_pages_were_asked_for_finds_the_same_and_asks_nothing(monkeypatch):
    want = scan_entry_log(LOG)
    offsets = want.entries["offset"].astype(np.int64)
    asked: list = []
    monkeypatch.setattr(os, "posix_fadvise", lambda *a: asked.append(a))
    assert_same_scan(scan_entry_log(LOG, header_hints=offsets, hints_asked=True), want)
    assert asked == []


def test_a_cold_check_finds_what_a_warm_one_finds(tmp_path):
    bookie = tmp_path / "b"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", bookie, symlinks=True)
    dirs = discover(str(bookie))
    warm = check_bookie(dirs, CheckOptions(jobs=1))
    want = [f.to_json() for f in warm.findings]
    warm.close()   # (a report holds its logs' maps, whose pages stay cached)
    files = [os.path.join(f, n) for f, _d, names in os.walk(bookie) for n in names
             if not os.path.islink(os.path.join(f, n))]
    _evict(*files)
    for jobs in (1, 2):
        cold = check_bookie(dirs, CheckOptions(jobs=jobs))
        got = [f.to_json() for f in cold.findings]
        cold.close()
        assert got == want
        _evict(*files)


def test_a_log_read_whole_is_asked_for_past_the_devices_read_ahead_window(tmp_path):
    probe = _file(tmp_path / "probe", PAGE)
    fd = os.open(probe, os.O_RDONLY)
    window = read_ahead.ask_window(fd)   # (one request is read to this at most)
    os.close(fd)
    log = _file(tmp_path / "0.log", 3 * window + 5 * PAGE)
    _evict(log)
    ahead = lra.LogReadAhead([log])
    ahead.start()
    assert _soon(lambda: ahead.state[log] == lra.ASKED)
    assert ahead.claim(log) == (None, True)
    ahead.stop()
    assert all(_cached_soon(log, at) for at in (0, window + PAGE, 2 * window + PAGE, 3 * window + 4 * PAGE))



def test_a_run_of_header_pages_longer_than_the_window_is_asked_for_to_its_end(tmp_path):
    """Small records' headers touch: their pages are one run, which one request would read only the
    first window of."""
    probe = _file(tmp_path / "probe", PAGE)
    fd = os.open(probe, os.O_RDONLY)
    window = read_ahead.ask_window(fd)
    os.close(fd)
    log = _file(tmp_path / "0.log", 3 * window + 5 * PAGE)
    _evict(log)
    fd = os.open(log, os.O_RDONLY)
    try:
        offsets = np.arange(0, 3 * window + 4 * PAGE, 500, dtype=np.int64)
        assert read_ahead.will_need(fd, offsets, 37) == 3 * window + 4 * PAGE   # (one run: pages 0 .. 3w + 3)
    finally:
        os.close(fd)
    assert all(_cached_soon(log, at) for at in (0, window + PAGE, 2 * window + PAGE, 3 * window + 3 * PAGE))

STOPPED_CHILD = r"""
import os, sys, threading, time
from bkdisk.bookie.layout import discover
from bkdisk.diskio import read_ahead
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
dirs = discover(sys.argv[1])
logs = frozenset(os.path.join(d, "current", n) for d in dirs.ledger_dirs
                 for n in os.listdir(os.path.join(d, "current")) if n.endswith(".log"))
read_ahead.cached = lambda path, offset=0: False   # a cold disk

def progress(what, done, _total):
    if what.startswith("pass 1") and done == 0:
        time.sleep(0.3)   # a lane's walk has taken its first log by now
        raise KeyboardInterrupt("Ctrl-C during pass 1")
try:
    check_bookie(dirs, CheckOptions(light_logs=logs, jobs=int(sys.argv[2]), progress=progress))
except KeyboardInterrupt:
    print("stopped", sorted(t.name for t in threading.enumerate()))
"""


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_check_stopped_in_pass_1_ends_its_threads_while_a_walk_waits_for_the_log_being_asked_for(tmp_path, jobs):
    bookie = tmp_path / "b"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", bookie, symlinks=True)
    try:   # (in a process of its own: threads that hang would keep this one from exiting)
        r = subprocess.run([sys.executable, "-c", STOPPED_CHILD, str(bookie), str(jobs)], capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"jobs={jobs}: the stopped check did not end")
    assert r.stdout.strip() == "stopped ['MainThread']", r.stdout + r.stderr


def test_header_pages_in_the_cache_are_not_asked_for_and_dropped_ones_are(tmp_path):
    half = (2 << 20) // PAGE   # (the cache drops whole folios, of up to 2 MiB: the half dropped is one)
    log = _file(tmp_path / "0.log", 2 * half * PAGE)
    offsets = np.arange(100, 2 * half * PAGE, 64 * PAGE, dtype=np.int64)   # a header every 64 pages
    fd = os.open(log, os.O_RDONLY)
    try:
        os.pread(fd, 2 * half * PAGE, 0)
        assert read_ahead.will_need(fd, offsets, 37) == 0   # warm: not one request
        os.fsync(fd)
        os.posix_fadvise(fd, half * PAGE, half * PAGE, os.POSIX_FADV_DONTNEED)
        assert not resident(log, half * PAGE) and resident(log, 0)
        assert read_ahead.will_need(fd, offsets, 37) == (half // 64) * PAGE   # the second half's headers only
    finally:
        os.close(fd)
    assert all(_cached_soon(log, int(at)) for at in offsets[offsets >= half * PAGE])


def _as_another_reader(fd: int, offsets: np.ndarray) -> list[bool]:
    """The three answers for a reader that neither owns nor may write the file of ``fd``: mincore not
    believed, no resident pages, every wanted page asked."""
    return [not read_ahead.mincore_answers(fd), read_ahead.resident_pages(fd, 64 * PAGE) is None,
            read_ahead.will_need(fd, offsets, 37) == len(offsets) * PAGE]


def test_mincore_is_asked_only_where_it_answers_and_a_file_it_would_not_tell_of_is_asked_for_whole(tmp_path):
    """Linux answers "every page is cached" to a process that neither owns nor may write the file:
    such a file's pages are all asked for, as a cold one's."""
    log = _file(tmp_path / "0.log", 64 * PAGE)
    _evict(log)
    os.chmod(log, 0o644)
    offsets = np.arange(0, 64 * PAGE, 8 * PAGE, dtype=np.int64)
    fd = os.open(log, os.O_RDONLY)
    try:
        assert read_ahead.mincore_answers(fd)   # (its owner)
        if os.geteuid() == 0:   # root may write any file: a forked child reads it as another user
            pid = os.fork()
            if pid == 0:   # (only this child changes user: the test process's other threads keep theirs)
                code = 1
                try:
                    os.setuid(65534)
                    code = sum(1 << i for i, ok in enumerate(_as_another_reader(fd, offsets)) if not ok)
                finally:
                    os._exit(code)
            assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        else:   # a file of root's that this user may read and not write
            with open("/etc/passwd", "rb") as f:
                assert os.fstat(f.fileno()).st_uid != os.geteuid()
                assert _as_another_reader(f.fileno(), offsets[:1]) == [True, True, True]
    finally:
        os.close(fd)


def test_no_page_is_asked_for_past_the_files_end_or_before_its_start(tmp_path):
    log = _file(tmp_path / "0.log", 8 * PAGE)
    _evict(log)
    fd = os.open(log, os.O_RDONLY)
    try:
        offsets = np.array([-PAGE, 0, 2 * PAGE, 8 * PAGE, 20 * PAGE], dtype=np.int64)   # (sorted)
        assert read_ahead.will_need(fd, offsets, 37) == 2 * PAGE   # pages 0 and 2 only
    finally:
        os.close(fd)
