"""Ctrl-C in the middle of `bkdisk audit` or `bkdisk salvage` (a real local Spark run, its one scan task
held waiting for the host's scan slot, which the test holds): one line, "bkdisk: cancelled", exit 32; no py4j or Spark
traceback, and nothing of the run left running."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from audit_process import audit_mid_scan

pytestmark = pytest.mark.slow   # starts Spark in a process of its own


def _session_pids(sid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid="], capture_output=True, text=True, check=True).stdout
    return [int(p) for p, s in (line.split() for line in out.splitlines()) if int(s) == sid]


@pytest.mark.parametrize("command", ["audit", "salvage"])
def test_ctrl_c_mid_audit_is_one_line_and_exit_32(golden, tmp_path, command):
    root = golden / "cluster-3"
    disks = [str(root / "bookies" / b) for b in ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")]
    given = ["--metadata-dir", str(root / "metadata")] if command == "audit" else []
    with audit_mid_scan([*disks, *given, "--out", str(tmp_path / "out")], tmp_path, command) as (p, err):
        time.sleep(1)
        os.killpg(p.pid, signal.SIGINT)   # Ctrl-C reaches every process of the session
        code = p.wait(timeout=120)
    text = err.read_text()
    assert code == 32, text[-3000:]
    said = [x for x in text.splitlines() if x.strip() and not x.startswith(f"bkdisk {command}: ")]
    assert said == ["bkdisk: cancelled"], text[-3000:]
    deadline = time.monotonic() + 60
    while _session_pids(p.pid) and time.monotonic() < deadline:   # the JVM ends once its stdin closes
        time.sleep(0.5)
    assert _session_pids(p.pid) == []
