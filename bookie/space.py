"""Where a bookie's disk space goes: per entry log the bytes of live ledgers and of garbage, what the
garbage collector would do with it, and per ledger and per topic what pins old logs.

The rules are BookKeeper's (specs/space.md): an entry log's ledgers and their bytes come from its
ledgers map, or from a scan of its entries when it has none (DefaultEntryLogger.getEntryLogMetadata);
a ledger is live exactly when the bookie's collector would keep it (its own index has it, and,
with metadata, ScanAndCompareGarbageCollector would not delete it); bookie/gc_policy.py decides
the action. The per-entry work is the entry-log scanner's kernel; the rest is numpy over one row
per (log, ledger) and Python over one item per ledger. Used by ``bkdisk space`` and by the audit's
per-disk task.
"""
from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bkdisk.bookie.gc_policy import (
    ACTIONS,
    COMPACT_MAJOR,
    COMPACT_MINOR,
    CURRENT,
    DELETE,
    GcSettings,
    log_actions,
    usage,
)
from bkdisk.bookie.inventory import entry_logs, ledger_dir_name
from bkdisk.bookie.layout import BookieDirs, bookie_id_of
from bkdisk.bookie.ledger_states import LIVE, STATES, ledger_facts, ledger_state
from bkdisk.bookie.metadata_dir import each_metadata
from bkdisk.bookie.space_rows import per_ledger, per_topic
from bkdisk.diskio.distinct import PairSet, distinct_rows
from bkdisk.diskio.mapped import DiskError, file_size, read_range
from bkdisk.entrylogs.ledgers_map import map_columns
from bkdisk.entrylogs.map_check import claimed_beyond, map_differences, map_warning, names_negative_bytes
from bkdisk.formats.errors import BkdiskError, FormatError
from bkdisk.formats.ids import LedgerId

MAP, SCAN = "ledgers map", "scan"
NO_METADATA = ("no ledger metadata given: a ledger is live when the bookie's own index has it "
               "(ledgers deleted in metadata but not yet by this bookie count as live)")


class SpaceError(BkdiskError):
    """What the accounting needs could not be read (an entry log, the bookie's index)."""


@dataclass
class LogLedgers:
    """One entry log as EntryLogMetadata holds it: bytes (entry size + 4) per ledger."""

    ledger_dir: str
    group: int            # the entry logger it belongs to (one per bookie; one per dir for DbLedgerStorage)
    log_id: int
    path: str
    size: int
    scope: np.ndarray     # uint64, one per ledger
    ledger: np.ndarray    # uint64
    nbytes: np.ndarray    # int64
    source: str           # MAP or SCAN
    rolled: bool          # its header points at a ledgers map (the bookie rolled it)
    warnings: list[str] = field(default_factory=list)


def read_log_ledgers(path: str, ledger_dir: str, group: int, log_id: int, *, scan: bool = False,
                     scanned=None) -> LogLedgers:
    """The ledgers of one entry log: from its ledgers map when it has a whole one (BookKeeper's
    extractEntryLogMetadataFromIndex), else from its entries (extractEntryLogMetadataByScanning).
    ``scan``: count from the entries always, and warn where the map says otherwise. ``scanned``: an
    EntryLogScanArrays of this log already made (the audit reuses fsck's)."""
    from bkdisk.entrylogs.reader import read_frame
    size = file_size(path)
    warnings: list[str] = []
    frame = None
    if size:
        frame = read_frame(lambda o, n: read_range(path, o, n), size, path)
        warnings += [str(e) for e in (frame.header_error, frame.map_error) if e is not None]
    rolled = bool(frame and frame.header is not None and frame.header.ledgers_map_offset != 0)
    # the ledgers map when the whole of it was read
    whole_map = frame.ledgers_map if frame is not None and frame.map_error is None else None
    # A map that gives its ledgers more bytes than the log holds before it, or a ledger fewer than
    # none, is false: counted from the entries.
    beyond = claimed_beyond(whole_map, frame.data_end) if whole_map and frame is not None else 0
    negative = names_negative_bytes(whole_map) if whole_map else False
    if whole_map and not scan and not beyond and not negative:
        return LogLedgers(ledger_dir, group, log_id, path, size, *map_columns(whole_map), MAP, rolled, warnings)
    counted: dict[tuple[int, int], int] = {}
    if size:
        if scanned is None:
            from bkdisk.entrylogs.scan import scan_entry_log
            scanned = scan_entry_log(path)
        # the scan's warnings as the inventory words them (the header's and the map's once)
        from bkdisk.bookie.inventory import scan_warnings
        warnings += [w for w in scan_warnings(scanned) if w not in warnings]
        counted = scanned.computed_ledgers_map()   # sizes with their prefixes, as EntryLogMetadata adds them
        differ = map_differences(scanned) if whole_map and scanned.ledgers_map is not None else []
        if differ or beyond:   # (a negative size differs from any sum of entries)
            warnings.append(map_warning(path, beyond, differ))
    return LogLedgers(ledger_dir, group, log_id, path, size, *map_columns(counted), SCAN, rolled, warnings)


# --- the bookie's own index: which ledgers ledgerExists says exist ----------------------------
def indexed_ledgers(dirs: BookieDirs) -> tuple[list[PairSet], list[str]]:
    """Per entry-logger group, the (scope, ledger) pairs the bookie's index holds, and warnings.

    Interleaved/Sorted storage: every ``.idx`` (and ``.idx.rloc``, which the bookie renames into
    place) in the index dirs, one group; DbLedgerStorage: each ledger dir's ``ledgers`` database
    (entries whose ``exists`` is set), a group per dir."""
    if dirs.storage_kind == "rocksdb":
        return _db_ledgers(dirs)
    from bkdisk.indexfiles.listing import list_index_tree
    listing = list_index_tree(dirs.effective_index_dirs)
    for _di, link in listing.symlinks:
        try:
            os.stat(link)
        except OSError as e:   # (a loop, or a link to nothing: index files may be where it should lead)
            raise SpaceError(f"{link}: a symbolic link in the index that leads nowhere ({e.strerror}): which "
                             f"ledgers the bookie keeps is unknown") from None
    return [_index_ledgers(listing.files, listing.strays, listing.failures)], []


def listed_ledgers(inv) -> list[PairSet]:
    """``indexed_ledgers`` of an index-files bookie from a walk of its index made already (a check's
    ``IndexInventory``): the hierarchy is not listed a second time."""
    from bkdisk.diskio.failures import LIST
    return [_index_ledgers(inv.files, inv.strays, [f for f in inv.io_failures if f.op == LIST])]


def _index_ledgers(files: np.ndarray, strays: list[tuple[str, str]], failures: list) -> PairSet:
    from bkdisk.formats.paths import parse_index_name
    from bkdisk.indexfiles.listing import RELOCATION_SUFFIX, STRAY_RELOCATION
    if failures:
        f = failures[0]
        raise SpaceError(f"{f.path}: cannot list the index folder ({f.message}): which ledgers the bookie "
                         f"keeps is unknown")
    named = files["named"]
    moved = [lid for p, why in strays if why == STRAY_RELOCATION
             for lid in [parse_index_name(os.path.basename(p)[:-len(RELOCATION_SUFFIX)] + ".idx")] if lid is not None]
    return PairSet(np.concatenate([files["scope"][named], np.array([x.scope for x in moved], np.uint64)]),
                   np.concatenate([files["ledger"][named], np.array([x.ledger for x in moved], np.uint64)]))


def _db_ledgers(dirs: BookieDirs) -> tuple[list[PairSet], list[str]]:
    from contextlib import ExitStack

    from bkdisk.formats.ids import to_unsigned64
    from bkdisk.formats.paths import LEDGERS_DB
    from bkdisk.rocksdbfiles.dbindex import read_ledgers
    groups, warnings = [], []
    for d in dirs.ledger_dirs:
        db = os.path.join(dirs.current(d), LEDGERS_DB)
        try:
            with ExitStack() as stack:
                ledgers, problems = read_ledgers(db, stack)
        except (FormatError, DiskError, OSError) as e:
            raise SpaceError(f"{db}: the ledgers index cannot be read ({e}): which ledgers the bookie keeps "
                             f"is unknown") from None
        # Read in part (a table missing, unreadable or failing its checksums, a torn MANIFEST), the index
        # may hide ledgers the bookie keeps: their logs would look collectable. A torn WAL tail is what the
        # bookie's own replay of it stops at too.
        hidden = next((p for p in problems if p.kind != "wal-torn-tail"), None)
        if hidden is not None:
            raise SpaceError(f"{db}: the ledgers index can be read only in part ({hidden.kind} in {hidden.path}: "
                             f"{hidden.detail}): which ledgers the bookie keeps is unknown")
        warnings += [f"{p.path}: {p.detail}" for p in problems]
        kept = [to_unsigned64(lid) for lid, info in ledgers.items() if info.exists]
        groups.append(PairSet(np.zeros(len(kept), np.uint64), np.array(kept, np.uint64)))
    return groups, warnings


# --- metadata: what the collector's scan-and-compare keeps, and Pulsar's topic -------------------
# --- the accounting ---------------------------------------------------------------------------
@dataclass
class SpaceReport:
    """The rows ``bkdisk space --json`` prints, in order: logs, ledgers, topics, then the summary."""

    logs: list[dict[str, Any]]
    ledgers: Sequence[dict[str, Any]]   # (space_rows.LedgerRows: each row made as it is read)
    topics: list[dict[str, Any]]
    summary: dict[str, Any]
    warnings: list[str]

    def rows(self) -> Iterator[dict[str, Any]]:
        return itertools.chain(self.logs, self.ledgers, self.topics, [self.summary])


def joined_rows(logs: list[LogLedgers]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The logs' (scope, ledger, bytes) rows end to end, each log's own arrays emptied as they are joined."""
    if not logs:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64)
    cols = []
    for name, dt in (("scope", np.uint64), ("ledger", np.uint64), ("nbytes", np.int64)):
        cols.append(np.concatenate([getattr(lg, name) for lg in logs]).astype(dt, copy=False))
        for lg in logs:   # (a new empty array: a slice of the old one would keep its buffer)
            setattr(lg, name, np.zeros(0, dt))
    return cols[0], cols[1], cols[2]


def current_logs(logs: list[LogLedgers]) -> np.ndarray:
    """Whether each log may still be written (never a collection candidate): per entry logger, its
    highest-id log, and when that one holds nothing yet (a preallocated log), the highest-id log
    before it that was never rolled (no ledgers map): the one being written."""
    cur = np.zeros(len(logs), bool)
    groups: dict[int, list[int]] = {}
    for i, lg in enumerate(logs):
        groups.setdefault(lg.group, []).append(i)
    for members in groups.values():
        members.sort(key=lambda i: logs[i].log_id)
        top = members[-1]
        cur[top] = True
        if len(logs[top].ledger) == 0 and not logs[top].rolled and len(members) > 1 and \
                not logs[members[-2]].rolled:
            cur[members[-2]] = True
    return cur


def read_bookie_logs(dirs: BookieDirs, *, scan: bool = False, scans: dict | None = None) -> list[LogLedgers]:
    """Every entry log of the bookie, in ledger-dir then log-id order."""
    rocks = dirs.storage_kind == "rocksdb"
    out = []
    for di, d in enumerate(dirs.ledger_dirs):
        found, failure = entry_logs(d)
        if failure:
            raise SpaceError(failure)
        for log_id, path in found:
            try:
                out.append(read_log_ledgers(path, ledger_dir_name(d), di if rocks else 0, log_id, scan=scan,
                                            scanned=(scans or {}).get(path)))
            except (DiskError, FormatError) as e:
                raise SpaceError(f"{e} (its live and garbage bytes cannot be counted)") from None
    return out


def account_bookie(dirs: BookieDirs, metadata: Mapping | None, settings: GcSettings, *,
                   metadata_from: str | None = None, scan: bool = False, scans: dict | None = None, top: int = 10,
                   bookie_id: str | None = None, indexed: list[PairSet] | None = None) -> SpaceReport:
    """The space report of one bookie. ``metadata`` None: liveness from the bookie's own index only.
    ``bookie_id``: the bookie's id when known otherwise than from its cookie (the audit's disk list).
    ``indexed``: ``indexed_ledgers``' groups when the caller has them (``listed_ledgers``)."""
    bookie_id = bookie_id or bookie_id_of(dirs)
    logs = read_bookie_logs(dirs, scan=scan, scans=scans)
    groups, warnings = (indexed, []) if indexed is not None else indexed_ledgers(dirs)
    for lg in logs:
        warnings += lg.warnings
    with_md = metadata is not None
    md = metadata if metadata is not None else {}   # a view with none of its own still looks ledgers up

    # One row per (log, ledger), the logs' own arrays let go once joined (a million ledgers' rows twice over).
    counts = np.array([len(lg.ledger) for lg in logs], np.int64)
    current = current_logs(logs)
    log_of = np.repeat(np.arange(len(logs)), counts)
    scope, ledger, nbytes = joined_rows(logs)
    one_group = len({lg.group for lg in logs}) <= 1
    if one_group:   # (group, ledger) is the ledger: its distinct rows serve the per-ledger rows too
        (uscope, uledger), inv = distinct_rows(scope, ledger)
    else:
        group = np.array([lg.group for lg in logs], np.int64)[log_of]
        (ugroup, uscope, uledger), inv = distinct_rows(group, scope, ledger)
        del group

    # One state per (group, ledger). Of each ledger's metadata only what the rows show is kept (its state,
    # creation time, topic), not the metadata itself.
    held = np.zeros(len(uledger), bool)   # per (group, ledger): whether the group's index holds it
    if one_group:
        if logs and logs[0].group < len(groups):
            held = groups[logs[0].group].contains(uscope, uledger)
    else:
        for number, indexed_here in enumerate(groups):
            here = ugroup == number
            held[here] = indexed_here.contains(uscope[here], uledger[here])
    states, md_states, topics, ctime = ledger_facts(md, uscope, uledger, held, bookie_id, settings, with_md)
    ustate = np.array([STATES.index(x) for x in states.values], np.int8)[states.codes] if len(states) \
        else np.zeros(0, np.int8)
    live = ustate[inv] == 0 if len(inv) else np.zeros(0, bool)
    # Oldest: the earliest creation time metadata gives, then the lowest id.
    by_rank = np.lexsort((uledger, uscope, ctime))
    rank = np.empty(len(uledger), np.int64)
    rank[by_rank] = np.arange(len(uledger))

    n = len(logs)
    live_bytes = np.bincount(log_of, weights=np.where(live, nbytes, 0), minlength=n).astype(np.int64)
    total = np.bincount(log_of, weights=nbytes, minlength=n).astype(np.int64)
    live_ledgers = np.bincount(log_of, weights=live, minlength=n).astype(np.int64)
    oldest = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(oldest, log_of[live], rank[inv[live]])
    del rank, ctime
    actions = log_actions(live_bytes, total, live_ledgers, current, settings)
    u = usage(live_bytes, total)

    log_rows = []
    for i, lg in enumerate(logs):
        ok = oldest[i] != np.iinfo(np.int64).max
        k = int(by_rank[oldest[i]]) if ok else None
        log_rows.append({
            "kind": "log", "bookie_id": bookie_id, "ledger_dir": lg.ledger_dir, "log_id": lg.log_id, "size": lg.size,
            "live_bytes": int(live_bytes[i]), "garbage_bytes": int(total[i] - live_bytes[i]), "usage": float(u[i]),
            "action": ACTIONS[actions[i]], "ledgers": int(counts[i]), "live_ledgers": int(live_ledgers[i]),
            "oldest_live_ledger": None if k is None else str(LedgerId(int(uscope[k]), int(uledger[k]))),
            "oldest_live_topic": None if k is None else topics[k], "source": lg.source})

    del by_rank

    # Per ledger (across groups) and per topic; what the log rows needed let go first (a million ledgers' columns).
    old = ~current   # logs a collection pass considers
    sole = old & (live_ledgers == 1)   # deleting its one live ledger frees the whole log
    sizes = np.array([lg.size for lg in logs], np.int64)
    if one_group:
        ledgers = (uscope, uledger, inv)
    else:
        (lscope, lledger), per = distinct_rows(scope, ledger)
        ledgers = (lscope, lledger, per)
    del scope, ledger
    ledger_rows = per_ledger(logs, ledgers, nbytes, log_of, inv, live, states, LIVE, md_states, topics, old, sole,
                             sizes, bookie_id)

    topic_rows = per_topic(ledger_rows, live, log_of, inv, topics, old, sizes, bookie_id)
    rocks = None
    if dirs.storage_kind == "rocksdb":   # per dir: the ledgers its index holds that the collector keeps
        from bkdisk.bookie.db_space import rocksdb_space
        kept = []
        for g in groups:
            kept.append({led for led, m in zip(g.ledger.tolist(), each_metadata(md, g.scope, g.ledger))
                         if ledger_state(True, m, bookie_id, settings, with_md) == LIVE})
        rocks = rocksdb_space(dirs, kept, warnings)
    summary = _summary(dirs, bookie_id, log_rows, ledger_rows, settings, metadata_from, with_md, warnings, top,
                       rocks)
    return SpaceReport(log_rows, ledger_rows, topic_rows, summary, warnings)


def _summary(dirs, bookie_id, log_rows, ledger_rows, settings: GcSettings, metadata_from, with_md, warnings, top,
             rocks) -> dict[str, Any]:
    by_action = {a: {"logs": 0, "size": 0, "live_bytes": 0, "garbage_bytes": 0} for a in ACTIONS}
    for r in log_rows:
        b = by_action[r["action"]]
        b["logs"] += 1
        for k in ("size", "live_bytes", "garbage_bytes"):
            b[k] += r[k]
    minor = [r for r in log_rows if r["action"] == COMPACT_MINOR]
    major = [r for r in log_rows if r["action"] in (COMPACT_MINOR, COMPACT_MAJOR)] if settings.major_enabled else []
    by_state = {s: {"ledgers": 0, "bytes": 0} for s in STATES}
    for state, nb in zip(ledger_rows.state, ledger_rows.sums["bytes"].tolist()):
        by_state[state]["ledgers"] += 1
        by_state[state]["bytes"] += nb
    shown = ledger_rows.order
    pinning = [{"ledger": lr["ledger"], "topic": lr["topic"], "sole_logs": lr["sole_logs"],
                "frees_bytes": lr["frees_bytes"]}
               for lr in map(ledger_rows.row, shown[ledger_rows.sums["sole_logs"][shown] > 0][:top].tolist())]
    return {
        "kind": "summary", "bookie_id": bookie_id, "storage": dirs.storage_kind,
        "metadata": metadata_from if with_md else None, "liveness": "ledger metadata and the bookie's index"
        if with_md else NO_METADATA, "settings": settings.to_json(),
        "logs": len(log_rows), "size": sum(r["size"] for r in log_rows),
        "live_bytes": sum(r["live_bytes"] for r in log_rows),
        "garbage_bytes": sum(r["garbage_bytes"] for r in log_rows),
        "by_action": by_action, "by_state": by_state,
        "gc_frees_bytes": by_action[DELETE]["size"],
        "minor_compaction_frees_bytes": sum(r["garbage_bytes"] for r in minor),
        "major_compaction_frees_bytes": sum(r["garbage_bytes"] for r in major),
        "current_logs": by_action[CURRENT]["logs"], "top_pinning_ledgers": pinning, "rocksdb": rocks,
        "warnings": len(warnings)}
