"""The scrub schedule: which entry logs of a disk get a deep check (payload digests) on a run, so that
every log is deep-checked at least once per interval and each run does about its share.

Pure: it takes each log's identity now and what the state holds of it, and returns the plan; it
reads no file. The rules, in order (specs/audit.md, "Scrub schedule"):

- a log never deep-checked on a disk the state knows, or whose identity changed (compaction wrote
  it anew, the bookie appended to it), is due now;
- a log whose next check is due before the next run (``due_at <= now + spacing / 2``) is due now;
- a disk the state does not know, or whose identity changed (another cookie, another instance
  id), starts fresh: its logs are spread over the interval's runs in a seeded random order, so
  the first run does its share and not the whole disk;
- when fewer than the run's share (logs x spacing / interval, rounded down) are due, the oldest
  checked of the rest make up the share: a schedule left uneven (logs removed by compaction)
  evens out.

A log deep-checked because it was new or changed gets its next check a seeded random number of
runs earlier than a full interval (at most ``randomize_ratio`` of it), as Ceph's
``osd_scrub_interval_randomize_ratio``: logs rewritten together by one compaction spread out
instead of falling due together again. A scheduled log keeps its place: next check one interval on.
"""
from __future__ import annotations

import datetime
import enum
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from bkdisk.entrylogs.identity import LogIdentity

DEFAULT_INTERVAL = datetime.timedelta(days=7)
DEFAULT_SPACING = datetime.timedelta(days=1)
DEFAULT_RANDOMIZE_RATIO = 0.5   # Ceph's osd_scrub_interval_randomize_ratio default


class Reason(enum.Enum):
    """Why a log is deep-checked on this run."""
    NEW = "new"                  # first seen on a disk the state knows
    CHANGED = "changed"          # its identity differs from the state's
    SCHEDULED = "scheduled"      # its turn: due before the next run
    SHARE = "share"              # not due yet, checked to make up the run's share (oldest first)
    STATE_DAMAGED = "state damaged"   # what the state keeps of its last check (hashes, findings) is lost


@dataclass(frozen=True)
class DiskIdentity:
    """What makes a disk the same disk from run to run: its bookie and its cookie's instance id and
    bytes (a reformatted disk has another cookie)."""
    bookie_id: str
    instance_id: str | None
    cookie_hash: bytes


@dataclass(frozen=True)
class LogState:
    """What the state holds of one entry log."""
    identity: LogIdentity
    last_deep: datetime.datetime | None   # when it was last deep-checked, None never
    due_at: datetime.datetime             # its next deep check, at the latest
    verdict: str | None = None            # its last deep check's: "ok", "corrupt", "unreadable"
    found_at: datetime.datetime | None = None   # when that verdict was found (carried until it is read again)
    carried: str | None = None   # its last deep check's findings (JSON), reported until it is read again


@dataclass(frozen=True)
class Plan:
    """A run's decision for one disk: the logs to deep-check and why, and each log's state as it
    will be once the run's deep checks are done (``after``; a deep-checked log's verdict is the
    run's to fill in, the others keep theirs and the time it was found)."""
    deep: dict[int, Reason]
    after: dict[int, LogState]
    fresh: bool                 # the disk started fresh (unknown, or its identity changed)


@dataclass(frozen=True)
class Schedule:
    interval: datetime.timedelta = DEFAULT_INTERVAL
    spacing: datetime.timedelta = DEFAULT_SPACING
    randomize_ratio: float = DEFAULT_RANDOMIZE_RATIO
    seed: int = 0

    @property
    def runs_per_interval(self) -> int:
        return max(1, int(self.interval / self.spacing))

    def share(self, logs: int) -> int:
        """How many logs a run deep-checks on its own account (more when logs are new or changed)."""
        return logs // self.runs_per_interval

    def _uniform(self, disk: str, log_id: int, salt: str) -> float:
        """A seeded number in [0, 1) for one log: the same plan for the same inputs, on any host."""
        h = hashlib.blake2b(f"{self.seed}\0{disk}\0{log_id}\0{salt}".encode(), digest_size=8).hexdigest()
        return int(h, 16) / 2.0 ** 64

    def _next_after_first(self, disk: str, log_id: int, now: datetime.datetime) -> datetime.datetime:
        early = math.floor(self._uniform(disk, log_id, now.isoformat()) * self.randomize_ratio
                           * self.runs_per_interval)
        return now + self.interval - early * self.spacing

    def plan(self, disk: str, now: datetime.datetime, logs: Mapping[int, LogIdentity],
             state: Mapping[int, LogState] | None, damaged: frozenset[int] = frozenset()) -> Plan:
        """The plan for ``disk`` (its key in the state) at ``now``: ``logs`` are its entry logs'
        identities now, ``state`` what the last good state holds of it (None: a fresh start),
        ``damaged`` the logs whose last check's hashes or findings the state lost (read again now,
        keeping their place in the rotation)."""
        fresh = state is None
        known: Mapping[int, LogState] = state or {}
        deep: dict[int, Reason] = {}
        due_at: dict[int, datetime.datetime] = {}
        if fresh:
            # Spread evenly: the i-th log of a seeded order falls due on run i * runs / logs.
            order = sorted(logs, key=lambda lid: (self._uniform(disk, lid, "spread"), lid))
            runs = self.runs_per_interval
            for i, lid in enumerate(order):
                due_at[lid] = now + (i * runs // len(order)) * self.spacing
        for lid, ident in logs.items():
            prev = known.get(lid)
            if fresh:
                continue
            if prev is None:
                deep[lid] = Reason.NEW
            elif prev.identity != ident:
                deep[lid] = Reason.CHANGED
            else:
                due_at[lid] = prev.due_at
        horizon = now + self.spacing / 2
        for lid, at in due_at.items():
            if at <= horizon:
                deep[lid] = Reason.SCHEDULED
        scheduled = sum(1 for r in deep.values() if r is Reason.SCHEDULED)
        if scheduled < self.share(len(logs)):
            rest = sorted((lid for lid in due_at if lid not in deep),
                          key=lambda lid: (_last(known.get(lid)), due_at[lid], lid))
            for lid in rest[:self.share(len(logs)) - scheduled]:
                deep[lid] = Reason.SHARE
        for lid in damaged:
            if lid in due_at and lid not in deep:
                deep[lid] = Reason.STATE_DAMAGED
        after = {}
        for lid, ident in logs.items():
            prev = known.get(lid)
            if deep.get(lid) is Reason.STATE_DAMAGED:
                after[lid] = LogState(ident, now, due_at[lid])
            elif lid not in deep:
                if prev is not None and prev.identity == ident:   # not read: its last verdict stands
                    after[lid] = replace(prev, due_at=due_at[lid])
                else:
                    after[lid] = LogState(ident, None, due_at[lid])
            elif deep[lid] in (Reason.NEW, Reason.CHANGED):
                after[lid] = LogState(ident, now, self._next_after_first(disk, lid, now))
            else:
                after[lid] = LogState(ident, now, now + self.interval)
        return Plan(deep, after, fresh)


_NEVER = datetime.datetime.min.replace(tzinfo=datetime.UTC)


def _last(s: LogState | None) -> datetime.datetime:
    return _NEVER if s is None or s.last_deep is None else s.last_deep


def lagging(after: Mapping[int, LogState], now: datetime.datetime,
            interval: datetime.timedelta) -> dict[int, datetime.datetime | None]:
    """The logs not deep-checked within ``interval`` before ``now`` (never: None), with their last check."""
    return {lid: s.last_deep for lid, s in after.items()
            if s.last_deep is None or s.last_deep < now - interval}
