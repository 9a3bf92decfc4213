"""The scrub in a disk's task (``bkdisk audit --state``): the disk's plan from the state's rows of it,
the entry logs walked light (entry headers and index cross-checks, no payload digests or hashes),
the new state rows of the disk, and the disk's scrub figures for its disks row (audit/scrub_columns.py).

The driver (audit/scrub_run.py) hands each task a ``ScrubDisk`` holding only its disk's state; the
task's scan writes the disk's new state rows to ``<rows_dir>/<disk index>.parquet``, which the
driver takes only when the disk's audit finished (specs/audit.md, "Scrub schedule").
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bkdisk.audit.rows import signed, task_batch, to_signed
from bkdisk.audit.scrub_hashes import HashWriter, damaged_files, light_column, record_offsets
from bkdisk.audit.scrub_schedule import DiskIdentity, LogState, Plan, Reason, Schedule, lagging
from bkdisk.audit.scrub_state import LOGS_SCHEMA, DiskState, state_batches
from bkdisk.formats.errors import BkdiskError
from bkdisk.formats.paths import CURRENT_DIR

# The findings only a deep read makes: a log not deep-read this run carries its last ones.
DEEP_CODES = ("DIGEST_MISMATCH", "DIGEST_NOT_VERIFIED", "DIGEST_SNIFFED")

LAGGING_NAMED = 20   # logs named in a disk's lagging_logs (the count says the rest)
SKIPPED_FOR_LOAD = "skipped for load"


def load_per_cpu() -> float:
    """This host's 1-minute load average per CPU (Ceph's osd_scrub_load_threshold compares the same)."""
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def log_key(dir_index: int, log_id: int, per_dir: bool) -> int:
    """A log's key in the state: its id; DbLedgerStorage numbers logs per ledger dir, so there the
    dir's index goes in the high bits."""
    return (dir_index << 48) | log_id if per_dir else log_id


def disk_identity(dirs, bookie_id: str) -> DiskIdentity:
    """The disk's bookie, its cookie's instance id and a hash of the cookie's bytes (first readable)."""
    from bkdisk.formats.cookie import parse_cookie
    for d in dirs.ledger_dirs + dirs.journal_dirs:
        p = os.path.join(d, CURRENT_DIR, "VERSION")
        try:
            with open(p, "rb") as f:
                raw = f.read()
            cookie = parse_cookie(raw, path=p)
        except (BkdiskError, OSError):   # an unreadable cookie: try the next dir's (fsck reports it)
            continue
        return DiskIdentity(bookie_id, cookie.instance_id, hashlib.blake2b(raw, digest_size=16).digest())
    return DiskIdentity(bookie_id, None, b"")


# A carried finding's keys, as ``_carried_finding`` writes them.
FINDING_KEYS = ("code", "severity", "pass_no", "path", "offset", "ledger_scope", "ledger_id", "entry_id", "message")


def _carried_finding(f) -> dict:
    """A deep check's finding as the state carries it (JSON) until the log is read again."""
    return dict(zip(FINDING_KEYS, (f.code, f.severity.value, f.pass_no, f.path, f.offset,
                                   to_signed(f.scope or 0) if f.ledger is not None else None,
                                   to_signed(f.ledger), f.entry, f.message), strict=True))


def _unparsed_findings(after: Mapping[int, LogState]) -> set[int]:
    """The logs whose carried findings in the state do not read as a run writes them."""
    bad = set()
    for k, s in after.items():
        if s.carried:
            try:
                found = json.loads(s.carried)
            except ValueError:
                found = None
            if not isinstance(found, list) or not all(isinstance(f, dict) and f.keys() == set(FINDING_KEYS)
                                                      for f in found):
                bad.add(k)
    return bad


@dataclass
class ScrubDisk:
    """One disk's scrub in its task: built by the driver, ``begin`` and ``finish`` run in the scan."""
    key: str                            # the disk's key in the state (its path as given)
    schedule: Schedule
    now: datetime.datetime
    deep_all: bool
    known: DiskState | None             # the last good state's rows of this disk
    rows_file: str                      # where the scan writes the disk's new state rows
    _logs: dict[int, tuple[str, int]] = field(default_factory=dict)    # key -> (path, size)
    _unreadable: dict[int, str] = field(default_factory=dict)          # key -> path
    _keys: dict[str, int] = field(default_factory=dict)                # path -> key
    _plan: Plan = field(default_factory=lambda: Plan({}, {}, True))
    _identity: DiskIdentity | None = None
    _carried: dict[int, list[dict]] = field(default_factory=dict)      # key -> its carried findings, parsed
    max_load: float | None = None       # --deep-max-load: above it the deep checks wait for a later run
    hashes_from: str | None = None      # the last good state's folder: the light logs' payload hashes
    hashes_to: str | None = None        # where this run's deep-read logs' payload hashes go
    _skipped: frozenset[int] = frozenset()                              # deep checks deferred for load
    _hashes: HashWriter | None = None
    _hashed: frozenset[int] = frozenset()   # the logs whose payload hashes in the state are still theirs
    _lost: frozenset[int] = frozenset()     # the logs whose hashes or findings in the state are damaged
    _new: str = "new"                       # why a log never deep-checked lags
    # The state's disks under other keys, by identity (only identities one key has): a disk given by
    # another path than the last run's (relative, absolute, another mount point, a disks file) is the
    # same disk, its schedule and carried findings kept.
    elsewhere: dict[DiskIdentity, tuple[str, DiskState]] | None = None
    state_key: str | None = None            # where the last good state has this disk (its key, or the one moved from)

    @property
    def was_key(self) -> str:
        """The disk's key in the last good state (its payload hashes are there under it)."""
        return self.state_key or self.key

    def begin(self, dirs, bookie_id: str) -> frozenset[str]:
        """Plan the disk's run; the entry logs (paths) to walk light."""
        from bkdisk.entrylogs.identity import log_identity
        from bkdisk.fsck.context import CheckContext
        self._identity = disk_identity(dirs, bookie_id)
        if self.known is None and self.elsewhere is not None and self._identity in self.elsewhere:
            self.state_key, self.known = self.elsewhere[self._identity]
        listed = CheckContext(dirs)   # the logs as fsck lists them (a dir it cannot list: fsck reports it)
        idents = {}
        for lf in listed.log_files:
            k = log_key(lf.dir_index, lf.log_id, listed.per_dir_log_ids)
            try:
                idents[k] = log_identity(lf.path)
                self._logs[k] = (lf.path, idents[k].size)
                self._keys[lf.path] = k
            except OSError:
                self._unreadable[k] = lf.path   # deep-read: the scan reports it as today
        known = self.known.logs if self.known is not None and self.known.identity == self._identity else None
        if self.known is not None and known is None:   # the state knew another disk by this name: fresh
            self._new = "new: the state's disk here had another cookie"
        hashed = frozenset(k for k, s in (known or {}).items()
                           if k in idents and s.identity == idents[k] and s.last_deep is not None)
        plan = self.schedule.plan(self.key, self.now, idents, known)
        if not self.deep_all:   # a light log whose last check's record is lost is read again now
            light = hashed - set(plan.deep)
            self._lost = frozenset(damaged_files(self.hashes_from, self.was_key, light)
                                   | (_unparsed_findings(known or {}) & light))
            if self._lost:
                plan = self.schedule.plan(self.key, self.now, idents, known, damaged=self._lost)
        self._hashed = hashed - self._lost
        if self.deep_all:   # every log read; each keeps its place in the rotation
            after = {k: s if k in plan.deep else replace(s, last_deep=self.now) for k, s in plan.after.items()}
            plan = replace(plan, deep={k: plan.deep.get(k, Reason.SHARE) for k in idents}, after=after)
        elif self.max_load is not None and plan.deep and load_per_cpu() > self.max_load:
            plan = self._deferred(plan, idents, known or {})
        self._plan = plan
        if self.hashes_to is not None:
            self._hashes = HashWriter(self.hashes_to, self.key)
        return frozenset(p for k, (p, _n) in self._logs.items() if k not in plan.deep)

    def _deferred(self, plan: Plan, idents: dict, known: dict[int, LogState]) -> Plan:
        """The plan with its deep checks left for a later run (the host is above --deep-max-load):
        each such log keeps its last state (one new or changed: not checked, due now)."""
        after = dict(plan.after)
        for k in plan.deep:
            prev = known.get(k)
            after[k] = prev if prev is not None and prev.identity == idents[k] else LogState(idents[k], None, self.now)
        self._skipped = frozenset(plan.deep)
        return replace(plan, deep={}, after=after)

    def light(self, k: int) -> bool:
        return k in self._logs and k not in self._plan.deep

    def header_offsets(self, path: str) -> np.ndarray | None:
        """A light log's record offsets from its last deep check (its file unchanged since), which its
        walk asks the kernel for ahead (fsck.context.CheckOptions.light_hints); None when not known."""
        k = self._keys.get(path)
        if k is None or not self.light(k) or k not in self._hashed:
            return None
        return record_offsets(self.hashes_from, self.was_key, k, self._logs[k][1])

    def carried(self, path: str) -> list[dict]:
        """The findings a log walked light carries from its last deep check."""
        k = self._keys.get(path)
        if k is None or not self.light(k) or k in self._lost:
            return []
        if k not in self._carried:   # (asked again for each of the log's replica batches)
            s = self._plan.after[k]
            self._carried[k] = [dict(f, found_at=s.found_at) for f in json.loads(s.carried)] if s.carried else []
        return self._carried[k]

    def carries_errors(self) -> bool:
        """Whether a log walked light carries an error its last deep check found (still there, as far
        as anyone knows: the disk is not ok because this run did not read it again)."""
        return any(f["severity"] == "error" for p, _n in self._logs.values() for f in self.carried(p))

    def carried_batches(self, run, bookie_id: str):
        """The findings rows (TASK_SCHEMA) of the logs walked light, with the time they were found."""
        found = [f for p, _n in self._logs.values() for f in self.carried(p)]
        if found:
            yield task_batch("findings", run, bookie_id, {k: [f[k] for f in found] for k in found[0]}, len(found))

    def replica_columns(self, rows):
        """A log part's replica columns: a deep-read one's from its scan (its short payload hashes
        kept for the new state), a light one's from the state (``light_replica_columns``)."""
        if rows.digests is None:
            return self.light_replica_columns(rows)
        k = self._keys.get(rows.path)
        if self._hashes is not None and k is not None and k in self._plan.deep:
            self._hashes.add(k, rows)
        return rows.arrow()

    def light_replica_columns(self, rows) -> dict[str, pa.Array]:
        """A light log's replica columns that its scan did not compute: no digest type; as payload
        hash the short one of its last deep check (audit/scrub_hashes.py), null when there is none;
        a copy is corrupt (digest_ok false) when the log's last deep check found it so, and not known
        (null) otherwise."""
        n = len(rows)
        e = rows.entries
        bad = {(f["ledger_id"], f["entry_id"]) for f in self.carried(rows.path) if f["code"] == "DIGEST_MISMATCH"}
        ok = pa.nulls(n, pa.bool_())
        if bad:
            ids = zip(signed(e["ledger"]).tolist(), e["entry"].tolist())
            ok = pa.array([False if k in bad else None for k in ids], pa.bool_())
        k = self._keys.get(rows.path)
        sha = light_column(self.hashes_from, self.was_key, k, rows) if k in self._hashed else pa.nulls(n, pa.string())
        return {"payload_sha256": sha, "digest_ok": ok,
                "digest_type": pa.nulls(n, pa.string()), "payload_len": pa.nulls(n, pa.int64()),
                "ledger_dir": pa.repeat(pa.scalar(rows.ledger_dir), n), "log_id": np.full(n, rows.log_id, np.int64)}

    def deep_found(self, findings) -> list:
        """Of a disk's findings, those ``finish`` keeps: what a deep read found in a log."""
        return [f for f in findings if f.code in DEEP_CODES and f.path]

    def finish(self, findings, log_scans) -> dict:
        """Each deep-read log's verdict and findings into the new state, written to ``rows_file``;
        returns the disk's scrub figures (scrub_columns.SCRUB_DISK_FIELDS)."""
        plan = self._plan
        if self._hashes is not None:
            self._hashes.close()
            for k in plan.deep:   # a file for each log read, its entries' hashes or none: none missing
                if k in self._logs:
                    self._hashes.empty(k)
        deep_found: dict[str, list[dict]] = {}
        for f in self.deep_found(findings):
            deep_found.setdefault(f.path, []).append(_carried_finding(f))
        after = dict(plan.after)
        for k, (p, _n) in self._logs.items():
            if k in plan.deep:
                found = deep_found.get(p, [])
                scan = log_scans.get(p)
                verdict = "unreadable" if isinstance(scan, Exception) else \
                    "corrupt" if any(f["code"] == "DIGEST_MISMATCH" for f in found) else "ok"
                after[k] = replace(after[k], verdict=verdict, found_at=self.now,
                                   carried=json.dumps(found) if found else None)
        assert self._identity is not None
        tmp = f"{self.rows_file}.tmp-{os.getpid()}"
        pq.write_table(pa.Table.from_batches(list(state_batches({self.key: DiskState(self._identity, after)})),
                                             schema=LOGS_SCHEMA), tmp)
        os.replace(tmp, self.rows_file)
        return self.figures(after)

    def figures(self, after: dict[int, LogState]) -> dict:
        plan = self._plan
        sizes = {k: n for k, (_p, n) in self._logs.items()}
        late = lagging(after, self.now, self.schedule.interval)
        why = {k: self._new if after[k].last_deep is None else "late" for k in late}
        why.update(dict.fromkeys(self._unreadable, "unreadable"))
        why.update(dict.fromkeys(self._skipped, SKIPPED_FOR_LOAD))
        checked = [s.last_deep for s in after.values() if s.last_deep is not None]
        named = [f"log {k} ({w})" for k, w in sorted(why.items())[:LAGGING_NAMED]]
        more = f" and {len(why) - LAGGING_NAMED} more" if len(why) > LAGGING_NAMED else ""
        return {"payload_bytes": sum(sizes.values()),
                "deep_bytes": sum(n for k, n in sizes.items() if k in plan.deep),
                "light_bytes": sum(n for k, n in sizes.items() if k not in plan.deep),
                "logs_total": len(self._logs) + len(self._unreadable),
                "logs_deep_checked": sum(1 for k in plan.deep if k in self._logs),
                "all_verified_within_interval": not why,
                "oldest_deep_check": None if not checked or len(checked) < len(after) else min(checked),
                "lagging_logs": ", ".join(named) + more if why else None}
