"""Memory follows the work, not the sizes a file has or claims: sparse multi-GiB files and huge length
fields give a finding or a one-line error within a fixed RSS ceiling, never a traceback or a hang.

Each command runs as its own process, started by a small launcher so that its peak RSS is its own.
The timeout is a hang guard, not a speed check.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bkdisk.demo import sample_spec
from bookie.writer import write_bookie
from fsck_helpers import patch
from formats.codec import build_field, field_offset
from formats.entrylog import ENTRY_LOG_HEADER_FIELDS, ENTRY_SIZE, HEADER_SIZE as LOG_HEADER_SIZE
from formats.journal import SECTOR_SIZE, header_size, parse_header

RSS_CEILING_MIB = 400
HANG_GUARD_S = 300
GIB = 1 << 30
BIG_INT32 = ENTRY_SIZE.build(0x7FFFFFFF)

LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_pid, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status), file=sys.stderr)
"""


def _run(*args: str) -> tuple[int, int, str, str]:
    """(exit code, peak RSS MiB, stdout, stderr) of a bkdisk command."""
    cmd = [sys.executable, "-c", LAUNCHER, sys.executable, "-c", "from bkdisk.cli import main; main()", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S)
    *err_lines, last = r.stderr.strip().splitlines() or [""]
    rss, code = map(int, last.split())
    return code, rss, r.stdout, "\n".join(err_lines)


@pytest.fixture(scope="module")
def bookie(tmp_path_factory):
    root = tmp_path_factory.mktemp("bounded") / "bookie"
    return write_bookie(sample_spec(), str(root)), str(root)


def _copy(bookie, tmp_path) -> tuple[object, str]:
    import shutil
    written, root = bookie
    dst = str(tmp_path / "bookie")
    shutil.copytree(root, dst)
    remap = lambda p: p.replace(root, dst, 1)  # noqa: E731
    return written, dst, remap


def _assert_bounded(code: int, rss: int, out: str, err: str, ok: tuple[int, ...]) -> None:
    assert code in ok, err
    assert rss < RSS_CEILING_MIB, f"peak RSS {rss} MiB"
    assert "Traceback" not in err and "MemoryError" not in err, err


def test_entry_log_grown_sparse_to_4_gib_is_checked_within_the_ceiling(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    log = remap(written.entry_log_files[0])
    os.truncate(log, 4 * GIB + 12345)        # a hole: the file claims 4 GiB of zeros after its entries
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    json.loads(out)
    code, rss, out, err = _run("inventory", root, "--jsonl")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    code, rss, out, err = _run("dump", "entrylog", log, "--json")
    _assert_bounded(code, rss, out, err, ok=(0, 8))


def test_an_entry_claiming_2_gib_is_a_finding_not_an_allocation(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    log = remap(written.entry_log_files[0])
    patch(log, LOG_HEADER_SIZE, BIG_INT32)   # the first entry's size prefix
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(4,))
    doc = json.loads(out)
    assert any(f["path"] == log and f["offset"] == LOG_HEADER_SIZE for f in doc["findings"])
    code, rss, out, err = _run("dump", "entrylog", log)
    _assert_bounded(code, rss, out, err, ok=(8,))
    assert err.count("\n") == 0 and log in err and f"offset {LOG_HEADER_SIZE}" in err


def test_a_ledgers_map_offset_past_the_end_is_a_finding(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    rolled = [remap(p) for p in written.entry_log_files if os.path.getsize(p) > LOG_HEADER_SIZE][0]
    field = "ledgers_map_offset"
    patch(rolled, field_offset(ENTRY_LOG_HEADER_FIELDS, field), build_field(ENTRY_LOG_HEADER_FIELDS, field, 1 << 46))
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    code, rss, out, err = _run("dump", "entrylog", rolled, "--metadata")
    _assert_bounded(code, rss, out, err, ok=(0, 8))


def test_journal_grown_sparse_to_4_gib_is_checked_and_dumped_within_the_ceiling(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    j = remap(written.journal_files[-1])
    os.truncate(j, 4 * GIB)
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
    code, rss, out, err = _run("dump", "journal", j)
    _assert_bounded(code, rss, out, err, ok=(0, 8))


def test_a_journal_record_claiming_2_gib_is_a_torn_tail_not_an_allocation(bookie, tmp_path):
    written, root, remap = _copy(bookie, tmp_path)
    j = remap(written.journal_files[-1])
    with open(j, "rb") as fh:
        first_record = header_size(parse_header(fh.read(SECTOR_SIZE)))
    patch(j, first_record, BIG_INT32)
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(4,))
    assert any(f["path"] == j and f["offset"] == first_record for f in json.loads(out)["findings"])
    code, rss, out, err = _run("dump", "journal", j)
    _assert_bounded(code, rss, out, err, ok=(8,))
    assert j in err and err.count("\n") == 0 and f"offset {first_record}" in err


def test_dump_of_a_16_gib_sparse_index_stays_within_the_ceiling(bookie, tmp_path):
    from formats.index import LOCATION, pack_location, slot_offset
    written, root, remap = _copy(bookie, tmp_path)
    idx = remap(next(iter(written.index_files.values())))
    far = (1 << 31) - 2
    with open(idx, "r+b") as fh:
        fh.seek(slot_offset(far))
        fh.write(LOCATION.build(pack_location(3, 4100)))
    code, rss, out, err = _run("dump", "index", idx, "--json")
    _assert_bounded(code, rss, out, err, ok=(0,))
    last = json.loads(out.splitlines()[-1])
    assert (last["entry"], last["log"], last["pos"], last["slot_offset"]) == (far, 3, 4100, slot_offset(far))
    code, rss, out, err = _run("fsck", root, "--json", "--no-progress")
    _assert_bounded(code, rss, out, err, ok=(0, 4))
