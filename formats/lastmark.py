"""The ``lastMark`` file: the journal position up to which ledger storage is durable."""
from __future__ import annotations

from typing import NamedTuple

import construct as cs

from bkdisk.formats.codec import parse_struct
from bkdisk.formats.errors import FormatError

LAST_MARK = cs.Struct("log_id" / cs.Int64sb, "offset" / cs.Int64sb)
LAST_MARK_SIZE = 16


class LastMark(NamedTuple):
    log_id: int   # journal id (the .txn file name in hex)
    offset: int   # byte offset in that journal


def parse_last_mark(data: bytes | memoryview, *, path: str | None = None) -> LastMark:
    """The mark BookKeeper reads from a lastMark file's bytes: the first 16 (it reads 16 bytes and
    looks no further). A shorter file it skips, with an error in its log; here it raises."""
    if len(data) < LAST_MARK_SIZE:
        raise FormatError("a 16-byte lastMark (journal id, offset)",
                          f"{len(data)} bytes: BookKeeper skips a lastMark it cannot read 16 bytes from",
                          path=path, offset=0)
    c = parse_struct(LAST_MARK, data[:LAST_MARK_SIZE], what="a lastMark", path=path)
    return LastMark(c.log_id, c.offset)


def build_last_mark(m: LastMark) -> bytes:
    return LAST_MARK.build(dict(log_id=m.log_id, offset=m.offset))


def last_mark_name(journal_index: int, journal_count: int) -> str:
    """``lastMark`` with one journal dir, ``lastMark.<i>`` with several."""
    return "lastMark" if journal_count <= 1 else f"lastMark.{journal_index}"
