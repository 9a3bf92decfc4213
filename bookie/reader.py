"""Reading a whole bookie back into plain data: every ledger's state and every stored entry.

The reference path over the construct parsers, for tests against manifests and writer specs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from bkdisk.bookie.layout import BookieDirs
from bkdisk.diskio.mapped import read_bytes
from bkdisk.entrylogs.reader import read_entry_log
from bkdisk.formats.cookie import Cookie, parse_cookie
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import Entry, parse_entry
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import RecordKind
from bkdisk.formats.lastmark import LastMark, parse_last_mark
from bkdisk.formats.paths import CURRENT_DIR, parse_entry_log_name, parse_index_name, parse_journal_name
from bkdisk.indexfiles.reference_reader import read_index
from bkdisk.journal.reader import read_journal


@dataclass
class LedgerState:
    master_key: bytes | None = None
    fenced: bool = False
    explicit_lac: int | None = None
    index_path: str | None = None
    sources: set[str] = field(default_factory=set)   # "index", "journal"


@dataclass
class StoredEntry:
    entry: Entry
    log_path: str
    offset: int            # of the size prefix in the log
    digest_ok: bool | None


@dataclass
class BookieContent:
    cookies: dict[str, Cookie]
    last_marks: dict[str, LastMark]
    ledgers: dict[LedgerId, LedgerState]
    entries: dict[tuple[LedgerId, int], list[StoredEntry]]


def read_bookie(dirs: BookieDirs, digest_types: dict[LedgerId, DigestType],
                passwords: dict[LedgerId, bytes] | None = None) -> BookieContent:
    """Read cookies, lastMarks, index headers, journal meta records and every entry-log entry.

    V1 entries need their ledger's digest type (from metadata) to split digest from payload.
    """
    passwords = passwords or {}
    content = BookieContent({}, {}, {}, {})
    for d in dirs.all_dirs:
        p = os.path.join(d, CURRENT_DIR, "VERSION")
        if os.path.exists(p):
            content.cookies[d] = parse_cookie(read_bytes(p), path=p)
    for d in dirs.ledger_dirs:
        cur = os.path.join(d, CURRENT_DIR)
        for n in sorted(os.listdir(cur)):
            if n.startswith("lastMark"):
                p = os.path.join(cur, n)
                content.last_marks[p] = parse_last_mark(read_bytes(p), path=p)
    for d in dirs.effective_index_dirs:
        cur = os.path.join(d, CURRENT_DIR)
        for dp, dn, fn in os.walk(cur):
            if dp == cur:
                dn[:] = [x for x in dn if x not in ("ledgers", "locations")]
            for n in fn:
                lid = parse_index_name(n)
                if lid is None:
                    continue
                x = read_index(os.path.join(dp, n))
                st = content.ledgers.setdefault(lid, LedgerState())
                st.master_key, st.fenced = x.header.master_key, x.header.fenced
                st.explicit_lac, st.index_path = x.header.explicit_lac, x.path
                st.sources.add("index")
    for d in dirs.journal_dirs:
        cur = os.path.join(d, CURRENT_DIR)
        for n in sorted(os.listdir(cur), key=lambda n: parse_journal_name(n) or -1):
            if parse_journal_name(n) is None:
                continue
            for r in read_journal(os.path.join(cur, n)).records:
                lid = LedgerId(r.scope_id, r.ledger_id)
                if r.kind == RecordKind.LEDGER_KEY:
                    st = content.ledgers.setdefault(lid, LedgerState())
                    st.master_key = st.master_key or r.master_key
                    st.sources.add("journal")
                elif r.kind == RecordKind.FENCE:
                    content.ledgers.setdefault(lid, LedgerState()).fenced = True
                elif r.kind == RecordKind.EXPLICIT_LAC:
                    st = content.ledgers.setdefault(lid, LedgerState())
                    if st.explicit_lac is None:
                        st.explicit_lac = r.explicit_lac
    for d in dirs.ledger_dirs:
        cur = os.path.join(d, CURRENT_DIR)
        for n in sorted(os.listdir(cur)):
            if parse_entry_log_name(n) is None:
                continue
            p = os.path.join(cur, n)
            data = read_bytes(p, limit=None)
            scan = read_entry_log(p, data)
            for rec in scan.records:
                lid = LedgerId(rec.scope_id, rec.ledger_id)
                body = rec.offset + SIZE_PREFIX_SIZE
                raw = data[body:body + rec.size]
                dt = digest_types.get(lid)
                e = parse_entry(raw, digest_type=dt, path=p, offset=body) if (dt or rec.format_version == 2) \
                    else None
                if e is None:
                    continue
                eff = e.digest_type if e.format_version == 2 else dt
                ok = None if (eff == DigestType.HMAC and lid not in passwords) else e.digest_ok(dt, passwords.get(lid))
                content.entries.setdefault((lid, rec.entry_id), []).append(StoredEntry(e, p, rec.offset, ok))
    return content
