"""Pass 2, what an interrupted bookie-fsck repair leaves: a move cut between link and unlink, and
its own temp files.

A move links the index at its new path, then unlinks the old name; a kill between the two leaves
two names of one inode (the same bytes), which is an unfinished move, not two indexes to choose
from. A rewrite writes ``.<name>.bkdisk-tmp-<pid>`` beside its target; one whose process is gone
and whose owner is the user running this check was left by a killed repair.
"""
from __future__ import annotations

import os
from typing import Iterator

from diskio.atomic import TEMP_NAME
from indexfiles.listing import INDEX_SUFFIX, RELOCATION_SUFFIX
from formats.ids import LedgerId
from formats.paths import CURRENT_DIR, index_relpath
from fsck.codes import Code
from fsck.confinement import first_link
from fsck.context import CheckContext
from fsck.findings import Finding


def same_inode(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a, follow_symlinks=False), os.stat(b, follow_symlinks=False)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


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


def refine(ctx: CheckContext, found: list[Finding]) -> list[Finding]:
    """Pass 2's findings with unfinished moves and stale temp files told apart from real
    duplicates and strays."""
    out: list[Finding] = []
    drop: set[str] = set()
    for f in found:
        if f.code == Code.INDEX_DUPLICATE and f.other and same_inode(f.path, f.other) \
                and first_link(f.path, ctx.dirs) is None and first_link(f.other, ctx.dirs) is None:
            # Two real names (no symlinked folder on either path) of one inode: a move cut short.
            lid = LedgerId(f.scope or 0, f.ledger)
            pair = [p for p in (f.path, f.other) if _right_place(p, lid)]
            if len(pair) == 1:
                right = pair[0]
                wrong = f.other if right == f.path else f.path
                drop.add(wrong)
                out.append(Finding(Code.INDEX_MOVE_UNFINISHED, path=wrong, scope=f.scope, ledger=f.ledger, detail=right,
                                   other=right))
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
