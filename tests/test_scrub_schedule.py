"""The scrub schedule: over one interval of runs every entry log is deep-checked once and each run
does its share (+-1 log per disk); a new, rewritten or appended log is due on the next run; a disk
whose identity changed starts fresh; an entry log's identity changes with its size, inode, mtime or
the bytes of its header and ledgers map, never with its entries' payload alone."""
from __future__ import annotations

import datetime
import os
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.audit.scrub_schedule import Reason, Schedule, lagging
from bkdisk.entrylogs.identity import LogIdentity, log_identity
from bkdisk.entrylogs.writer import EntryLogWriter

DAY = datetime.timedelta(days=1)
T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.UTC)


def ident(lid: int, size: int = 1 << 30) -> LogIdentity:
    return LogIdentity(size, 1000 + lid, 10**18 + lid, lid.to_bytes(16, "big"))


def run_days(sched: Schedule, disks: dict[str, dict[int, LogIdentity]], days: int, start=T0):
    """Runs a day apart; yields each run's plans, the state carried from run to run."""
    state: dict[str, dict] = {}
    for day in range(days):
        now = start + day * DAY
        plans = {d: sched.plan(d, now, logs, state.get(d)) for d, logs in disks.items()}
        state = {d: p.after for d, p in plans.items()}
        yield now, plans


disks_strategy = st.dictionaries(st.sampled_from([f"bk{i}:/data{j}" for i in range(4) for j in range(2)]),
                                 st.integers(0, 60).map(lambda n: {lid: ident(lid) for lid in range(n)}),
                                 min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(disks=disks_strategy, seed=st.integers(0, 2**32))
def test_seven_daily_runs_check_every_log_once_each_run_its_share(disks, seed):
    sched = Schedule(interval=7 * DAY, spacing=DAY, seed=seed)
    checked: dict[str, list[int]] = {d: [] for d in disks}
    for _now, plans in run_days(sched, disks, 7):
        for d, p in plans.items():
            n = len(disks[d])
            assert abs(len(p.deep) - n / 7) <= 1, (d, n, len(p.deep))
            assert all(r in (Reason.SCHEDULED, Reason.SHARE) for r in p.deep.values())
            checked[d] += list(p.deep)
    for d, logs in disks.items():
        assert sorted(checked[d]) == sorted(logs)        # each log once, none twice


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 2**32), days=st.integers(7, 30))
def test_steady_schedule_keeps_every_log_within_the_interval(n, seed, days):
    sched = Schedule(interval=7 * DAY, spacing=DAY, seed=seed)
    logs = {lid: ident(lid) for lid in range(n)}
    for now, plans in run_days(sched, {"d": logs}, days):
        p = plans["d"]
        assert abs(len(p.deep) - n / 7) <= 1
        if now >= T0 + 6 * DAY:
            assert lagging(p.after, now, 7 * DAY) == {}


def test_a_first_run_lags_with_the_logs_not_yet_reached():
    sched = Schedule(interval=7 * DAY, spacing=DAY)
    p = sched.plan("d", T0, {lid: ident(lid) for lid in range(14)}, None)
    assert p.fresh and len(p.deep) == 2
    assert set(lagging(p.after, T0, 7 * DAY)) == set(range(14)) - set(p.deep)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 50), seed=st.integers(0, 2**32), day=st.integers(1, 20),
       change=st.sampled_from(["size", "inode", "mtime_ns", "frame_hash"]), data=st.data())
def test_a_rewritten_or_appended_log_is_due_on_the_next_run(n, seed, day, change, data):
    sched = Schedule(interval=7 * DAY, spacing=DAY, seed=seed)
    logs = {lid: ident(lid) for lid in range(n)}
    state = None
    for d in range(day):
        state = sched.plan("d", T0 + d * DAY, logs, state).after
    lid = data.draw(st.sampled_from(sorted(logs)))
    old = logs[lid]
    new = {"size": replace(old, size=old.size + 30_000), "inode": replace(old, inode=old.inode + 7),
           "mtime_ns": replace(old, mtime_ns=old.mtime_ns + 1), "frame_hash": replace(old, frame_hash=b"x" * 16)}
    logs[lid] = new[change]
    now = T0 + day * DAY
    p = sched.plan("d", now, logs, state)
    assert p.deep[lid] in (Reason.CHANGED,)
    assert p.after[lid].last_deep == now and p.after[lid].identity == logs[lid]
    assert now + 3 * DAY < p.after[lid].due_at <= now + 7 * DAY


def test_a_log_new_on_a_known_disk_is_due_and_a_gone_one_is_forgotten():
    sched = Schedule(interval=7 * DAY, spacing=DAY)
    state = sched.plan("d", T0, {lid: ident(lid) for lid in range(14)}, None).after
    logs = {lid: ident(lid) for lid in range(1, 15)}          # log 0 compacted away, log 14 written
    p = sched.plan("d", T0 + DAY, logs, state)
    assert p.deep[14] is Reason.NEW and 0 not in p.after and set(p.after) == set(logs)


def test_a_disk_that_starts_fresh_spreads_its_logs_instead_of_checking_them_all():
    sched = Schedule(interval=7 * DAY, spacing=DAY)
    logs = {lid: ident(lid) for lid in range(70)}
    p = sched.plan("d", T0, logs, None)
    assert p.fresh and len(p.deep) == 10


def test_the_seed_spreads_differently_and_the_same_seed_plans_the_same():
    logs = {lid: ident(lid) for lid in range(70)}
    a = Schedule(seed=1).plan("d", T0, logs, None).deep
    assert a == Schedule(seed=1).plan("d", T0, logs, None).deep
    assert a != Schedule(seed=2).plan("d", T0, logs, None).deep


def test_an_uneven_schedule_is_made_up_oldest_first():
    sched = Schedule(interval=7 * DAY, spacing=DAY)
    logs = {lid: ident(lid) for lid in range(14)}
    state = sched.plan("d", T0, logs, None).after
    # every log checked at once (say by --deep-all on day 0): nothing due for a week, yet each run its share
    state = {lid: replace(s, last_deep=T0 - lid * DAY / 100, due_at=T0 + 7 * DAY) for lid, s in state.items()}
    p = sched.plan("d", T0 + DAY, logs, state)
    assert set(p.deep) == {13, 12} and set(p.deep.values()) == {Reason.SHARE}


def entry_log(path: str, entries: int, roll: bool) -> None:
    w = EntryLogWriter(path, 1)
    for e in range(entries):
        w.append(e.to_bytes(8, "big") * 4, 0, 7)
    w.close(roll=roll)


def test_log_identity_follows_header_map_size_and_file_not_payloads(tmp_path):
    p = str(tmp_path / "1.log")
    entry_log(p, 5, roll=True)
    first = log_identity(p)
    assert first == log_identity(p)
    with open(p, "r+b") as f:                     # a payload byte flipped: not an identity change
        f.seek(1024 + 4 + 20)
        f.write(b"\xff")
    st = os.stat(p)
    os.utime(p, ns=(st.st_atime_ns, first.mtime_ns))
    assert log_identity(p) == first
    with open(p, "r+b") as f:                     # the ledgers map rewritten in place: a change
        f.seek(-1, os.SEEK_END)
        f.write(b"\x01")
    os.utime(p, ns=(st.st_atime_ns, first.mtime_ns))
    changed = log_identity(p)
    assert changed.size == first.size and changed.mtime_ns == first.mtime_ns and changed != first
    q = str(tmp_path / "2.log")                   # rewritten as compaction does: another file
    entry_log(q, 5, roll=True)
    os.replace(q, p)
    assert log_identity(p).inode != first.inode


def test_log_identity_of_a_current_log_changes_when_appended(tmp_path):
    p = str(tmp_path / "1.log")
    entry_log(p, 3, roll=False)
    before = log_identity(p)
    with open(p, "ab") as f:
        f.write((12).to_bytes(4, "big") + b"\0" * 12)
    assert log_identity(p).size == before.size + 16


def test_log_identity_of_a_fifo_named_like_a_log_is_an_error_not_a_wait(tmp_path):
    p = str(tmp_path / "2.log")
    os.mkfifo(p)
    with pytest.raises(OSError, match="not a regular file"):   # (no writer: a plain open would block)
        log_identity(p)


def test_logs_rewritten_together_fall_due_again_on_different_runs():
    sched = Schedule(interval=7 * DAY, spacing=DAY, randomize_ratio=0.5)
    logs = {lid: ident(lid) for lid in range(40)}
    state = sched.plan("d", T0, logs, None).after
    rewritten = {lid: replace(i, inode=i.inode + 1) for lid, i in logs.items()}   # one big compaction
    p = sched.plan("d", T0 + DAY, rewritten, state)
    assert set(p.deep.values()) == {Reason.CHANGED}
    next_runs = {s.due_at for s in p.after.values()}
    assert len(next_runs) >= 3 and all(T0 + 4 * DAY < t <= T0 + 8 * DAY for t in next_runs)


def test_a_log_not_read_this_run_keeps_its_verdict_and_when_it_was_found():
    sched = Schedule(interval=7 * DAY, spacing=DAY)
    logs = {lid: ident(lid) for lid in range(14)}
    p = sched.plan("d", T0, logs, None)
    state = {lid: replace(s, verdict="corrupt", found_at=T0) if lid in p.deep else s for lid, s in p.after.items()}
    q = sched.plan("d", T0 + DAY, logs, state)
    for lid in p.deep:
        assert q.after[lid].verdict == "corrupt" and q.after[lid].found_at == T0
