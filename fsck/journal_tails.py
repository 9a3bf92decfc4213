"""After a journal record whose length runs past the file's end: is that record the torn last one (a
crash while it was written), or a damaged length with acknowledged records after it? Two plausible
records in a row after it answer (journal.search.find_record_pair); a single last record, which only
the preallocated zeros follow, answers when it proves itself, as payload bytes may look like a record:
a data record by a digest that verifies, a meta record (a fence, a ledger key, an explicit LAC) by its
marker entry id and a size its own fields give exactly.
"""
from __future__ import annotations

import os

from bkdisk.digests.kernels import DIGEST_OK
from bkdisk.digests.verify import verify_streamed
from bkdisk.diskio.mapped import read_range
from bkdisk.formats import journal as fj
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import ENTRY_V2_HEADER_SIZE, V2_DIGEST_MASK, V2_FLAGS_AT, parse_entry_ids
from bkdisk.formats.errors import FormatError
from bkdisk.formats.journal import RECORD_LENGTH, RECORD_LENGTH_SIZE
from bkdisk.fsck.context import CheckContext
from bkdisk.journal.search import find_record_pair, lone_records

CANDIDATES = 1000   # lone records verified at most after one damaged length (each is a read)
_META_MAX = 1 << 17   # a meta record's body holds at most a 64 KiB key or LAC body
_META_NAMES = {fj.RecordKind.FENCE: "fence", fj.RecordKind.LEDGER_KEY: "ledger-key",
               fj.RecordKind.EXPLICIT_LAC: "explicit-LAC"}


def records_after(ctx: CheckContext, path: str, off: int) -> str | None:
    """What follows the record at ``off`` that runs past the file's end, if records do (a text for the
    finding), or None: then it is the journal's torn last record."""
    at = find_record_pair(path, off + 1)
    if at >= 0:
        return f"records follow from offset {at}"
    plan = ctx.digest_plan
    for k, q in enumerate(lone_records(path, off + 1)):
        if k == CANDIDATES:
            break
        head = read_range(path, q, RECORD_LENGTH_SIZE + ENTRY_V2_HEADER_SIZE)
        size = RECORD_LENGTH.parse(head[:RECORD_LENGTH_SIZE])
        meta = _meta_record(path, q, size)
        if meta is not None:
            return f"a {meta} record follows at offset {q}, with only zeros after it"
        try:
            v, scope, ledger, entry = parse_entry_ids(head[RECORD_LENGTH_SIZE:])
        except FormatError:
            continue
        key = (scope, ledger)
        code = head[RECORD_LENGTH_SIZE + V2_FLAGS_AT] & V2_DIGEST_MASK if v == 2 else \
            int(plan.known[key]) if key in plan.known else plan.decided.get(key, (0, 0))[0]
        if code == DigestType.DUMMY:
            continue   # (no digest: nothing tells this record from payload bytes)
        if verify_streamed(os.fspath(path), q, size, key, plan) == DIGEST_OK:
            return (f"a data record whose digest verifies follows at offset {q} (ledger {ledger} entry {entry}), "
                    f"with only zeros after it")
    return None


def _meta_record(path: str, q: int, size: int) -> str | None:
    """The kind of the meta record (a fence, a ledger key, an explicit LAC) at ``q`` whose body is
    ``size`` bytes, when that is exactly the size its own fields give."""
    if size > _META_MAX:
        return None
    body = read_range(path, q + RECORD_LENGTH_SIZE, size)
    try:
        rec = fj.classify_body(body, offset=q + RECORD_LENGTH_SIZE, path=path)
    except FormatError:
        return None
    kind = rec.kind
    exact = {fj.RecordKind.FENCE: fj.FENCE_BODY.sizeof(),
             fj.RecordKind.LEDGER_KEY: fj.KEY_AT + len(rec.master_key or b""),
             fj.RecordKind.EXPLICIT_LAC: fj.LAC_BODY_AT + len(rec.lac_body or b"")}.get(kind)
    return _META_NAMES[kind] if exact == size and not rec.scoped else None
