"""A mapped read that faults (diskio/fault_guard.py): an entry log cut short while the scanner has it
mapped makes the kernel send SIGBUS, as an I/O error under a mapped page does. The commands say so
in one line naming the file and the bytes, exit 8, and write nothing; an audit task turns it into a
``not_audited`` disk. Without a fault the guard changes nothing a command prints or returns."""
from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bkdisk.diskio import fault_guard
from tests.conftest import GOLDEN, golden_copy

ROOT = str(Path(__file__).resolve().parent.parent)
CORPUS = "sorted-v5-bookieid"   # entry logs of several KiB: the first window read is cut short
# Run a console command with entry log 0.log cut short right after a window of it is mapped: the
# scanner's first read past the new end faults.
CUT_SHORT = """
import contextlib, os, sys
import bkdisk.diskio.mapped as mapped, bkdisk.diskio.windowed as windowed
real = mapped.map_window
@contextlib.contextmanager
def cut(path, offset, length, **kw):
    with real(path, offset, length, **kw) as arr:
        if os.path.basename(path) == "0.log" and arr.size > 4096:
            os.truncate(path, 0)
        yield arr
mapped.map_window = windowed.map_window = cut
module, prog = sys.argv[1], sys.argv[2]
sys.argv = [prog] + sys.argv[3:]
__import__(module, fromlist=["console"]).console()
"""


def _run(code: str, *args: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("module,prog,args", [("bkdisk.fsck_cli", "bookie-fsck", []),
                                              ("bkdisk.cli", "bkdisk", ["inventory"])])
def test_a_read_that_faults_is_one_line_naming_the_file_and_exit_8(tmp_path, module, prog, args):
    root = golden_copy(tmp_path, CORPUS)
    p = _run(CUT_SHORT, module, prog, *args, str(root))
    assert p.returncode == 8, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    log = root / "ledgers" / "current" / "0.log"
    # Every window mapped at that moment is a suspect; the one whose file is now shorter is named alone.
    assert re.fullmatch(f"{prog}: {re.escape(str(log))} bytes 1024..[0-9]+: the file shrank to 0 bytes while it "
                        "was read through a map; stopped", lines[0]), lines[0]
    assert "Traceback" not in p.stderr
    assert (log).stat().st_size == 0   # the cut happened, and the command died reading past it


def test_without_a_fault_the_guard_changes_nothing_a_command_prints_or_returns(tmp_path):
    root = golden_copy(tmp_path, CORPUS)
    before = _tree(root)
    runs = {}
    for fork in ("0", "1"):
        env = dict(os.environ, BKDISK_NO_FORK="" if fork == "1" else "1")
        runs[fork] = _run("from bkdisk.fsck_cli import console; console()", str(root), "--json", env=env)
    assert runs["0"].returncode == runs["1"].returncode == 0, runs["1"].stderr
    a, b = json.loads(runs["0"].stdout), json.loads(runs["1"].stdout)
    for d in (a, b):
        d["stats"].pop("seconds")
        for p in d["passes"]:
            p.pop("seconds")
    assert a == b
    assert runs["0"].stderr == runs["1"].stderr
    assert _tree(root) == before


# A guarded work that counts the SIGINTs it gets; the child exits 40 + that count, which the guard returns.
WAIT_FOR_SIGNAL = """
import os, signal, sys, time
from bkdisk.diskio.fault_guard import guard_command
PARENT = os.getpid()
seen = []
def work():
    signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    print("ready", flush=True)
    end = time.monotonic() + 20
    while not seen and time.monotonic() < end:
        time.sleep(0.01)
    time.sleep(0.5)   # a second copy of the signal, if the guard passed one on, lands here
    return len(seen)
code = guard_command(work, "probe", 8, 32)
sys.exit(40 + code if os.getpid() != PARENT else code)
"""


def test_a_signal_sent_to_the_guard_alone_is_passed_on_to_the_work():
    p = subprocess.Popen([sys.executable, "-c", WAIT_FOR_SIGNAL], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGINT)      # kill() of the guard only: the work would never know without it
    assert p.wait(30) == 41, p.stderr.read()


def test_a_terminal_ctrl_c_reaches_the_work_once():
    """The tty sends SIGINT to the whole foreground group: the guard must not send a second one."""
    pid, fd = pty.fork()
    if pid == 0:   # a session leader on the new pty: the guard, whose child is the work
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-c", WAIT_FOR_SIGNAL])
    out = b""
    deadline = time.monotonic() + 60
    while b"ready" not in out and time.monotonic() < deadline:
        out += os.read(fd, 1024)
    os.write(fd, b"\x03")   # Ctrl-C
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 41, out


def test_a_work_killed_by_a_signal_is_said_in_one_line_with_the_cancel_code():
    p = subprocess.Popen([sys.executable, "-c", """
import os, signal, time
from bkdisk.diskio.fault_guard import guard_command
def work():
    print("ready", flush=True)
    time.sleep(30)
raise SystemExit(guard_command(work, "probe", 8, 32))
"""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 32
    assert p.stderr.read().strip() == "probe: cancelled (SIGTERM)"


# The guarded work (guard_command) or the audit's scan child (child_stream) says its pid, then waits
# a minute; its parent is then killed outright, with no chance to pass a signal on.
ORPHAN_WORK = {"guard_command": """
import os, sys, time
from bkdisk.diskio.fault_guard import guard_command
def work():
    print(os.getpid(), flush=True)
    time.sleep(60)
raise SystemExit(guard_command(work, "probe", 8, 32))
""", "child_stream": """
import os, sys, time
from bkdisk.diskio.fault_guard import child_stream
def produce(sink):
    sink.write(b"%d\\n" % os.getpid())
    sink.flush()
    time.sleep(60)
with child_stream(produce) as (src, outcome):
    print(int(src.readline()), flush=True)
    time.sleep(60)
"""}


def _ended(pid: int) -> bool:
    """The process is gone, or a zombie (it ended; whoever adopted it has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("how", sorted(ORPHAN_WORK))
def test_a_parent_killed_outright_takes_its_forked_work_with_it(how):
    p = subprocess.Popen([sys.executable, "-c", ORPHAN_WORK[how]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT)
    child = int(p.stdout.readline())
    try:
        assert child != p.pid and not _ended(child)
        p.kill()
        p.wait(30)
        deadline = time.monotonic() + 20
        while not _ended(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _ended(child), f"the {how} child {child} outlived its killed parent"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("sig,mapped,expected", [
    (signal.SIGBUS, [("/no/such/0.log", 0, 10)], "/no/such/0.log bytes 0..9: the disk returned an I/O error, or the "
                                                 "file shrank, while it was read through a map; stopped"),
    (signal.SIGBUS, [], "the disk returned an I/O error, or the file shrank, while it was read through a map; "
                        "stopped (no mapped read was in progress)"),
    (signal.SIGSEGV, [("/a", 5, 1), ("/b", 0, 2)],
     "/a bytes 5..5; /b bytes 0..1: the reader crashed (SIGSEGV); stopped"),
    (signal.SIGKILL, [("/a", 5, 1)], "killed (SIGKILL: by an operator, or by the system out of memory)"),
    (signal.SIGABRT, [("/a", 5, 1)], "stopped by SIGABRT while reading /a bytes 5..5"),
    (signal.SIGHUP, [], "cancelled (SIGHUP)"),
])
def test_how_a_death_is_said(sig, mapped, expected):
    status = sig   # a wait status of a death by ``sig`` (no core)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == sig
    assert fault_guard.describe_death(status, mapped) == expected
    assert fault_guard.describe_death(3 << 8, mapped) is None   # exited by itself, code 3


def test_the_table_names_the_windows_mapped_now_and_forgets_the_closed_ones():
    t = fault_guard._Slots()
    a = t.take("/x/" + "é" * 10, 7, 100)
    b = t.take("/y", 0, 1)
    assert t.busy() == [("/x/" + "é" * 10, 7, 100), ("/y", 0, 1)]
    t.release(a)
    assert t.busy() == [("/y", 0, 1)]
    taken = [t.take(f"/z{i}", i, 1) for i in range(fault_guard.SLOTS)]
    assert taken.count(-1) == 1 and len(t.busy()) == fault_guard.SLOTS   # one more than fits is not named
    for i in taken + [b]:
        t.release(i)
    assert t.busy() == []


def test_an_audit_task_whose_read_faults_ends_its_disk_not_audited(tmp_path, monkeypatch):
    import bkdisk.diskio.mapped as mapped
    import bkdisk.diskio.windowed as windowed
    from bkdisk.audit.rows import DiskInput, RunInfo, iter_disk, split_tables
    root = golden_copy(tmp_path, CORPUS)
    real = mapped.map_window

    @contextlib.contextmanager
    def cut_short(path, offset, length, **kw):   # in the forked child (it inherits the patch)
        with real(path, offset, length, **kw) as arr:
            if os.path.basename(path) == "0.log" and arr.size > 4096:
                os.truncate(path, 0)
            yield arr

    monkeypatch.setattr(mapped, "map_window", cut_short)
    monkeypatch.setattr(windowed, "map_window", cut_short)
    from bkdisk.audit.replica_files import replica_file, write_replicas
    (tmp_path / "replicas").mkdir()
    path = replica_file(str(tmp_path / "replicas"), 0)
    tables = split_tables(list(write_replicas(iter_disk(DiskInput(str(root)), {}, RunInfo.new("r")), path)))
    assert os.listdir(tmp_path / "replicas") == []   # its copies count nowhere
    disks = tables["disks"].to_pylist()
    assert len(disks) == 1 and disks[0]["status"] == "not_audited"
    assert disks[0]["bookie_id"] == "bookie-1.rack-a"   # read from the cookie before the scan
    assert re.fullmatch(f"{re.escape(str(root / 'ledgers' / 'current' / '0.log'))} bytes 1024..[0-9]+: the file "
                        "shrank to 0 bytes while it was read through a map; stopped", disks[0]["error"])
    # The same disk untouched, guarded and not: the same rows.
    clean = golden_copy(tmp_path / "clean", CORPUS)
    monkeypatch.setattr(mapped, "map_window", real)
    monkeypatch.setattr(windowed, "map_window", real)
    run = RunInfo.new("r")
    guarded = split_tables(list(iter_disk(DiskInput(str(clean)), {}, run)))
    inline = split_tables(list(iter_disk(DiskInput(str(clean)), {}, run, guard=False)))
    for name in ("findings", "replicas"):
        assert guarded[name].equals(inline[name]), name
    assert guarded["replicas"].num_rows == 93
    assert guarded["disks"].drop(["scan_seconds"]).equals(inline["disks"].drop(["scan_seconds"]))


@pytest.mark.parametrize("death", [None, "killed by signal 9 (SIGKILL)"])
def test_a_scan_child_gives_one_disk_row_even_when_it_dies_after_writing_it(tmp_path, monkeypatch, death):
    """The child's stream may hold the disk's "ok" row when the child dies (killed while it exits):
    the disk then gets one row, not_audited, and never both (its file is not published either)."""
    import io

    import pyarrow as pa
    import pyarrow.ipc as ipc

    from bkdisk.audit.replica_files import replica_file, write_replicas
    from bkdisk.audit.rows import TASK_SCHEMA, DiskInput, RunInfo, iter_disk, split_tables, task_batch
    run = RunInfo.new("r")
    root = golden_copy(tmp_path, CORPUS)
    stream = io.BytesIO()
    with ipc.new_stream(stream, TASK_SCHEMA) as w:
        w.write_batch(task_batch("replicas", run, "bookie-1.rack-a", {"ledger_id": [1], "entry_id": [0]}, 1))
        w.write_batch(task_batch("disks", run, "bookie-1.rack-a", {"path": [str(root)], "status": ["ok"]}, 1))

    @contextlib.contextmanager
    def finished_then(produce):   # the child's whole stream, then how it ended
        yield pa.BufferReader(stream.getvalue()), lambda: death

    monkeypatch.setattr(fault_guard, "child_stream", finished_then)
    (tmp_path / "replicas").mkdir()
    path = replica_file(str(tmp_path / "replicas"), 0)
    t = split_tables(list(write_replicas(iter_disk(DiskInput(str(root)), {}, run), path)))
    disks = t["disks"].to_pylist()
    assert len(disks) == 1
    if death is None:
        assert disks[0]["status"] == "ok" and os.path.exists(path)
    else:
        assert disks[0]["status"] == "not_audited" and disks[0]["error"] == death
        assert os.listdir(tmp_path / "replicas") == []


def test_scan_disk_whose_read_faults_writes_a_not_audited_row_and_exits_4(tmp_path):
    import pyarrow.parquet as pq
    root = golden_copy(tmp_path, CORPUS)
    out = tmp_path / "disk.parquet"
    p = _run(CUT_SHORT, "bkdisk.cli", "bkdisk", "scan-disk", str(root), "--out", str(out))
    assert p.returncode == 4, p.stderr
    assert "Traceback" not in p.stderr and "shrank to 0 bytes" in p.stderr
    disks = [r for r in pq.read_table(out).to_pylist() if r["table"] == "disks"]
    assert len(disks) == 1 and disks[0]["status"] == "not_audited" and disks[0]["bookie_id"] == "bookie-1.rack-a"
    assert re.fullmatch(f"{re.escape(str(root / 'ledgers' / 'current' / '0.log'))} bytes 1024..[0-9]+: the file "
                        "shrank to 0 bytes while it was read through a map; stopped", disks[0]["error"])


def test_the_task_loads_the_scanners_once_in_its_own_process_for_its_children():
    """A guarded scan's child inherits the checker and numba's loaded kernels from the task's process
    instead of loading them for every disk: after a guarded scan the parent holds them."""
    code = """
import sys
from bkdisk.audit.rows import DiskInput, RunInfo, iter_disk
assert "bkdisk.fsck.api" not in sys.modules
list(iter_disk(DiskInput(sys.argv[1]), {}, RunInfo.new("r")))
from bkdisk.diskio.kernels import last_nonzero
assert "bkdisk.fsck.api" in sys.modules and "bkdisk.bookie.inventory" in sys.modules and last_nonzero.signatures
print("ok")
"""
    p = _run(code, str(GOLDEN / CORPUS))
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
