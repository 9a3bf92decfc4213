"""Entry logs scanned side by side, each with a fork of one DigestPlan, giving the rows of scanning
them one after another with the plan itself.

A log's scan reads and writes the plan's state only for the ledgers of its own entries (a ledger's
decided type, its failed samples, its inferred digest length), and a decided ledger's state never
changes again. So a log scanned with a fork taken before the logs ahead of it were committed gives
the rows of the scan in turn, except for the ledgers those logs changed since the fork: ``commit``
finds them among the log's entries. Where each such ledger is decided with a type by now, its rows
are checked again with that type (what the scan in turn does with them); anything else (a ledger
still being sniffed, or decided as no type) has the log scanned again with the plan as it is.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np

from bkdisk.digests.decision_table import DecisionTable, find_ledgers
from bkdisk.digests.plan import SOURCE_GIVEN, DigestPlan
from bkdisk.digests.verify import verify_entry_digests
from bkdisk.diskio.distinct import distinct, members
from bkdisk.diskio.kernels import readonly
from bkdisk.diskio.mapped import map_file
from bkdisk.entrylogs.arrays import distinct_ledgers
from bkdisk.entrylogs.scan_parts import ChunkedLogScan, entry_bounds, entry_parts, scan_part
from bkdisk.formats.digests import DigestType


@dataclass
class PlanFork:
    """A private copy of a plan's learned state, and what the plan had committed when it was taken."""

    plan: DigestPlan
    decided_ids: np.ndarray          # the scope-0 ledgers decided when forked
    tried: dict
    dlen_hint: dict
    commits: int                     # SharedPlan.changes committed before the fork


class SharedPlan:
    """One bookie's DigestPlan, with the ledgers each committed scan changed in it, in commit order."""

    def __init__(self, plan: DigestPlan):
        self.plan = plan
        self.changes: dict[int, np.ndarray] = {}   # commit number -> the ledgers it changed
        self.commits = 0
        self.rescans = 0                            # logs scanned again at their commit

    def fork(self) -> PlanFork:
        p = self.plan
        with p.lock:
            table = p.decided.copy()
            copy = DigestPlan(known=p.known, passwords=p.passwords, sniff=p.sniff, max_samples=p.max_samples,
                              force=p.force, crc_variant=p.crc_variant, decided=table, tried=dict(p.tried),
                              dlen_hint=dict(p.dlen_hint), _mac_keys=p._mac_keys, _tables=p._tables)
            return PlanFork(copy, table.ids, dict(p.tried), dict(p.dlen_hint), self.commits)

    def changed_since(self, fork: PlanFork) -> np.ndarray:
        """The ledgers whose state scans committed after ``fork`` was taken changed (sorted ids)."""
        later = [ids for n, ids in self.changes.items() if n >= fork.commits]
        return distinct(np.concatenate(later)) if later else np.zeros(0, np.uint64)

    def forget_before(self, commits: int) -> None:
        """Drop the changes of commits before ``commits``: no fork still to commit was taken before them."""
        for n in [n for n in self.changes if n < commits]:
            del self.changes[n]

    def commit(self, fork: PlanFork, scan, rescan: Callable[[PlanFork], object]):
        """Take in what the scan made with ``fork`` learned; return the scan as the plan itself gives it.

        ``scan``: the scan's EntryLogScanArrays, or the exception it raised. ``rescan(fork)`` scans
        the log again with a new fork (taken here, so nothing committed is missing from it)."""
        moved = self.changed_since(fork)
        if len(moved):
            if isinstance(scan, BaseException):
                fork, scan = self._again(rescan)
            else:
                mine = _ledgers_of(scan)
                hit = moved[members(moved, mine)]
                if len(hit) and not _decided_with_a_type(self.plan, hit):
                    fork, scan = self._again(rescan)
                elif len(hit):
                    again = hit[~_decided_alike(fork, self.plan, hit)]
                    if len(again):
                        _check_again(scan, self.plan, again)
                    self._take(fork, skip=hit)
                    return scan
        self._take(fork)
        return scan

    def _again(self, rescan: Callable[[PlanFork], object]) -> tuple[PlanFork, object]:
        self.rescans += 1
        fork = self.fork()
        return fork, _result(rescan, fork)

    def _take(self, fork: PlanFork, skip: np.ndarray | None = None) -> None:
        """Copy the fork's changes into the plan (those of ``skip``'s ledgers are left out)."""
        q, p = fork.plan, self.plan
        with q.lock:
            ids, rows = q.decided.table()
            new = ~members(ids, fork.decided_ids)
            tried = {k: v for k, v in q.tried.items() if fork.tried.get(k) != v}
            hints = {k: v for k, v in q.dlen_hint.items() if k not in fork.dlen_hint}
        if skip is not None and len(skip):
            new &= ~members(ids, skip)
            held = set(skip.tolist())
            tried = {k: v for k, v in tried.items() if k[1] not in held}
            hints = {k: v for k, v in hints.items() if k[1] not in held}
        with p.lock:
            _insert_decided(p.decided, ids[new], rows[new])
            p.tried.update(tried)
            for k, v in hints.items():
                p.dlen_hint.setdefault(k, v)
        keys = [k[1] for k in tried] + [k[1] for k in hints]
        self.changes[self.commits] = distinct(np.concatenate([ids[new], np.array(keys, np.uint64)]))
        self.commits += 1


def _result(rescan: Callable[[PlanFork], object], fork: PlanFork):
    try:
        return rescan(fork)
    except Exception as e:   # the caller's scan errors: told in their place, as the first scan's would be
        return e


def _decided_with_a_type(plan: DigestPlan, ledgers: np.ndarray) -> bool:
    with plan.lock:
        rows, found = _rows_of(plan.decided.table(), ledgers)
    return bool(found.all() and (rows[:, 0] != 0).all())


def _decided_alike(fork: PlanFork, plan: DigestPlan, ledgers: np.ndarray) -> np.ndarray:
    """Of ``ledgers`` (each decided with a type in ``plan``), those whose rows the scan with ``fork`` made
    are the ones the scan in turn makes, with no check again: the fork decided it alike (the same type
    and source), as a CRC (every sample's status is then its check with that type, as the scan in turn
    checks every entry) or from metadata, with no failed sample before (a ledger ``tried``)."""
    with plan.lock:
        wanted, found = _rows_of(plan.decided.table(), ledgers)
    with fork.plan.lock:
        had, ffound = _rows_of(fork.plan.decided.table(), ledgers)
        tried = {k[1] for k in fork.plan.tried}
    code = wanted[:, 0]
    crc = (code == int(DigestType.CRC32C)) | (code == int(DigestType.CRC32)) | (wanted[:, 1] == SOURCE_GIVEN)
    alike = found & ffound & (had == wanted).all(axis=1) & crc
    if tried:
        alike &= ~members(ledgers, np.array(sorted(tried), np.uint64))
    return alike


def _rows_of(table: tuple[np.ndarray, np.ndarray], ledgers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each ledger's (code, source) row in a decided ``table`` (zeros where it has none), and whether it has one."""
    at, found = find_ledgers(table, ledgers)
    rows = table[1][at] if len(table[0]) else np.zeros((len(ledgers), 2), np.uint8)
    return rows, found


def _ledgers_of(scan) -> np.ndarray:
    """The distinct ledger ids of the scan's entries (sorted), a part of them at a time."""
    got = [distinct_ledgers(e["ledger"]) for _lo, e in entry_parts(scan)]
    return (distinct(np.concatenate(got)) if len(got) > 1 else got[0]).astype(np.uint64)


def _check_again(scan, plan: DigestPlan, ledgers: np.ndarray) -> None:
    """Check the digests of the scan's entries of ``ledgers`` (each decided with a type in ``plan``)
    as the scan in turn checked them: with that type, from the file's bytes; a part of them at a time."""
    with ExitStack() as stack:
        data = readonly(stack.enter_context(map_file(scan.path)))
        for lo, hi in entry_bounds(scan):
            part = scan_part(scan, lo, hi)
            e = part.entries
            idx = np.flatnonzero(members(e["ledger"], ledgers))
            if len(idx) == 0:
                continue
            hashing = part.payload_hashes is not None
            rows, hashes = verify_entry_digests(data, e[idx], plan, payload_hash="sha256" if hashing else None)
            part.digests[idx] = rows
            if hashing:
                part.payload_hashes.put(idx, hashes)
            if isinstance(scan, ChunkedLogScan):
                scan.put_digests(lo, part)


def _insert_decided(table: DecisionTable, ids: np.ndarray, rows: np.ndarray) -> None:
    """Add scope-0 decisions for ledgers not in ``table`` (sorted ``ids``), as arrays."""
    if len(ids) == 0:
        return
    have, have_rows = table.table()
    at = np.searchsorted(have, ids)
    table.ids, table.rows = np.insert(have, at, ids), np.insert(have_rows, at, rows, axis=0)
