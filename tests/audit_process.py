"""`bkdisk audit` as a process of its own, caught mid-scan: its one scan task held waiting for the
host's scan slot (BKDISK_SCAN_SLOTS_DIR), which the test holds while it signals the run."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent


@contextmanager
def audit_mid_scan(args: list[str], tmp: Path, command: str = "audit") -> Iterator[tuple[subprocess.Popen, Path]]:
    """`bkdisk audit ARGS --master local[1] --scans-per-host 1` (or ``command``: salvage runs the same disk
    tasks) in a session of its own (as a
    terminal's foreground job), yielded with its stderr file once a disk is being scanned: that
    disk's task waits for the slot held here. On the way out the slot is let go and what is left of
    the run is killed."""
    slots = tmp / "slots"
    slots.mkdir()
    held = os.open(slots / "slot-0", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(held, fcntl.LOCK_EX)
    err = tmp / "stderr"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               BKDISK_SCAN_SLOTS_DIR=str(slots))
    with open(err, "w") as e:
        p = subprocess.Popen([str(BIN / "bkdisk"), command, *args, "--master", "local[1]", "--scans-per-host", "1"],
                             stdout=subprocess.DEVNULL, stderr=e, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while "being scanned" not in err.read_text():
            assert p.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.2)
        yield p, err
    finally:
        os.close(held)   # (the waiting task, if still alive, may take the slot and end)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
