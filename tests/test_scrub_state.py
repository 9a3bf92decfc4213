"""The scrub state: written whole or not at all; a run killed while writing it leaves the last good
state, and the next run completes the schedule from it; a disk whose identity changed starts fresh;
a folder that is not a state is refused in one line."""
from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time

import pytest

from bkdisk.audit.scrub_schedule import DiskIdentity, Schedule
from bkdisk.audit.scrub_state import DiskState, StateError, logs_for, read_state, state_batches, write_state
from bkdisk.entrylogs.identity import LogIdentity

DAY = datetime.timedelta(days=1)
T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.UTC)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISK = DiskIdentity("bk1:3181", "inst-1", b"c" * 16)


def logs(n: int) -> dict[int, LogIdentity]:
    return {lid: LogIdentity(1 << 30, 500 + lid, 10**18 + lid, lid.to_bytes(16, "big")) for lid in range(n)}


def day_run(sched: Schedule, state: dict[str, DiskState], day: int, disks: dict[str, dict[int, LogIdentity]]):
    now = T0 + day * DAY
    plans = {d: sched.plan(d, now, ls, logs_for(state, d, DISK)) for d, ls in disks.items()}
    for p in plans.values():
        for lid in p.deep:
            p.after[lid] = p.after[lid].__class__(**{**p.after[lid].__dict__, "verdict": "ok", "found_at": now})
    return plans, {d: DiskState(DISK, p.after) for d, p in plans.items()}


def test_the_state_reads_back_as_written_and_per_disk(tmp_path):
    sched = Schedule()
    disks = {"/data1": logs(20), "/data2": logs(3), "/empty": {}}
    _plans, state = day_run(sched, {}, 0, disks)
    path = str(tmp_path / "state")
    write_state(path, state_batches(state))
    assert read_state(path) == state
    assert read_state(path, "/data2") == {"/data2": state["/data2"]}
    write_state(path, state_batches({}))          # written again: replaced whole, nothing left beside it
    assert read_state(path) == {} and sorted(os.listdir(tmp_path)) == ["state"]


def test_a_disk_with_another_cookie_or_instance_starts_fresh():
    state = {"/data1": DiskState(DISK, {})}
    assert logs_for(state, "/data1", DISK) == {}
    assert logs_for(state, "/data1", DiskIdentity("bk1:3181", "inst-2", b"c" * 16)) is None
    assert logs_for(state, "/data1", DiskIdentity("bk1:3181", "inst-1", b"d" * 16)) is None
    assert logs_for(state, "/data9", DISK) is None


WRITER = r"""
import time, pathlib
from bkdisk.audit.scrub_state import read_state, state_batches, write_state
path = {path!r}
state = read_state(path)
def batches():
    yield from state_batches({{d: s for d, s in state.items() if d == "/data1"}})
    pathlib.Path({ready!r}).touch()
    time.sleep(600)                      # killed here, half-way through the new state
    yield from state_batches(state)
write_state(path, batches())
"""


def test_a_run_killed_while_writing_leaves_the_last_good_state_and_the_next_run_completes(tmp_path):
    sched = Schedule(interval=7 * DAY, spacing=DAY)
    disks = {"/data1": logs(30), "/data2": logs(16)}
    path, ready = str(tmp_path / "state"), str(tmp_path / "ready")
    state: dict[str, DiskState] = {}
    checked: dict[str, list[int]] = {d: [] for d in disks}
    for day in range(3):
        plans, state = day_run(sched, state, day, disks)
        write_state(path, state_batches(state))
        for d, p in plans.items():
            checked[d] += list(p.deep)
    script = WRITER.format(path=path, ready=ready)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(ready):
            assert proc.poll() is None and time.monotonic() < deadline, "the writer did not start"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert any(n.startswith(".state.new-") for n in os.listdir(tmp_path))   # it died half-way
    assert read_state(path) == state
    for day in range(3, 7):                 # the schedule goes on from the last good state
        plans, state = day_run(sched, read_state(path), day, disks)
        write_state(path, state_batches(state))
        for d, p in plans.items():
            checked[d] += list(p.deep)
    assert {d: sorted(c) for d, c in checked.items()} == {d: sorted(ls) for d, ls in disks.items()}
    assert sorted(os.listdir(tmp_path)) == ["ready", "state"]


def test_a_run_killed_between_its_renames_leaves_the_previous_state_aside_and_it_is_read(tmp_path):
    path = str(tmp_path / "state")
    _plans, state = day_run(Schedule(), {}, 0, {"/data1": logs(9)})
    write_state(path, state_batches(state))
    os.rename(path, str(tmp_path / ".state.old-4242"))     # where a killed write leaves it
    assert read_state(path) == state
    write_state(path, state_batches(state))
    assert sorted(os.listdir(tmp_path)) == ["state"] and read_state(path) == state


def test_a_folder_that_is_not_a_state_is_refused_in_one_line(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("mine")
    with pytest.raises(StateError, match=r"other: exists and is not a bkdisk scrub state"):
        write_state(str(other), state_batches({}))
    assert (other / "x").read_text() == "mine"
    with pytest.raises(StateError, match=r"other: not a bkdisk scrub state"):
        read_state(str(other))
    bad = tmp_path / "bad"
    write_state(str(bad), state_batches({}))
    (bad / "logs.parquet").write_bytes(b"not parquet")
    with pytest.raises(StateError, match=r"logs.parquet: not a readable scrub state") as e:
        read_state(str(bad))
    assert "\n" not in str(e.value)


def test_a_state_row_without_its_identity_is_refused_in_one_line(tmp_path):
    import pyarrow as pa

    from bkdisk.audit.scrub_state import LOGS_SCHEMA
    path = str(tmp_path / "state")
    row = {"disk": "/data1", "bookie_id": "bk1:3181", "log_id": 3, "size": 1}
    write_state(path, [pa.RecordBatch.from_pylist([row], schema=LOGS_SCHEMA)])
    with pytest.raises(StateError, match=r"logs.parquet: disk /data1 log 3: expected its identity and due_at"):
        read_state(path)


@pytest.mark.parametrize(("change", "said"), [
    ({"due_at": 1 << 62}, "expected the times of a scrub state, found one out of range"),
    ({"disk": None}, "expected a disk in every row, found a null"),
])
def test_a_state_value_no_run_could_write_is_refused_in_one_line(tmp_path, change, said):
    import pyarrow as pa

    from bkdisk.audit.scrub_state import LOGS_SCHEMA
    path = str(tmp_path / "state")
    _plans, state = day_run(Schedule(), {}, 0, {"/data1": logs(2)})
    write_state(path, state_batches(state))
    rows = [dict(r, **change) for r in pa.parquet.read_table(os.path.join(path, "logs.parquet")).to_pylist()]
    write_state(path, pa.Table.from_pylist(rows, schema=LOGS_SCHEMA).to_batches())   # (1 << 62 us: no datetime)
    with pytest.raises(StateError) as e:
        read_state(path)
    assert said in str(e.value) and "\n" not in str(e.value), e.value


def test_a_state_of_other_columns_is_refused_naming_them(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "state")
    write_state(path, state_batches({}))
    pq.write_table(pa.table({"disk": pa.array([], pa.string()), "extra": pa.array([], pa.int8())}),
                   os.path.join(path, "logs.parquet"))
    with pytest.raises(StateError) as e:
        read_state(path)
    assert "no column bookie_id" in str(e.value) and "an unknown column extra" in str(e.value), e.value


def test_no_flipped_bit_of_the_state_reads_as_another_state(tmp_path):
    """Every bit of the state's pages flipped in turn, one at a time: each read gives the state written or is
    refused in one line; none gives other times, identities or verdicts, nor fewer logs (a page header's
    count, which no page checksum covers, dropping rows). The footer's own damage is refused by Parquet."""
    path = str(tmp_path / "state")
    _plans, state = day_run(Schedule(), {}, 0, {"/data1": logs(20), "/data2": logs(2)})
    write_state(path, state_batches(state))
    f = os.path.join(path, "logs.parquet")
    written = open(f, "rb").read()
    pages_end = len(written) - 8 - int.from_bytes(written[-8:-4], "little")
    silent, refused = [], 0
    for at in range(4, pages_end):
        for bit in (0x01, 0x80):
            data = bytearray(written)
            data[at] ^= bit
            with open(f, "wb") as out:
                out.write(data)
            try:
                got = read_state(path)
            except StateError as e:
                assert "\n" not in str(e)
                refused += 1
                continue
            if got != state:
                silent.append((at, bit))
    assert not silent, f"{len(silent)} flips read as another state, first at {silent[:5]}"
    assert refused > pages_end     # most flips land in checksummed page bytes
