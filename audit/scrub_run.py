"""The scrub on the audit's driver (``bkdisk audit --state DIR``): the last good state read before the
disks are scanned and sent to the executors once (a Spark broadcast), from which each disk's task
takes its disk's part (audit/scrub_task.py), and the new state written whole at the end of a run
that succeeded, never before.

A disk whose audit did not finish (not audited, unreadable) keeps its rows of the last good state,
as does a disk of the state this run did not name: its checks are not forgotten.
"""
from __future__ import annotations

import datetime
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq

from bkdisk.audit import scrub_hashes
from bkdisk.audit.rows import AUDITED
from bkdisk.audit.scrub_schedule import DiskIdentity, LogState, Schedule
from bkdisk.audit.scrub_state import (
    LOGS_SCHEMA,
    DiskState,
    StateError,
    probe_writable,
    read_state,
    state_batches,
    state_folder,
    write_state,
)
from bkdisk.audit.scrub_task import ScrubDisk
from bkdisk.entrylogs.identity import LogIdentity

CLOCK_SLACK = datetime.timedelta(hours=1)   # hosts' clocks, stepped or skewed, are not a run gone back


def _not_before_the_state(state_dir: str, known: dict[str, DiskState], now: datetime.datetime) -> None:
    """A run's time is not before a check the state records: logs checked "later" would count as
    verified within the interval, and their next checks would wait for a time already past."""
    latest = max((t for d in known.values() for s in d.logs.values() for t in (s.last_deep, s.found_at)
                  if t is not None), default=None)
    if latest is not None and latest > now + CLOCK_SLACK:
        raise StateError(f"{state_dir}: the state records a check at {latest.isoformat()}, after this run's "
                         f"time {now.isoformat()} (--as-of): a run cannot go back before the state's last")


@dataclass
class ScrubRun:
    state_dir: str
    schedule: Schedule
    now: datetime.datetime
    deep_all: bool = False
    known: dict[str, DiskState] = field(default_factory=dict)
    rows_dir: str = ""
    max_load: float | None = None   # --deep-max-load: above it a task defers its deep checks
    read_from: str | None = None    # the folder the last good state was read from (its payload hashes)

    @classmethod
    def open(cls, state_dir: str, schedule: Schedule, now: datetime.datetime, deep_all: bool,
             max_load: float | None = None) -> ScrubRun:
        """Read the last good state (a StateError, one line, when it is not one)."""
        state_dir = os.path.abspath(state_dir)   # (the executors read its payload hashes)
        known = read_state(state_dir)
        _not_before_the_state(state_dir, known, now)
        probe_writable(state_dir)
        return cls(state_dir, schedule, now, deep_all, known, max_load=max_load, read_from=state_folder(state_dir))

    def prepare(self, spark, scratch: str) -> TaskScrub:
        """What the disks' tasks take: the state as a Spark broadcast (sent once to each executor,
        not with every task), and the folder they write their disks' new rows into."""
        self.rows_dir = os.path.join(scratch, "scrub")
        os.makedirs(self.rows_dir, exist_ok=True)
        shared = spark.sparkContext.broadcast(self.known)
        return TaskScrub(self.schedule, self.now, self.deep_all, self.rows_dir, shared, self.max_load, self.read_from)

    def stage_here(self) -> str:
        """A folder beside the state for one disk scanned in this process (``bkdisk scan-disk --state``):
        its new rows and payload hashes until ``commit`` (removed by the caller)."""
        parent, name = os.path.split(self.state_dir)
        try:
            os.makedirs(parent, exist_ok=True)
            self.rows_dir = tempfile.mkdtemp(prefix=f".{name}.scan-", dir=parent)
        except OSError as e:
            raise StateError(f"{self.state_dir}: cannot write the scrub state ({e.strerror})") from None
        return self.rows_dir

    def for_disk_here(self, path: str, staging: str) -> ScrubDisk:
        """The scrub of the one disk scanned in this process (its state's key: its path as given)."""
        return ScrubDisk(path, self.schedule, self.now, self.deep_all, self.known.get(path),
                         os.path.join(staging, "0.parquet"), max_load=self.max_load, hashes_from=self.read_from,
                         hashes_to=staging, elsewhere=by_identity(self.known, path))

    def commit(self, disk_rows: list[dict], paths: list[str]) -> None:
        """Write the new state: each audited disk's rows from its task, the others' as they were."""
        audited = {d["path"] for d in disk_rows if d["status"] in AUDITED}
        written: dict[str, DiskState] = {}
        for i, path in enumerate(paths):
            f = os.path.join(self.rows_dir, f"{i}.parquet")
            if path in audited and os.path.exists(f):
                written.update(_disk_states(pq.ParquetFile(f).read().cast(LOGS_SCHEMA).to_pylist()))
        moved = moved_disks(self.known, written)
        new = {k: d for k, d in self.known.items() if k not in moved.values()}
        new.update(written)
        commit_state(self.state_dir, new, self.known, self.read_from, self.rows_dir, self.now, moved)


def commit_state(state_dir: str, new: dict[str, DiskState], known: dict[str, DiskState], read_from: str | None,
                 staged: str, now: datetime.datetime, moved: dict[str, str] | None = None) -> None:
    """Write the new state whole: its rows, the payload hashes of the logs deep-read now (staged by
    the tasks under ``staged``) and of the others unchanged since the last good state (``read_from``;
    a disk in ``moved`` has them under its old key)."""
    write_state(state_dir, state_batches(new),
                fill=lambda folder: scrub_hashes.carry(folder, read_from, staged, new, known, now, moved or {}))


def by_identity(known: dict[str, DiskState], key: str) -> dict[DiskIdentity, tuple[str, DiskState]]:
    """The state's disks other than ``key``, by identity, where one key has that identity."""
    seen: dict[DiskIdentity, list[str]] = {}
    for k, d in known.items():
        if k != key:
            seen.setdefault(d.identity, []).append(k)
    return {ident: (ks[0], known[ks[0]]) for ident, ks in seen.items() if len(ks) == 1}


def moved_disks(known: dict[str, DiskState], written: dict[str, DiskState]) -> dict[str, str]:
    """New key -> old key of the disks this run audited under another key than the last good state
    had them (the same identity, under one key the run did not write): the old key's rows go."""
    out = {}
    for k, d in written.items():
        if k in known and known[k].identity == d.identity:
            continue
        old = [o for o, od in known.items() if o not in written and od.identity == d.identity]
        if len(old) == 1:
            out[k] = old[0]
    return out


@dataclass(frozen=True)
class TaskScrub:
    """The scrub as a disk's task has it: ``known`` is a Broadcast of the last good state."""
    schedule: Schedule
    now: datetime.datetime
    deep_all: bool
    rows_dir: str
    known: Any
    max_load: float | None = None
    read_from: str | None = None

    def for_disk(self, path: str, index: int) -> ScrubDisk:
        """The disk's scrub, holding its part of the state only."""
        return ScrubDisk(path, self.schedule, self.now, self.deep_all, self.known.value.get(path),
                         os.path.join(self.rows_dir, f"{index}.parquet"), max_load=self.max_load,
                         hashes_from=self.read_from, hashes_to=self.rows_dir,
                         elsewhere=by_identity(self.known.value, path))


def _disk_states(rows: list[dict]) -> dict[str, DiskState]:
    out: dict[str, DiskState] = {}
    for r in rows:
        d = out.setdefault(r["disk"], DiskState(DiskIdentity(r["bookie_id"], r["instance_id"], r["cookie_hash"]), {}))
        if r["log_id"] is not None:
            d.logs[r["log_id"]] = LogState(LogIdentity(r["size"], r["inode"], r["mtime_ns"], r["frame_hash"]),
                                           r["last_deep"], r["due_at"], r["verdict"], r["found_at"], r["carried"])
    return out
