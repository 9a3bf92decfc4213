"""Pass 2: index hierarchy: every .idx at the path its ledger id dictates, named right, indexed once,
and what an interrupted bookie-fsck repair leaves; on a DbLedgerStorage bookie, its RocksDB index
databases (MANIFEST, SST blocks, WAL) in this pass's place.

A move links the index at its new path, then unlinks the old name; a kill between the two leaves
two names of one inode (the same bytes), which is an unfinished move, not two indexes to choose
from. A rewrite writes ``.<name>.bkdisk-tmp-<pid>`` beside its target; one whose process is gone
and whose owner is the user running this check was left by a killed repair.
"""
from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator

import numpy as np

from bkdisk.diskio.atomic import TEMP_NAME
from bkdisk.diskio.distinct import distinct, members
from bkdisk.diskio.failures import LIST
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import CURRENT_DIR, index_relpath, index_relpaths
from bkdisk.fsck import dbindex
from bkdisk.fsck.codes import Code
from bkdisk.fsck.confinement import first_link
from bkdisk.fsck.context import CheckContext
from bkdisk.fsck.entry_ranges import ranges
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.inodes import same_inode
from bkdisk.fsck.keyjoin import mix
from bkdisk.indexfiles.canonical_paths import PlacedPaths
from bkdisk.indexfiles.listing import INDEX_SUFFIX, RELOCATION_SUFFIX

BLOCK = 65536   # index files compared with their ledger's path at once
_READER_CODES = {"sst-checksum": Code.DBINDEX_BLOCK_CHECKSUM, "sst-missing": Code.DBINDEX_SST_MISSING,
                 "wal-torn-tail": Code.DBINDEX_WAL_TORN}


def run(ctx: CheckContext) -> Iterable[Finding]:
    if ctx.dirs.storage_kind == "rocksdb":
        return dbindex.findings(check_databases(ctx))
    return _leftovers(ctx, list(_index_tree(ctx)))


def _index_tree(ctx: CheckContext) -> Iterator[Finding]:
    """Every .idx at the path its ledger id dictates, named right, indexed once; strays and unlistable folders."""
    inv = ctx.index_inventory
    rows = inv.files
    sep = os.sep
    # Every path compared with its ledger's, a block of rows at a time (no Python object per file
    # kept); findings made only for the files that differ. A walk that kept only the paths that
    # differ (indexfiles.canonical_paths) names those rows: only they are looked at.
    placed = inv.relpaths if isinstance(inv.relpaths, PlacedPaths) else None
    stored = placed.stored if placed is not None else None
    for lo in range(0, len(rows), BLOCK) if stored is None else range(0, len(stored), BLOCK):
        at = np.arange(lo, min(lo + BLOCK, len(rows))) if stored is None else stored[lo:lo + BLOCK]
        block = rows[at]
        named, scopes, ledgers = block["named"].tolist(), block["scope"].tolist(), block["ledger"].tolist()
        wants = index_relpaths(scopes, ledgers)
        rels = (inv.relpaths if placed is None else placed.column)[lo:lo + len(block)]
        for k in [k for k, (ok, rel, want) in enumerate(zip(named, rels, wants)) if not ok or rel != want]:
            path = inv.paths[int(at[k])]
            if not named[k]:
                yield Finding(Code.INDEX_BAD_NAME, path=path)
                continue
            scope, ledger = scopes[k], ledgers[k]
            dest = os.path.join(inv.dirs[int(block["dir"][k])], CURRENT_DIR, wants[k])
            code = Code.INDEX_SCOPED_IN_2LEVEL if scope != 0 and rels[k].count(sep) == 2 else Code.INDEX_MISPLACED
            yield Finding(code, path=path, scope=scope, ledger=ledger, detail=dest, move_to=dest)
    dups = list(_duplicates(rows))
    held = _entries_of(inv.locations, [r for first, later in dups for r in (first, *later)]) if dups else {}
    for first, later in dups:
        scope, ledger = int(rows["scope"][first]), int(rows["ledger"][first])
        for i in later:
            # BookKeeper opens the first dir's index of a ledger: what only another holds, it denies.
            only = np.setdiff1d(held.get(i, _NONE), held.get(first, _NONE)).tolist()
            denied = f"; BookKeeper reads the first, so the bookie denies entries {ranges(only)} only this one " \
                     f"indexes" if only else ""
            yield Finding(Code.INDEX_DUPLICATE, path=inv.paths[first], scope=scope, ledger=ledger,
                          detail=inv.paths[i] + denied, other=inv.paths[i])
    # A folder that cannot be listed hides whatever index files it holds: an error, never a stray.
    # A missing <dir>/current is pass 1's LAYOUT_NO_CURRENT.
    roots = {os.path.join(d, CURRENT_DIR) for d in inv.dirs}
    for failure in inv.io_failures:
        if failure.op == LIST and not (failure.errno == errno.ENOENT and failure.path in roots):
            yield Finding(Code.FILE_UNREADABLE, path=failure.path, detail=failure.describe(), errno=failure.errno)
    leftovers = {p: lid for lid, p in ctx.relocation_leftovers.items()}
    for path, why in inv.strays:
        lid = leftovers.get(path)
        if lid is not None:
            yield Finding(Code.INDEX_RELOCATION_LEFTOVER, path=path, scope=lid.scope, ledger=lid.ledger,
                          detail=path[:-5], move_to=path[:-5])
        else:
            yield Finding(Code.STRAY_FILE, path=path, detail=why)


def _duplicates(rows: np.ndarray) -> list[tuple[int, list[int]]]:
    """Rows of named files whose ledger an earlier row already has: (first row, later rows), by first row."""
    named = rows["named"]
    h = mix([rows["scope"][named], rows["ledger"][named]])
    h.sort()   # (one ledger's rows mix alike: no two equal mixes, no duplicate; one array, sorted in place)
    if not bool(np.any(h[1:] == h[:-1])):
        return []
    del h
    at = np.flatnonzero(named)
    order = at[np.lexsort((at, rows["ledger"][at], rows["scope"][at]))]   # by ledger, then row
    s, l = rows["scope"][order], rows["ledger"][order]
    same = (s[1:] == s[:-1]) & (l[1:] == l[:-1])
    if not same.any():
        return []
    groups: dict[int, list[int]] = {}
    start = 0
    for k in np.flatnonzero(~same).tolist() + [len(order) - 1]:
        if k > start:
            groups[int(order[start])] = order[start + 1:k + 1].tolist()
        start = k + 1
    return sorted(groups.items())


def stale_temp(path: str) -> str | None:
    """Why ``path`` is a temp file a killed bookie-fsck left (its name, owner, gone process), else None."""
    m = TEMP_NAME.match(os.path.basename(path))
    if m is None:
        return None
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    pid = int(m["pid"])
    if st.st_uid != os.getuid() or pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
        return None          # that process still runs: perhaps a repair in progress
    except ProcessLookupError:
        pass
    except PermissionError:
        return None
    return f"owner uid {st.st_uid}, process {pid} no longer runs"


def _right_place(path: str, lid: LedgerId) -> bool:
    return path.endswith(os.sep + CURRENT_DIR + os.sep + index_relpath(lid))


def _leftovers(ctx: CheckContext, found: list[Finding]) -> list[Finding]:
    """The index tree's findings with unfinished moves and stale temp files told apart from real
    duplicates and strays."""
    out: list[Finding] = []
    drop: set[str] = set()
    for f in found:
        if f.code == Code.INDEX_DUPLICATE and f.path and f.other and same_inode(f.path, f.other) \
                and first_link(f.path, ctx.dirs) is None and first_link(f.other, ctx.dirs) is None:
            # Two real names (no symlinked folder on either path) of one inode: a move cut short.
            pair = [p for p in (f.path, f.other) if _right_place(p, f.lid)]
            if len(pair) == 1:
                right = pair[0]
                wrong = f.other if right == f.path else f.path
                drop.add(wrong)
                out.append(Finding(Code.INDEX_MOVE_UNFINISHED, path=wrong, scope=f.scope, ledger=f.ledger,
                                   detail=right, other=right))
                continue
        if f.code == Code.STRAY_FILE and f.path and f.path.endswith(RELOCATION_SUFFIX):
            target = f.path[:-len(RELOCATION_SUFFIX)] + INDEX_SUFFIX
            if same_inode(f.path, target) and first_link(f.path, ctx.dirs) is None:
                # A relocation renamed by link and unlink, cut between the two.
                out.append(Finding(Code.INDEX_MOVE_UNFINISHED, path=f.path, detail=target, other=target))
                continue
        if f.code == Code.STRAY_FILE and f.path:
            why = stale_temp(f.path)
            if why:
                out.append(Finding(Code.STALE_TEMP_FILE, path=f.path, detail=why))
                continue
        out.append(f)
    out = [f for f in out if not (f.code == Code.INDEX_MISPLACED and f.path in drop)]
    return out + list(_top_level_temps(ctx))


def _top_level_temps(ctx: CheckContext) -> Iterator[Finding]:
    """Temp files of journal cuts and other rewrites directly in a dir's ``current/``."""
    for d in dict.fromkeys(ctx.dirs.all_dirs):
        cur = os.path.join(d, CURRENT_DIR)
        try:
            names = sorted(os.listdir(cur))
        except OSError:
            continue   # pass 1 names a dir it cannot list
        for n in names:
            if TEMP_NAME.match(n):
                p = os.path.join(cur, n)
                why = stale_temp(p)
                if why:
                    yield Finding(Code.STALE_TEMP_FILE, path=p, detail=why)


def _key_text(k: bytes | None) -> str:
    return "start" if k is None else k.hex()


def check_databases(ctx: CheckContext) -> dbindex.Pairs:
    """DbLedgerStorage: each database readable, every SST the MANIFEST names present, every block's
    checksum, the WAL's tail."""
    out: dbindex.Pairs = []
    for _di, _current, idx in dbindex.read(ctx):
        if not dbindex.is_index(idx):
            out += idx
            continue
        for p in idx.problems:
            detail = p.detail
            if p.key_range is not None:
                detail += f"; keys {_key_text(p.key_range[0])} .. {_key_text(p.key_range[1])} unreadable"
            out.append((_READER_CODES.get(p.kind, Code.DBINDEX_UNREADABLE),
                        dict(path=p.path, offset=p.offset, detail=detail)))
    return out


_NONE = np.zeros(0, np.int64)
CHUNK = 1 << 20   # locations read at once


def _entries_of(locations, files: list[int]) -> dict[int, np.ndarray]:
    """The entry ids the index files of rows ``files`` locate (their locations read a chunk at a time:
    they may be spilled)."""
    want = np.array(sorted(set(files)), np.int64)
    parts: dict[int, list[np.ndarray]] = {}
    for k0 in range(0, len(locations), CHUNK):
        c = locations[k0:k0 + CHUNK]
        mine = members(c["file"], want)
        for f in distinct(c["file"][mine]).tolist():
            parts.setdefault(int(f), []).append(c["entry"][mine & (c["file"] == f)].astype(np.int64))
    return {f: distinct(np.concatenate(p)) for f, p in parts.items()}
