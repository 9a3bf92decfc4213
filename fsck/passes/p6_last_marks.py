"""Pass 6, lastMark in every ledger dir: a file missing from one dir while another dir has it.

BookKeeper writes ``lastMark`` (``lastMark.<i>`` with several journal dirs) into every ledger dir at
each checkpoint and, at startup (Journal.LastLogMark.readLog), reads it from every ledger dir,
skips one it cannot read and keeps the largest mark. A mark missing from one dir therefore changes
nothing while another dir has it; the report says which mark a restart would use.
"""
from __future__ import annotations

import os
from typing import Iterator

from formats.lastmark import LastMark
from formats.paths import CURRENT_DIR, journal_name
from fsck.codes import Code
from fsck.context import CheckContext
from fsck.findings import Finding


def run(ctx: CheckContext) -> Iterator[Finding]:
    if len(ctx.dirs.ledger_dirs) < 2:
        return
    names: dict[str, dict[str, LastMark | Exception]] = {}
    for p, m in ctx.last_marks.items():
        names.setdefault(os.path.basename(p), {})[os.path.dirname(os.path.dirname(p))] = m
    for name, by_dir in sorted(names.items()):
        good = {d: m for d, m in by_dir.items() if isinstance(m, LastMark)}
        if good:
            d_best = max(good, key=lambda d: good[d])
            best = good[d_best]
            restart = (f"a restart reads every ledger dir's {name} and keeps the largest, journal "
                       f"{journal_name(best.log_id)} offset {best.offset} from {d_best}, and replays from there")
        else:
            restart = f"no ledger dir has a readable {name}: a restart replays every journal"
        for d in ctx.dirs.ledger_dirs:
            if d not in by_dir:
                yield Finding(Code.LASTMARK_MISSING_IN_DIR, path=os.path.join(d, CURRENT_DIR),
                              detail=f"{name} is missing; {restart}")
