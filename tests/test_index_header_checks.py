"""Pass 3's checks of each index header against the journals (master key, fence, explicit LAC, a
partial last slot): the pass finds the files worth a look with arrays, and gives the findings of the
same checks run on every file, in the same order."""
from __future__ import annotations

import os

from bkdisk.bookie.layout import discover
from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import KEY_OFFSET, parse_header
from bkdisk.fsck.context import CheckContext, CheckOptions
from bkdisk.fsck.passes import p3_index
from bkdisk.indexfiles.reference_walk import walk_index_dirs_reference


def _patch(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _pass3(root: str, every_file: bool) -> list[dict]:
    ctx = CheckContext(discover(root), CheckOptions(jobs=1))
    try:
        if every_file:   # the reference walk's headers are a plain list: the pass then looks at every file
            ctx.__dict__["index_inventory"] = walk_index_dirs_reference(ctx.dirs.effective_index_dirs)
        return [f.to_json() for f in p3_index.run(ctx)]
    finally:
        ctx.close()


def test_header_findings_equal_those_of_checking_every_file(tmp_path):
    ledgers = [LedgerSpec(i, [b"x" * 30] * 2, password=b"pw") for i in range(1, 40)]
    ledgers += [LedgerSpec(50, [b"y"] * 2, password=b"pw", fenced=True),
                LedgerSpec(51, [b"y"] * 2, password=b"other", fenced=True),
                LedgerSpec(52, [b"z"] * 3, password=b"pw", explicit_lac=1),
                LedgerSpec(53, [b"z"] * 3, password=b"pw", explicit_lac=1)]
    wb = write_bookie(BookieSpec(ledgers), str(tmp_path / "b"))
    idx = {lid.ledger: p for lid, p in wb.index_files.items()}

    def header(ledger: int):
        with open(idx[ledger], "rb") as f:
            return parse_header(f.read(1024))

    key_len = len(header(7).master_key)
    _patch(idx[7], KEY_OFFSET, b"\xff")                          # master key differs from the journal's
    _patch(idx[20], KEY_OFFSET + 1, b"\xee")                     # (two files, one wrong key)
    _patch(idx[21], KEY_OFFSET + 1, b"\xee")
    _patch(idx[50], KEY_OFFSET + key_len, bytes(4))              # fenced in the journal, not in the index
    assert header(52).explicit_lac_body is not None
    _patch(idx[52], KEY_OFFSET + key_len + 8, (999).to_bytes(8, "big"))   # the body names another ledger
    with open(idx[30], "ab") as f:
        f.write(b"abc")                                          # a partial last slot
    _patch(idx[33], 0, b"XXXX")                                  # not an index header at all
    root = str(tmp_path / "b")
    got = _pass3(root, every_file=False)
    assert got == _pass3(root, every_file=True)
    codes = [(f["code"], f["ledger"]) for f in got]
    assert ("INDEX_MASTER_KEY_MISMATCH", 7) in codes and ("INDEX_MASTER_KEY_MISMATCH", 20) in codes
    assert ("INDEX_MASTER_KEY_MISMATCH", 21) in codes and ("INDEX_NOT_FENCED", 50) in codes
    assert ("INDEX_EXPLICIT_LAC_BAD", 52) in codes and ("INDEX_TRUNCATED", 30) in codes
    assert ("INDEX_HEADER_BAD", 33) in codes
    assert not {l for _c, l in codes} & {1, 2, 51, 53}
    assert all(os.path.isfile(f["path"]) for f in got)
    assert LedgerId(0, 7) in wb.index_files
