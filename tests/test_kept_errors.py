"""The errors a check keeps as data (a damaged file's: its scan's result, an index file's header, a
lastMark, a folder it could not list) hold no traceback, along the chain they were raised from: a kept
traceback keeps every frame it passed through, and what those hold (a scan's arrays, the index walk's
reader and its buffer, a file's map), as long as the check runs."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import GOLDEN

from bkdisk.bookie.layout import discover
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions

CORPUS = GOLDEN / "interleaved-v6-hostport"


def _damaged(tmp_path: Path) -> Path:
    root = tmp_path / "bookie"
    shutil.copytree(CORPUS, root, symlinks=True)
    cur = root / "ledgers0" / "current"
    for victim in (cur / "2.log", root / "journal" / "current" / "1a200497c66.txn",
                   next((root / "ledgers1" / "current").glob("*/*/*.idx"))):
        with open(victim, "r+b") as f:
            f.write(b"XXXX")   # a header that is not the format's
    with open(cur / "3.log", "r+b") as f:
        f.seek(8)
        f.write((os.path.getsize(cur / "3.log") + 99).to_bytes(8, "big"))   # a ledgers map past the end
    (cur / "lastMark").write_bytes(b"\1\2\3")                               # too short
    return root


def _chain(e: BaseException) -> list[BaseException]:
    out, todo = [], [e]
    while todo:
        x = todo.pop()
        if x is not None and all(x is not y for y in out):
            out.append(x)
            todo += [x.__cause__, x.__context__]
    return out


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_errors_a_check_keeps_hold_no_frames(tmp_path, jobs):
    report = check_bookie(discover(str(_damaged(tmp_path))), CheckOptions(jobs=jobs))
    try:
        ctx = report.checked()
        kept = [r for r in ctx.log_scans.values() if isinstance(r, Exception)]
        kept += [e for r in ctx.log_scans.values() if not isinstance(r, Exception)
                 for e in (r.header_error, r.map_error) if e is not None]
        kept += [r for r in ctx.journal_scans.values() if isinstance(r, Exception)]
        kept += [e for e in ctx.index_inventory.errors if e is not None]
        kept += [m for m in ctx.last_marks.values() if isinstance(m, Exception)]
        assert len(kept) >= 4, kept   # (each damage kept as data)
        framed = [(type(x).__name__, str(x)) for e in kept for x in _chain(e) if x.__traceback__ is not None]
        assert framed == []
    finally:
        report.close()
