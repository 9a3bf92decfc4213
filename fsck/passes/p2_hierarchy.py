"""Pass 2: index hierarchy: every .idx at the path its ledger id dictates, named right, indexed once."""
from __future__ import annotations

import errno
import os
from typing import Iterator

import numpy as np

from diskio.failures import LIST
from formats.paths import CURRENT_DIR, index_relpaths
from fsck.codes import Code
from fsck.context import CheckContext
from fsck.findings import Finding


def run(ctx: CheckContext) -> Iterator[Finding]:
    inv = ctx.index_inventory
    rows = inv.files
    sep = os.sep
    named, scopes, ledgers = rows["named"].tolist(), rows["scope"].tolist(), rows["ledger"].tolist()
    # Every path compared with its ledger's at once; findings made only for the files that differ.
    wants = index_relpaths(scopes, ledgers)
    for i in [i for i, (ok, rel, want) in enumerate(zip(named, inv.relpaths, wants)) if not ok or rel != want]:
        path = inv.paths[i]
        if not named[i]:
            yield Finding(Code.INDEX_BAD_NAME, path=path)
            continue
        scope, ledger = scopes[i], ledgers[i]
        dest = os.path.join(inv.dirs[int(rows["dir"][i])], CURRENT_DIR, wants[i])
        code = Code.INDEX_SCOPED_IN_2LEVEL if scope != 0 and inv.relpaths[i].count(sep) == 2 else Code.INDEX_MISPLACED
        yield Finding(code, path=path, scope=scope, ledger=ledger, detail=dest, move_to=dest)
    for first, later in _duplicates(rows):
        for i in later:
            yield Finding(Code.INDEX_DUPLICATE, path=inv.paths[first], scope=scopes[first], ledger=ledgers[first],
                          detail=inv.paths[i], other=inv.paths[i])
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
    at = np.flatnonzero(rows["named"])
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
