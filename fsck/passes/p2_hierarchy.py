"""Pass 2: index hierarchy: every .idx at the path its ledger id dictates, named right, indexed once."""
from __future__ import annotations

import errno
import os
from collections import defaultdict
from typing import Iterator

from diskio.failures import LIST
from formats.ids import LedgerId
from formats.paths import CURRENT_DIR, index_relpath
from fsck.codes import (FILE_UNREADABLE, INDEX_BAD_NAME, INDEX_DUPLICATE, INDEX_MISPLACED,
                        INDEX_RELOCATION_LEFTOVER, INDEX_SCOPED_IN_2LEVEL,
                        STRAY_FILE)
from fsck.context import CheckContext
from fsck.findings import Finding


def run(ctx: CheckContext) -> Iterator[Finding]:
    inv = ctx.index_inventory
    seen: dict[LedgerId, list[int]] = defaultdict(list)
    rows = inv.files
    sep = os.sep
    for i, (rel, path, named, scope, ledger, di) in enumerate(zip(
            inv.relpaths, inv.paths, rows["named"].tolist(), rows["scope"].tolist(), rows["ledger"].tolist(),
            rows["dir"].tolist())):
        if not named:
            yield Finding(INDEX_BAD_NAME, path=path)
            continue
        lid = LedgerId(scope, ledger)
        seen[lid].append(i)
        want = index_relpath(lid)
        if rel != want:
            dest = os.path.join(inv.dirs[di], CURRENT_DIR, want)
            code = INDEX_SCOPED_IN_2LEVEL if scope != 0 and rel.count(sep) == 2 else INDEX_MISPLACED
            yield Finding(code, path=path, scope=scope, ledger=ledger, detail=dest, move_to=dest)
    for lid, at in seen.items():
        for i in at[1:]:
            yield Finding(INDEX_DUPLICATE, path=inv.paths[at[0]], scope=lid.scope, ledger=lid.ledger,
                          detail=inv.paths[i], other=inv.paths[i])
    # A folder that cannot be listed hides whatever index files it holds: an error, never a stray.
    # A missing <dir>/current is pass 1's LAYOUT_NO_CURRENT.
    roots = {os.path.join(d, CURRENT_DIR) for d in inv.dirs}
    for failure in inv.io_failures:
        if failure.op == LIST and not (failure.errno == errno.ENOENT and failure.path in roots):
            yield Finding(FILE_UNREADABLE, path=failure.path, detail=failure.describe(), errno=failure.errno)
    leftovers = {p: lid for lid, p in ctx.relocation_leftovers.items()}
    for path, why in inv.strays:
        lid = leftovers.get(path)
        if lid is not None:
            yield Finding(INDEX_RELOCATION_LEFTOVER, path=path, scope=lid.scope, ledger=lid.ledger,
                          detail=path[:-5], move_to=path[:-5])
        else:
            yield Finding(STRAY_FILE, path=path, detail=why)
