"""Ctrl-C in the middle of `bkdisk audit` (a real local Spark run, its one scan task held waiting for
the host's scan slot, which the test holds): one line, "bkdisk: cancelled", exit 32; no py4j or Spark
traceback, and nothing of the run left running."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # starts Spark in a process of its own

BIN = Path(sys.executable).parent


def _session_pids(sid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid="], capture_output=True, text=True, check=True).stdout
    return [int(p) for p, s in (line.split() for line in out.splitlines()) if int(s) == sid]


def test_ctrl_c_mid_audit_is_one_line_and_exit_32(golden, tmp_path):
    root = golden / "cluster-3"
    slots = tmp_path / "slots"
    slots.mkdir()
    held = os.open(slots / "slot-0", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(held, fcntl.LOCK_EX)   # the audit's only slot: its first scan task waits, mid-job
    err = tmp_path / "stderr"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               BKDISK_SCAN_SLOTS_DIR=str(slots))
    with open(err, "w") as e:
        # a session of its own, as a terminal's foreground job: Ctrl-C reaches every process of it
        p = subprocess.Popen([str(BIN / "bkdisk"), "audit", *[str(root / "bookies" / b) for b in
                                                               ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")],
                              "--metadata-dir", str(root / "metadata"), "--out", str(tmp_path / "out"),
                              "--master", "local[1]", "--scans-per-host", "1"],
                             stdout=subprocess.DEVNULL, stderr=e, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while "being scanned" not in err.read_text():
            assert p.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1)
        os.killpg(p.pid, signal.SIGINT)
        code = p.wait(timeout=120)
    finally:
        os.close(held)   # (the waiting task, if still alive, may take the slot and end)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    text = err.read_text()
    assert code == 32, text[-3000:]
    said = [x for x in text.splitlines() if x.strip() and not x.startswith("bkdisk audit: ")]
    assert said == ["bkdisk: cancelled"], text[-3000:]
    deadline = time.monotonic() + 60
    while _session_pids(p.pid) and time.monotonic() < deadline:   # the JVM ends once its stdin closes
        time.sleep(0.5)
    assert _session_pids(p.pid) == []
