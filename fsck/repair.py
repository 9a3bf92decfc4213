"""Repairs, kept apart from detection: a plan of actions built from findings, applied atomically.

Every action writes a temp file, fsyncs and renames it into place, keeping what it replaces in the
backup folder. Nothing here runs unless the user asked for --repair.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from diskio.atomic import atomic_move, atomic_rewrite, atomic_write, backup_file
from diskio.mapped import map_window
from entrylogs.arrays import EntryLogArrays
from entrylogs.scan import DIGEST_BAD, DIGEST_OK, DIGEST_UNKNOWN
from formats.ids import LedgerId
from formats.index import STATE_FENCED, IndexHeader, pack_location
from formats.paths import CURRENT_DIR, index_relpath
from fsck.api import Report
from fsck.context import CheckContext
from indexfiles.writer import index_bytes

REBUILD_CODES = {"INDEX_HEADER_BAD", "INDEX_TRUNCATED", "INDEX_NOT_FENCED", "INDEX_LOCATION_WRONG",
                 "INDEX_LOCATION_MISSING_LOG", "INDEX_LOCATION_OUT_OF_RANGE", "ENTRY_NOT_INDEXED",
                 "LEDGER_NOT_INDEXED"}
MOVE_CODES = {"INDEX_MISPLACED", "INDEX_SCOPED_IN_2LEVEL", "INDEX_RELOCATION_LEFTOVER"}
PAGE_SIZES = (65536, 32768, 16384, 8192, 4096, 2048, 1024, 512)


@dataclass
class Action:
    kind: str                 # "move-index" | "rebuild-index" | "cut-journal"
    path: str                 # the file written or moved
    describe: str
    ledger: LedgerId | None = None
    source: str | None = None
    cut_at: int | None = None
    codes: set[str] = field(default_factory=set)
    blocked: str | None = None   # why it cannot be done

    def line(self) -> str:
        return f"{self.kind}: {self.describe}" + (f" [cannot: {self.blocked}]" if self.blocked else "")


def plan_repairs(report: Report, ctx: CheckContext) -> list[Action]:
    actions: list[Action] = []
    moved: dict[str, str] = {}
    dup = {(f.scope or 0, f.ledger) for f in report.findings if f.code == "INDEX_DUPLICATE"}
    for f in report.findings:
        if f.code in MOVE_CODES:
            dest = f.extra["move_to"]
            a = Action("move-index", dest, f"move {f.path} to {dest}", LedgerId(f.scope or 0, f.ledger),
                       source=f.path, codes={f.code})
            if os.path.exists(dest) or (f.scope or 0, f.ledger) in dup:
                a.blocked = "another index for this ledger exists; choose one by hand"
            else:
                moved[f.path] = dest
            actions.append(a)
    rebuild: dict[LedgerId, set[str]] = {}
    for f in report.findings:
        if f.code in REBUILD_CODES and f.ledger is not None:
            rebuild.setdefault(LedgerId(f.scope or 0, f.ledger), set()).add(f.code)
    inv = ctx.index_inventory
    unscanned = [lf.path for lf in ctx.log_files if not isinstance(ctx.log_scans.get(lf.path), EntryLogArrays)]
    for lid, codes in sorted(rebuild.items()):
        paths = [inv.paths[i] for i in range(len(inv.paths))
                 if inv.files["named"][i] and LedgerId(int(inv.files["scope"][i]), int(inv.files["ledger"][i])) == lid]
        if paths:
            target = moved.get(paths[0], paths[0])
        else:
            target = os.path.join(ctx.dirs.effective_index_dirs[0], CURRENT_DIR, index_relpath(lid))
        a = Action("rebuild-index", target, f"rebuild the index of ledger {lid} at {target} from the entry logs",
                   lid, codes=codes)
        if unscanned:
            a.blocked = f"entry log {unscanned[0]} could not be read; a rebuild would drop the entries it holds"
        elif (lid.scope, lid.ledger) in dup:
            a.blocked = "the ledger is indexed in two places; choose one by hand"
        elif _header_for(ctx, lid) is None:
            a.blocked = "no master key for this ledger in the index or the journals"
        actions.append(a)
    for f in report.findings:
        if f.code == "JOURNAL_TORN_TAIL":
            actions.append(Action("cut-journal", f.path, f"cut {f.path} after its last valid record (offset "
                                  f"{f.extra['cut_at']}), zero-filling the rest", cut_at=f.extra["cut_at"],
                                  codes={f.code}))
    return actions


def _header_for(ctx: CheckContext, lid: LedgerId) -> IndexHeader | None:
    """The header a rebuilt index gets: the old one when readable, else what the journal knows."""
    inv = ctx.index_inventory
    facts = ctx.journal_facts
    old = None
    for i, h in enumerate(inv.headers):
        if h is not None and inv.files["named"][i] and \
                LedgerId(int(inv.files["scope"][i]), int(inv.files["ledger"][i])) == lid:
            old = h
            break
    key = old.master_key if old is not None else facts.master_keys.get(lid)
    if key is None:
        return None
    fenced = (old is not None and old.fenced) or facts.fenced.get(lid, False)
    version = old.version if old is not None else _common_version(inv)
    lac = old.explicit_lac_body if old is not None else facts.explicit_lac.get(lid)
    return IndexHeader(version, key, STATE_FENCED if fenced else 0, lac if version >= 1 else None)


def _common_version(inv) -> int:
    v = [h.version for h in inv.headers if h is not None]
    return max(set(v), key=v.count) if v else 1


def infer_page_size(inv) -> int:
    sizes = [int(s) - 1024 for s, ok in zip(inv.files["size"], inv.files["header_ok"]) if ok and int(s) > 1024]
    for p in PAGE_SIZES:
        if sizes and all(s % p == 0 for s in sizes):
            return p
    return 8192


def rebuilt_locations(ctx: CheckContext, lid: LedgerId) -> np.ndarray:
    """Entry id -> location of the best copy of each entry in the logs: a verified copy before an
    unverifiable one before a bad one, and among equals the latest (highest log id, then offset),
    as BookKeeper's rebuild from logs keeps the last copy it scans."""
    rank = {DIGEST_OK: 2, DIGEST_UNKNOWN: 1, DIGEST_BAD: 0}
    best: dict[int, tuple[int, int, int, int]] = {}   # entry -> (rank, log id, offset, location)
    for lf in ctx.log_files:
        scan = ctx.log_scans.get(lf.path)
        if not isinstance(scan, EntryLogArrays) or len(scan.entries) == 0:
            continue
        e = scan.entries
        dig = getattr(scan, "digests", None)
        for i in np.flatnonzero((e["scope"] == lid.scope) & (e["ledger"] == lid.ledger)).tolist():
            r = rank[int(dig["status"][i])] if dig is not None else 1
            off = int(e["offset"][i])
            cand = (r, lf.log_id, off, pack_location(lf.log_id, off + 4))
            eid = int(e["entry"][i])
            if eid not in best or cand[:3] >= best[eid][:3]:
                best[eid] = cand
    arr = np.zeros((max(best) + 1) if best else 0, dtype=np.uint64)
    for eid, c in best.items():
        arr[eid] = c[3]
    return arr


def apply(actions: list[Action], ctx: CheckContext, backup_dir: str, *, log=print) -> tuple[list[Action], list[Action]]:
    """Carry out the unblocked actions in order (moves, then rebuilds, then journal cuts).

    Each action is atomic on its own; one that fails is reported and the others still run.
    Returns (done, failed).
    """
    done, failed = [], []
    page_size = infer_page_size(ctx.index_inventory)
    order = {"move-index": 0, "rebuild-index": 1, "cut-journal": 2}
    for a in sorted(actions, key=lambda a: order[a.kind]):
        if a.blocked:
            continue
        try:
            if a.kind == "move-index":
                atomic_move(a.source, a.path, backup_dir=backup_dir)
            elif a.kind == "rebuild-index":
                header = _header_for(ctx, a.ledger)
                data = index_bytes(header, rebuilt_locations(ctx, a.ledger), page_size)
                atomic_write(a.path, data, backup_dir=backup_dir)
            elif a.kind == "cut-journal":
                _cut_journal(a.path, a.cut_at, backup_dir)
        except OSError as e:
            log(f"FAILED: {a.line()}: {e.strerror or e} ({e.filename or a.path})")
            failed.append(a)
            continue
        log(f"done: {a.line()}")
        done.append(a)
    return done, failed


def _cut_journal(path: str, at: int, backup_dir: str) -> None:
    """Keep the journal's bytes before ``at``; the same size, zeros after (a clean end there)."""
    step = 64 << 20

    def head():
        for off in range(0, at, step):
            with map_window(path, off, min(step, at - off)) as w:
                yield w.tobytes()

    atomic_rewrite(path, head(), size=os.path.getsize(path), backup_dir=backup_dir)


def default_backup_dir(ctx: CheckContext) -> str:
    base = ctx.dirs.ledger_dirs[0] if ctx.dirs.ledger_dirs else ctx.dirs.journal_dirs[0]
    return os.path.join(base, "fsck-backup", time.strftime("%Y%m%dT%H%M%S"))


def processes_holding(dirs: list[str]) -> list[tuple[int, str]]:
    """(pid, file) of other processes with a file open below ``dirs`` (Linux /proc), e.g. a running bookie."""
    roots = [os.path.realpath(d) + os.sep for d in dirs]
    me = os.getpid()
    out = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        if pid == me:
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if any(target.startswith(r) for r in roots):
                out.append((pid, target))
                break
    return out


__all__ = ["Action", "plan_repairs", "apply", "default_backup_dir", "processes_holding", "backup_file"]
