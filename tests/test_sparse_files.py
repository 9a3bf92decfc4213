"""A sparse file (a hole of 1 TB) is not read through: its holes read as zeros, and the scanners skip
them (SEEK_DATA) where they would read zeros to the end. Each check runs in a child process with a
time limit, so a scanner that reads the hole fails here instead of hanging the suite."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import golden_copy

TB = 1 << 40
LIMIT_S = 120   # reading 1 TB of holes takes hours: any scanner that reads it fails, however fast the machine


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=LIMIT_S)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_a_journal_extended_by_a_hole_scans_as_before(tmp_path):
    root = str(golden_copy(tmp_path))
    jdir = os.path.join(root, "journal", "current")
    path = os.path.join(jdir, sorted(n for n in os.listdir(jdir) if n.endswith(".txn"))[-1])
    code = f"""
from bkdisk.journal.scan import scan_journal
s = scan_journal({path!r})
print(len(s.records), s.end_kind.name, s.end_offset, s.end_detail)
"""
    before = _run(code)
    os.truncate(path, TB)
    assert _run(code) == before


def test_an_entry_log_that_is_only_a_hole_is_checked_without_reading_it(tmp_path):
    root = str(golden_copy(tmp_path))
    log = os.path.join(root, "ledgers1", "current", "7.log")
    with open(log, "wb") as f:
        f.truncate(TB)   # a new file: no data at all
    out = _run(f"""
from bkdisk.digests.plan import DigestPlan
from bkdisk.entrylogs.scan import scan_entry_log
s = scan_entry_log({log!r}, digests=DigestPlan())
print(s.header_error is not None, len(s.entries), s.size)
""")
    assert out == f"True 0 {TB}"
    r = subprocess.run([os.path.join(os.path.dirname(sys.executable), "bookie-fsck"), root, "--json", "-j", "1"],
                       capture_output=True, text=True, timeout=LIMIT_S)
    assert r.returncode == 4 and '"LOG_HEADER_BAD"' in r.stdout, r.stderr[-2000:]


def test_an_entry_log_extended_by_a_hole_scans_as_before(tmp_path):
    root = str(golden_copy(tmp_path))
    log = os.path.join(root, "ledgers1", "current", "0.log")
    code = f"""
from bkdisk.digests.plan import DigestPlan
from bkdisk.entrylogs.scan import scan_entry_log
s = scan_entry_log({log!r}, digests=DigestPlan())
print(len(s.entries), int(s.digests["status"].sum()), len(s.problems), s.data_end)
"""
    before = _run(code)
    os.truncate(log, TB)
    assert _run(code) == before
