"""FIFOs and devices where a bookie's files belong are refused at once ("not a regular file"), never read.

Opening a FIFO for reading blocks until a writer shows up, and ``/dev/zero`` never ends; every reader
(reference and jitted) opens with O_NONBLOCK, checks the file type, and raises or reports
DiskError(path, "not a regular file"). Each in-process check runs under an alarm so that a reader
that blocks fails the test instead of hanging the suite.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.digests.plan import DigestPlan
from bkdisk.diskio.mapped import NOT_REGULAR, DiskError, file_size, map_file, map_window, read_bytes, read_range
from bkdisk.entrylogs.arrays import scan_entry_log_reference
from bkdisk.entrylogs.reader import read_entry_log
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.formats.ids import LedgerId
from bkdisk.indexfiles.reference_reader import read_index
from bkdisk.indexfiles.reference_walk import walk_index_dirs_reference
from bkdisk.indexfiles.scan import read_index_locations, walk_index_dirs
from bkdisk.journal.arrays import scan_journal_reference
from bkdisk.journal.reader import read_journal
from bkdisk.journal.scan import scan_journal

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


class Hung(BaseException):
    """Raised by the alarm: not an OSError (readers turn those into DiskError) nor an Exception."""


@contextmanager
def deadline(seconds: int = 20):
    """Fail (Hung, out of the blocked open) instead of hanging. The alarm repeats every second after
    the deadline, so an open blocked inside a jitted kernel is interrupted too (EINTR) and the
    handler raises as soon as the kernel returns."""
    def fire(*_):
        raise Hung(f"still blocked after {seconds}s")
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, old)


def _bookie_with_fifos(base: str) -> dict[str, str]:
    """A writer-built bookie with a FIFO under each kind of name a bookie dir holds."""
    ledgers = [LedgerSpec(1, [b"a" * 40] * 4), LedgerSpec(2, [b"b" * 40] * 4)]
    wb = write_bookie(BookieSpec(ledgers), base)
    jcur = os.path.dirname(wb.journal_files[0])
    lcur = os.path.dirname(wb.entry_log_files[0])
    fifos = {
        "txn": os.path.join(jcur, f"{int(os.path.basename(wb.journal_files[-1])[:-4], 16) + 1:x}.txn"),
        "log": os.path.join(lcur, "5.log"),
        "idx": os.path.join(lcur, "0", "0", "0.idx"),
        "lastMark": os.path.join(lcur, "lastMark"),
        "VERSION": os.path.join(jcur, "VERSION"),
    }
    for p in fifos.values():
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if os.path.exists(p):
            os.remove(p)
        os.mkfifo(p)
    return fifos


def _assert_not_regular(fn, path: str) -> None:
    t = time.monotonic()
    with deadline():
        with pytest.raises(DiskError) as ei:
            fn()
    assert (ei.value.path, ei.value.what) == (path, NOT_REGULAR)
    assert str(ei.value) == f"{path}: not a regular file"
    assert time.monotonic() - t < 10


def test_diskio_refuses_a_fifo_at_once_in_every_open(tmp_path: Path):
    p = str(tmp_path / "x.txn")
    os.mkfifo(p)
    _assert_not_regular(lambda: read_bytes(p), p)
    _assert_not_regular(lambda: file_size(p), p)
    _assert_not_regular(lambda: read_range(p, 0, 8), p)

    def mapped(cm):
        with cm:
            pass
    _assert_not_regular(lambda: mapped(map_window(p, 0, 4096)), p)
    _assert_not_regular(lambda: mapped(map_file(p)), p)


def _limited_child(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a child with 1 GiB of address space and a timeout: reading /dev/zero whole
    (the defect) then fails there instead of exhausting this machine's memory."""
    return _run(["-c", code], gib=1)


def _run(args: list[str], timeout: int = 60, gib: int = 4) -> subprocess.CompletedProcess:
    """Python with ``args`` in a child with a timeout and ``gib`` GiB of address space (reading /dev/zero
    whole, the defect, then fails in the child instead of exhausting this machine's memory).
    util-linux's prlimit sets the limit: a preexec_fn would fork this process, and a library's fork
    handlers (gRPC's, once a service test ran in it) may abort that child before it runs anything."""
    return subprocess.run(["prlimit", f"--as={gib << 30}", "--", sys.executable, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


_CHILD = """
import sys
from bkdisk.diskio.mapped import DiskError, read_bytes, file_size, map_window
from bkdisk.journal.scan import scan_journal
fn = {"read_bytes": read_bytes, "file_size": file_size, "scan_journal": scan_journal,
      "map_window": lambda p: map_window(p, 0, 4096).__enter__()}[sys.argv[1]]
try:
    fn(sys.argv[2])
except DiskError as e:
    print(repr((e.path, e.what)))
else:
    print("no error")
"""


@pytest.mark.parametrize("fn", ["read_bytes", "file_size", "scan_journal", "map_window"])
def test_diskio_refuses_a_character_device_and_a_link_to_one(tmp_path: Path, fn: str):
    os.symlink("/dev/zero", tmp_path / "link.log")   # links are followed; what they lead to is judged
    for p in ("/dev/zero", "/dev/null", str(tmp_path / "link.log")):
        r = _limited_child(_CHILD.replace("sys.argv[1]", repr(fn)).replace("sys.argv[2]", repr(p)))
        assert (r.returncode, r.stdout.strip()) == (0, repr((p, NOT_REGULAR))), r.stderr[-500:]


def test_diskio_refuses_a_directory_and_names_a_missing_file(tmp_path: Path):
    _assert_not_regular(lambda: read_bytes(str(tmp_path)), str(tmp_path))
    with pytest.raises(DiskError, match=r"missing: cannot read \(No such file or directory\)"):
        read_bytes(str(tmp_path / "missing"))
    with pytest.raises(DiskError, match=r"missing: cannot open for reading \(No such file or directory\)"):
        with map_window(str(tmp_path / "missing"), 0, 10):
            pass


def test_journal_scanners_raise_disk_error_for_a_fifo_named_like_a_journal(tmp_path: Path):
    f = _bookie_with_fifos(str(tmp_path))["txn"]
    _assert_not_regular(lambda: scan_journal(f), f)
    _assert_not_regular(lambda: scan_journal(f, start=512), f)
    _assert_not_regular(lambda: read_journal(f), f)
    _assert_not_regular(lambda: scan_journal_reference(f), f)


def test_entry_log_scanners_raise_disk_error_for_a_fifo_named_like_an_entry_log(tmp_path: Path):
    f = _bookie_with_fifos(str(tmp_path))["log"]
    _assert_not_regular(lambda: scan_entry_log(f), f)
    _assert_not_regular(lambda: scan_entry_log(f, digests=DigestPlan(), window=4096), f)
    _assert_not_regular(lambda: read_entry_log(f), f)
    _assert_not_regular(lambda: scan_entry_log_reference(f), f)


def test_index_readers_raise_disk_error_for_a_fifo_named_like_an_index_file(tmp_path: Path):
    f = _bookie_with_fifos(str(tmp_path))["idx"]
    _assert_not_regular(lambda: read_index(f), f)
    _assert_not_regular(lambda: read_index_locations(f), f)


def test_index_walk_reports_a_fifo_or_device_as_an_error_row_like_the_reference(tmp_path: Path):
    fifos = _bookie_with_fifos(str(tmp_path))
    lcur = os.path.dirname(fifos["log"])
    os.symlink("/dev/null", os.path.join(lcur, "0", "1", "ff.idx"))   # a link to a device
    dirs = [str(tmp_path / "ledgers")]
    with deadline():
        ref = walk_index_dirs_reference(dirs)
        got = walk_index_dirs(dirs)
    rows = dict(zip(got.paths, zip(got.files.tolist(), got.errors)))
    assert got.paths == ref.paths and got.files.tolist() == ref.files.tolist()
    assert [(type(e), str(e)) for e in got.errors] == [(type(e), str(e)) for e in ref.errors]
    for p in (fifos["idx"], os.path.join(lcur, "0", "1", "ff.idx")):
        row, err = rows[p]
        assert isinstance(err, DiskError) and (err.path, err.what) == (p, NOT_REGULAR)
        assert row[6] is False and row[7] == -1     # header_ok, version
    good = [e for p, (_, e) in rows.items() if p.endswith(("1.idx", "2.idx")) and not p.endswith("ff.idx")]
    assert len(good) == 2 and good == [None, None]
    assert LedgerId(0, 1) in {LedgerId(int(r[1]), int(r[2])) for r in got.files.tolist() if r[6]}


def test_lastmark_and_cookie_fifos_raise_disk_error(tmp_path: Path):
    fifos = _bookie_with_fifos(str(tmp_path))
    for k in ("lastMark", "VERSION"):
        _assert_not_regular(lambda k=k: read_bytes(fifos[k]), fifos[k])


def test_fsck_finishes_and_reports_every_fifo_instead_of_hanging(tmp_path: Path):
    fifos = _bookie_with_fifos(str(tmp_path))
    r = _run(["-c", "from bkdisk.fsck_cli import main; main()", str(tmp_path), "--json", "--no-progress"])
    doc = json.loads(r.stdout)
    found = {f["path"]: f for f in doc["findings"] if f.get("path")}
    for kind, p in fifos.items():
        assert p in found, f"{kind}: {p} not reported; {sorted(found)}"
        f = found[p]
        assert f["code"] == "FILE_UNREADABLE" or "HEADER" in f["code"], f
        if f["code"] == "FILE_UNREADABLE":
            assert "not a regular file" in f["message"], f


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_dump_journal_of_a_device_or_fifo_fails_fast_with_one_line(tmp_path: Path, target: str):
    if target == "fifo":
        target = str(tmp_path / "1.txn")
        os.mkfifo(target)
    t = time.monotonic()
    r = _run(["-c", "from bkdisk.cli import main; main()", "dump", "journal", target])
    assert time.monotonic() - t < 60
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.splitlines() == [f"bkdisk: {target}: not a regular file"]
