"""A state whose record of a log's last deep check is damaged (its payload hashes cut, flipped, emptied
or gone, its findings unparsable) has that log read again on the next run, which then audits the disk
and writes the record anew: never a disk 'not audited', never a false divergence from a flipped hash.
``bkdisk scan-disk --state`` as a process, a day apart."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import GOLDEN

from bkdisk.audit.scrub_hashes import HASHES_DIR, damaged_files, log_file
from bkdisk.audit.scrub_state import LOGS_FILE, read_state

BKDISK = os.path.join(os.path.dirname(sys.executable), "bkdisk")
CLUSTER = GOLDEN / "cluster-3"
DISK = str(CLUSTER / "bookies" / "bk-2.rack-a")
T0 = datetime.datetime(2026, 11, 1, 2, tzinfo=datetime.UTC)


def _scan(state, out, when: datetime.datetime, *extra: str) -> subprocess.CompletedProcess:
    p = subprocess.run([BKDISK, "scan-disk", DISK, "--metadata-dir", str(CLUSTER / "metadata"), "--out", str(out),
                        "--state", str(state), "--as-of", when.isoformat(), *extra],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    return p


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """A state after one --deep-all run: every log's hashes and findings recorded."""
    root = tmp_path_factory.mktemp("checked")
    _scan(root / "state", root / "day0.parquet", T0, "--deep-all")
    return root / "state"


def _flip(f: str, at: int) -> None:
    data = bytearray(open(f, "rb").read())
    data[at] ^= 0x01
    open(f, "wb").write(bytes(data))


def _bad_findings(state: str, key: int) -> None:
    f = os.path.join(state, LOGS_FILE)
    t = pq.read_table(f)
    carried = [("not json" if r["log_id"] == key else r["carried"]) for r in t.to_pylist()]
    pq.write_table(t.set_column(t.schema.get_field_index("carried"), "carried", pa.array(carried, pa.string())), f)


def _rename_in_footer(f: str) -> None:
    """A bit of the column name 'offset' in the footer flipped: the name no longer decodes."""
    data = bytearray(open(f, "rb").read())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    at = data.index(b"offset", footer)           # the schema's name of the column, first in the footer
    data[at] ^= 0x80
    open(f, "wb").write(bytes(data))


def _finding_renamed(state: str, key: int) -> None:
    """A carried finding that parses, one of its keys misspelt."""
    f = os.path.join(state, LOGS_FILE)
    t = pq.read_table(f)
    rows = t.to_pylist()
    for r in rows:
        if r["log_id"] == key:
            r["carried"] = json.dumps([{"code": "DIGEST_MISMATCH", "severity": "error", "pass_no": 4, "path": "x",
                                        "offset": 1, "ledger_scope": 0, "ledger_id": 1, "entry_ie": 2,
                                        "message": "m"}])
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), f)


DAMAGE = {
    "a footer's column name undecodable": lambda state, f, key: _rename_in_footer(f),
    "a carried finding's key misspelt": lambda state, f, key: _finding_renamed(state, key),
    "its hash file gone": lambda state, f, key: os.remove(f),
    "hashes cut short": lambda state, f, key: os.truncate(f, 50),
    "hashes emptied": lambda state, f, key: os.truncate(f, 0),
    "a hash page's byte flipped": lambda state, f, key: _flip(f, 40),
    "every hash file gone": lambda state, f, key: shutil.rmtree(os.path.join(state, HASHES_DIR)),
    "findings unparsable": lambda state, f, key: _bad_findings(state, key),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_log_whose_record_is_damaged_is_read_again_and_recorded_anew(checked, tmp_path, damage):
    state = tmp_path / "state"
    shutil.copytree(checked, state)
    key = 0
    f = log_file(str(state), DISK, key)
    assert os.path.getsize(f) > 60
    DAMAGE[damage](str(state), f, key)
    day1 = T0 + datetime.timedelta(days=1)
    p = _scan(state, tmp_path / "day1.parquet", day1)
    assert "not audited" not in p.stderr
    logs = read_state(str(state))[DISK].logs
    assert logs[key].last_deep == day1, (damage, p.stderr)
    assert logs[key].due_at == read_state(str(checked))[DISK].logs[key].due_at   # its place in the rotation kept
    assert not damaged_files(str(state), DISK, [key]) and os.path.exists(log_file(str(state), DISK, key))


def test_a_state_that_knew_another_disk_here_starts_fresh_and_says_why(checked, tmp_path):
    state = tmp_path / "state"
    shutil.copytree(checked, state)
    f = os.path.join(state, LOGS_FILE)
    t = pq.read_table(f)
    at = t.schema.get_field_index("instance_id")
    pq.write_table(t.set_column(at, "instance_id", pa.array(["another"] * t.num_rows, pa.string())), f)
    p = _scan(state, tmp_path / "day1.parquet", T0 + datetime.timedelta(days=1))
    assert "(new: the state's disk here had another cookie)" in p.stderr, p.stderr


def test_a_disk_of_empty_logs_is_not_read_again_as_damaged_each_run(tmp_path):
    """A log without entries has no hashes, but its file is written all the same: a missing file is a
    lost record, and a checked empty log is not read again before its turn."""
    disk = tmp_path / "bk"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", disk, symlinks=True)
    for d in ("ledgers0", "ledgers1"):
        for f in (disk / d / "current").rglob("*"):
            if f.is_file() and (f.suffix == ".idx" or (f.suffix == ".log" and f.stat().st_size)):
                f.unlink()
    state = tmp_path / "state"
    runs = []
    for day in range(4):
        p = subprocess.run([BKDISK, "scan-disk", str(disk), "--out", str(tmp_path / f"{day}.parquet"), "--state",
                            str(state), "--as-of", (T0 + datetime.timedelta(days=day)).isoformat()],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode in (0, 4) and "Traceback" not in p.stderr, p.stderr[-2000:]
        runs.append({k for k, s in read_state(str(state))[str(disk)].logs.items()
                     if s.last_deep == T0 + datetime.timedelta(days=day)})
    assert runs[0] and not runs[1] & runs[0] and not runs[2] & runs[0], runs
