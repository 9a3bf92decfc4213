"""Pass 4, ledger dirs' ``lastId``: the hex id of the newest entry log, which a restart reads.

BookKeeper (DefaultEntryLogger at startup) reads ``current/lastId`` of every ledger dir as one hex
line; when it is missing or does not parse it falls back to the largest ``<hex>.log`` in that dir, and
it never allocates a log id whose file exists in any ledger dir. So a bad ``lastId`` is a warning
that says which id a restart would continue from, not an error.
"""
from __future__ import annotations

import os
from typing import Iterator

from diskio.mapped import DiskError, read_bytes
from formats.paths import CURRENT_DIR
from fsck.codes import Code
from fsck.context import CheckContext
from fsck.findings import Finding

LAST_ID = "lastId"
MAX_TEXT = 64   # a hex long and a newline; anything longer is not a lastId BookKeeper wrote


def _parse(raw: bytes) -> int | None:
    """The id as BookKeeper's readLastLogId takes it: the first line, hex; None when that fails."""
    line = raw.split(b"\n", 1)[0].strip(b"\r")
    try:
        value = int(line.decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        return None
    return value if value > 0 else None


def run(ctx: CheckContext) -> Iterator[Finding]:
    per_dir: dict[int, list[int]] = {}
    for lf in ctx.log_files:
        per_dir.setdefault(lf.dir_index, []).append(lf.log_id)
    newest_anywhere = max((i for ids in per_dir.values() for i in ids), default=None)
    for di, d in enumerate(ctx.dirs.ledger_dirs):
        newest = max(per_dir.get(di, []), default=None) if ctx.per_dir_log_ids else newest_anywhere
        if newest is None:
            continue   # no entry log: a fresh dir has no lastId yet
        path = os.path.join(d, CURRENT_DIR, LAST_ID)
        fallback = (f"a restart falls back to the largest entry-log id in this dir "
                    f"({max(per_dir[di]):x}.log) and skips every id whose file exists"
                    if per_dir.get(di) else "a restart starts log ids again from 1, skipping ids whose file exists")
        if not os.path.lexists(path):
            yield Finding(Code.LASTID_BAD, path=path, detail=f"missing; {fallback}")
            continue
        try:
            raw = read_bytes(path)[:MAX_TEXT]
        except DiskError as e:
            if path not in ctx.unreadable:
                yield Finding(Code.LASTID_BAD, path=path, detail=f"{e.what}; {fallback}")
            continue
        value = _parse(bytes(raw))
        if value is None:
            shown = bytes(raw[:16]).hex(" ") or "an empty file"
            yield Finding(Code.LASTID_BAD, path=path, offset=0, detail=f"found {shown}; {fallback}")
        elif value < newest:
            yield Finding(Code.LASTID_BAD, path=path, offset=0,
                          detail=f"found {value:x}, but {newest:x}.log exists; a restart takes the larger id from "
                                 f"the log files")
