"""What a framing walk reads ahead of itself (diskio.kernels.read_ahead). In a run of entries smaller
than a page it loads the lines ahead, at most as many bytes as the run holds (whose pages it read
anyway), and never past the bytes it was given; elsewhere it only hints, so a page no header lies on is
never read: a light walk of a log of large entries does not read the log whole, nor does one of small
and large entries mixed.

Each walk runs in a process of its own over the log's bytes copied into memory whose pages the walk
must not read are made unreadable (PROT_NONE): a load there ends the process, a hint is dropped."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from bkdisk.digests.plan import DigestPlan
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.walk import HEADER_LOOKAHEAD
from bkdisk.entrylogs.writer import EntryLogWriter
from bkdisk.formats import entrylog as fe
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import Entry, build_entry

PAGE = os.sysconf("SC_PAGE_SIZE")

# The log's bytes end right before an unreadable page; every page outside ``ranges`` is unreadable too.
CHILD = r"""
import ctypes, mmap, sys, faulthandler; faulthandler.enable()
import numpy as np
from bkdisk.digests.plan import DigestPlan
from bkdisk.entrylogs.scan import scan_entry_log
path, deep = sys.argv[1], sys.argv[2] == "deep"
ranges = [tuple(map(int, r.split(":"))) for r in sys.argv[3].split(",") if r]
data = open(path, "rb").read()
page = mmap.PAGESIZE
pages = -(-len(data) // page) + 1
shift = (pages - 1) * page - len(data)              # the bytes end where the last page begins
mm = mmap.mmap(-1, pages * page)
mm[shift:shift + len(data)] = data
base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
readable = {p for lo, hi in ranges for p in range((shift + lo) // page, (shift + hi - 1) // page + 1)}
for p in range(pages):
    if p not in readable and libc.mprotect(base + p * page, page, 0) != 0:
        raise SystemExit(f"mprotect: errno {ctypes.get_errno()}")
arr = np.frombuffer(mm, np.uint8)[shift:shift + len(data)]
s = scan_entry_log(path, data=arr, digests=DigestPlan() if deep else None)
print(len(s.entries), len(s.problems), int(s.entries["offset"].sum()))
"""


def _log(path, payload_sizes: list[int]) -> None:
    w = EntryLogWriter(str(path), 1)
    for i, n in enumerate(payload_sizes):
        e = Entry(1, 0, 7 + i % 3, i // 3, i // 3 - 1, 0, b"\0" * 4, bytes([i % 251 + 1]) * n, DigestType.CRC32C)
        w.append(build_entry(e), 0, e.ledger_id)
    w.close(roll=True)


def _walk(path, ranges: list[tuple[int, int]], deep: bool = False) -> subprocess.CompletedProcess:
    spec = ",".join(f"{lo}:{hi}" for lo, hi in ranges)
    return subprocess.run([sys.executable, "-c", CHILD, str(path), "deep" if deep else "light", spec],
                          capture_output=True, text=True, timeout=300)


def _expected(path) -> str:
    s = scan_entry_log(str(path))
    return f"{len(s.entries)} {len(s.problems)} {int(s.entries['offset'].sum())}"


def _header_ranges(path) -> list[tuple[int, int]]:
    """The file header, each entry's header (what the walk reads of it) and the ledgers map."""
    s = scan_entry_log(str(path))
    heads = [(o, o + HEADER_LOOKAHEAD) for o in s.entries["offset"].tolist()]
    return [(0, fe.HEADER_SIZE), *heads, (s.data_end, os.path.getsize(path))]


@pytest.mark.parametrize("sizes", [[3 * PAGE] * 40, [9000, 20000, 4100, 65000] * 10, [100, 256 << 10] * 20,
                                   [100, 100, 3000, 256 << 10] * 12])
def test_a_light_walk_of_large_entries_reads_only_the_pages_of_their_headers(tmp_path, sizes):
    log = tmp_path / "1.log"
    _log(log, sizes)
    got = _walk(log, _header_ranges(log))
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() == _expected(log)


def test_a_light_walk_of_small_entries_reads_ahead_but_never_past_its_bytes(tmp_path):
    rng = np.random.default_rng(7)
    log = tmp_path / "1.log"
    _log(log, rng.integers(60, 1000, 3000).tolist())
    got = _walk(log, [(0, os.path.getsize(log))])
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() == _expected(log)


def test_the_pages_a_light_walk_of_large_entries_may_not_read_are_unreadable_to_it(tmp_path):
    """The trap works: a deep scan, which reads every payload, is ended on the first unreadable page."""
    log = tmp_path / "1.log"
    _log(log, [3 * PAGE] * 40)
    got = _walk(log, _header_ranges(log), deep=True)
    ended = (-signal.SIGSEGV, -signal.SIGBUS)
    assert got.returncode in ended and got.stdout == "", (got.returncode, got.stderr[-2000:])
    assert scan_entry_log(str(log), digests=DigestPlan()).entries.size == 40


def test_after_a_run_of_small_entries_a_light_walk_reads_no_more_pages_than_the_run_had(tmp_path):
    from bkdisk.diskio.kernels import TOUCH_BELOW, TOUCH_SPAN
    from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
    log = tmp_path / "1.log"
    sizes = ([300] * 20 + [256 << 10]) * 6   # (runs of 6 KB: more than a page, less than TOUCH_SPAN)
    _log(log, sizes)
    s = scan_entry_log(str(log))
    offsets, stored = s.entries["offset"].tolist(), s.entries["size"].tolist()
    allowed, run, first = [], 0, None
    for o, n in zip(offsets, stored):
        if n + SIZE_PREFIX_SIZE < TOUCH_BELOW:
            first = o if first is None else first
            run += n + SIZE_PREFIX_SIZE
        else:   # a run ends where this entry's header is: as many bytes past it as the run held, at most
            if first is not None:
                allowed.append((first, o + min(run, TOUCH_SPAN)))
            run, first = 0, None
    assert allowed and all(b - a > 2 * PAGE for a, b in allowed)
    got = _walk(log, _header_ranges(log) + allowed)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() == _expected(log)
