"""``bkdisk dump``: print one BookKeeper file the way BookKeeper's own shell prints it, or as JSON lines.

journal   = ``bookkeeper shell readjournal``      entrylog            = ``readlog``
index     = ``ledger -m``                          entrylog --metadata = ``readlogmetadata``
lastmark  = ``lastmark``                           cookie, metadata    = the parsed fields

The text itself lives in bkdisk/shell_format.py. Damage found by a reader is reported after
everything readable has been printed: one line on stderr naming file and offset, exit code 8.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import click

from bkdisk import shell_format as sf
from bkdisk.errors import one_line_errors
from bkdisk.ledger_options import ledger_options
from bookie.layout import discover
from diskio.mapped import DiskError, read_bytes
from entrylogs.reader import Damage, EntryLogScan, read_entry_log
from formats.cookie import parse_cookie
from formats.errors import BkdiskError, FormatError
from formats.ids import LedgerId
from formats.index import HEADER_SIZE as INDEX_HEADER_SIZE
from formats.journal import RecordKind
from formats.lastmark import last_mark_name, parse_last_mark
from formats.metadata import parse_metadata
from formats.paths import CURRENT_DIR, index_relpath, parse_index_name
from indexfiles.reader import read_index
from journal.reader import EndKind, JournalScan, read_journal

SIGNED_MAX = (1 << 63) - 1

JOURNAL_KIND_NAME = {
    RecordKind.DATA: "entry", RecordKind.LEDGER_KEY: "master_key", RecordKind.FENCE: "fence",
    RecordKind.FORCE_LEDGER: "force_ledger", RecordKind.EXPLICIT_LAC: "explicit_lac",
    RecordKind.UNKNOWN_META: "other",
}


class DumpError(BkdiskError):
    """The file to dump could not be chosen (no such ledger index under a root, no cookie, ...)."""


# --------------------------------------------------------------------------------------------
# output


class _Out:
    """Text and JSON lines to stdout as UTF-8 bytes (payloads may hold any character)."""

    def __init__(self) -> None:
        sys.stdout.flush()  # keep order with anything already written through the text layer
        self._s = getattr(sys.stdout, "buffer", None) or _TextAsBytes(sys.stdout)

    def text(self, s: str) -> None:
        self._s.write(s.encode("utf-8"))

    def obj(self, o: dict[str, Any]) -> None:
        self._s.write((json.dumps(o) + "\n").encode("utf-8"))

    def flush(self) -> None:
        self._s.flush()


class _TextAsBytes:
    """A stdout without a byte layer (rare: some embedding hosts); payload bytes go through as text."""

    def __init__(self, stream) -> None:
        self._t = stream

    def write(self, b: bytes) -> None:
        self._t.write(b.decode("utf-8"))

    def flush(self) -> None:
        self._t.flush()


def _json_option(fn: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="One JSON object per record, one per line.")(fn)


def _msg_options(fn: Callable) -> Callable:
    fn = click.option("--entry-format", type=click.Choice(sf.ENTRY_FORMATS), default="string", show_default=True,
                      help="How --msg prints payloads: BookKeeper's StringEntryFormatter or HexDumpEntryFormatter.")(fn)
    return click.option("--msg", "-m", "msg", is_flag=True,
                        help="Print each entry's data (digest and payload) like the shell's -msg.")(fn)


def _file(path: str) -> tuple[str, bytes]:
    """The bytes of a regular file, or a one-line DiskError."""
    if not os.path.exists(path):
        raise DiskError(path, "no such file or directory")
    if os.path.isdir(path):
        raise DiskError(path, "is a directory, expected a file")
    return path, read_bytes(path)


def _matches(ledger: LedgerId | None, scope: int, lid: int) -> bool:
    return ledger is None or (ledger.scope, ledger.ledger) == (scope, lid)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def dump() -> None:
    """Print BookKeeper files as `bookkeeper shell` prints them (or as JSON lines)."""


# --------------------------------------------------------------------------------------------
# journal


def _journal_end_error(scan: JournalScan) -> FormatError | None:
    end = scan.end
    if end is None or end.kind in (EndKind.CLEAN, EndKind.EOF):
        return None
    expected = {
        EndKind.TORN: "a complete record (length prefix and that many body bytes)",
        EndKind.INVALID: "a record length > 0, a padding record (V5+) or a well-formed record body",
        EndKind.GARBAGE: "only zeros after the zero length that ends the journal",
    }[end.kind]
    return FormatError(expected, end.detail, path=scan.path, offset=end.offset)


def _journal_json(scan: JournalScan, r, body: bytes) -> dict[str, Any]:
    o: dict[str, Any] = {
        "file": scan.path, "journal_id": scan.journal_id, "journal_version": scan.version,
        "offset": r.offset, "size": r.length, "kind": JOURNAL_KIND_NAME[r.kind],
        "scope": r.scope_id, "ledger": r.ledger_id, "entry": r.entry_id,
    }
    base = body[9:] if r.scoped else body
    if r.kind == RecordKind.DATA:
        o["last_add_confirmed"] = int.from_bytes(base[16:24], "big", signed=True)
        o["length"] = int.from_bytes(base[24:32], "big", signed=True)
    elif r.kind == RecordKind.LEDGER_KEY:
        o["master_key"] = (r.master_key or b"").hex()
    elif r.kind == RecordKind.EXPLICIT_LAC:
        o["explicit_lac"] = r.explicit_lac
    return o


@dump.command("journal")
@click.argument("path")
@_msg_options
@_json_option
@ledger_options
@one_line_errors
def journal_cmd(path: str, msg: bool, entry_format: str, as_json: bool, ledger: LedgerId | None) -> None:
    """A journal file (.txn): `bookkeeper shell readjournal <id>`."""
    p, data = _file(path)
    scan = read_journal(p, data=data)
    out = _Out()
    records = [r for r in scan.records if r.kind != RecordKind.PADDING]
    if not as_json:
        out.text(sf.journal_scan_header(scan.journal_id, os.path.basename(p)))
        if records:
            out.text(sf.journal_version_line(scan.version))
    for r in records:
        if not _matches(ledger, r.scope_id, r.ledger_id):
            continue
        body = data[r.offset + 4:r.offset + 4 + r.length]
        if as_json:
            out.obj(_journal_json(scan, r, body))
        else:
            out.text(sf.entry_block(r.offset, body, print_msg=msg, entry_format=entry_format,
                                    scope=r.scope_id if r.scoped else None))
    out.flush()
    err = _journal_end_error(scan)
    if err is not None:
        raise err


# --------------------------------------------------------------------------------------------
# entry log


_DAMAGE_EXPECTED = {
    Damage.ZERO_SIZE: "an entry size > 0",
    Damage.BAD_SIZE: "an entry size between 32 and the bytes left",
    Damage.BAD_HEADER: "an entry header (ledger id, entry id >= 0, LAC < entry id, length >= 0)",
    Damage.TRUNCATED: "a 4-byte entry size",
}


def _entry_log_error(scan: EntryLogScan, data: bytes) -> FormatError | None:
    if scan.header_error is not None:
        return scan.header_error
    if scan.problems:
        pr = scan.problems[0]
        found = (f"size {int.from_bytes(data[pr.offset:pr.offset + 4], 'big', signed=True)}"
                 if pr.offset + 4 <= len(data) else f"{len(data) - pr.offset} bytes")
        return FormatError(_DAMAGE_EXPECTED[pr.reason], f"{found} ({pr.reason.name.lower()}; next entry at "
                           f"{pr.resumed_at})", path=scan.path, offset=pr.offset)
    return scan.map_error


def entry_log_metadata(scan: EntryLogScan) -> tuple[str, list[tuple[int, int, int]], int]:
    """What ``DefaultEntryLogger.getEntryLogMetadata`` builds: (source, [(scope, ledger, size)] in
    print order, total size).

    The ledgers map is used when BookKeeper's ``extractEntryLogMetadataFromIndex`` would accept
    it (header V1, offset != 0, well-formed batches, ledger count equal to the header's and not 0,
    ids and sizes >= 0); otherwise the sizes come from a scan, counting ``size + 4`` per entry of
    a ledger id >= 0, like ``extractEntryLogMetadataByScanning``. Order is the iteration order of
    the ``ConcurrentLongLongHashMap`` the sizes land in. BP-35 scoped ledgers, which BookKeeper
    cannot see, follow in file order.
    """
    h = scan.header
    lm = scan.ledgers_map
    if (h is not None and h.version >= 1 and h.ledgers_map_offset != 0 and scan.map_error is None and lm
            and h.ledgers_count != 0 and len(lm) == h.ledgers_count and all(s == 0 for s, _ in lm)):
        m = sf.JavaLongLongMap()
        try:
            total = 0
            for (_s, lid), size in lm.items():
                total += size
                m.add(lid if lid <= SIGNED_MAX else lid - (1 << 64), size)
            return "ledgers_map", [(0, k, v) for k, v in m.items()], total
        except ValueError:
            pass
    m = sf.JavaLongLongMap()
    scoped: dict[tuple[int, int], int] = {}
    total = 0
    for r in scan.records:
        if r.format_version == 1:
            if r.ledger_id <= SIGNED_MAX:
                m.add(r.ledger_id, r.size + 4)
                total += r.size + 4
        else:
            scoped[(r.scope_id, r.ledger_id)] = scoped.get((r.scope_id, r.ledger_id), 0) + r.size + 4
    items = [(0, k, v) for k, v in m.items()] + [(s, l, v) for (s, l), v in scoped.items()]
    return "scan", items, total + sum(scoped.values())


def _entry_json(scan: EntryLogScan, r) -> dict[str, Any]:
    return {"file": scan.path, "log_id": scan.log_id, "offset": r.offset, "size": r.size, "kind": "entry",
            "format_version": r.format_version, "scope": r.scope_id, "ledger": r.ledger_id, "entry": r.entry_id,
            "last_add_confirmed": r.last_add_confirmed, "length": r.length}


@dump.command("entrylog")
@click.argument("path")
@click.option("--metadata", is_flag=True, help="Per-ledger sizes, like `bookkeeper shell readlogmetadata`.")
@click.option("--entry-id", type=int, default=None, help="With a ledger option: only this entry (readlog -e).")
@_msg_options
@_json_option
@ledger_options
@one_line_errors
def entrylog_cmd(path: str, metadata: bool, entry_id: int | None, msg: bool, entry_format: str, as_json: bool,
                 ledger: LedgerId | None) -> None:
    """An entry log (.log): `bookkeeper shell readlog <id>` (or `readlogmetadata <id>`)."""
    if entry_id is not None and ledger is None:
        raise click.UsageError("--entry-id needs --ledger-id or --ledger-qualified-name")
    p, data = _file(path)
    scan = read_entry_log(p, data=data)
    name = os.path.basename(p)
    out = _Out()
    if metadata:
        source, items, total = entry_log_metadata(scan)
        shown = [(s, l, v) for s, l, v in items if _matches(ledger, s, l)]
        if as_json:
            for s, l, v in shown:
                out.obj({"file": p, "log_id": scan.log_id, "kind": "ledger_size", "scope": s, "ledger": l,
                         "size": v, "source": source})
        else:
            out.text(sf.entry_log_metadata_text(scan.log_id, name, total, total,
                                                [(sf.ledger_text(l, s), v) for s, l, v in shown]))
    else:
        lid_text = None if ledger is None else sf.ledger_text(ledger)
        if not as_json:
            out.text(sf.entry_log_scan_header(scan.log_id, name, lid_text, entry_id))
        found = False
        for r in scan.records:
            if not _matches(ledger, r.scope_id, r.ledger_id):
                continue
            if entry_id is not None and (found or r.entry_id != entry_id):
                continue
            found = True
            if as_json:
                out.obj(_entry_json(scan, r))
            else:
                body = data[r.offset + 4:r.offset + 4 + r.size]
                out.text(sf.entry_block(r.offset, body, print_msg=msg, entry_format=entry_format,
                                        scope=r.scope_id if r.format_version == 2 else None))
        if ledger is not None and not found and not as_json:
            out.text(sf.entry_log_not_found(scan.log_id, name, lid_text, entry_id))
    out.flush()
    err = _entry_log_error(scan, data)
    if err is not None:
        raise err


# --------------------------------------------------------------------------------------------
# index


def _storage_dirs(root: str) -> list[str]:
    """Dirs D (used as D/current) to look in: a ``current`` dir, one ledger/index dir, or a bookie root."""
    root = os.path.abspath(root)
    if os.path.basename(root) == CURRENT_DIR and not os.path.isdir(os.path.join(root, CURRENT_DIR)):
        return [os.path.dirname(root)]
    if os.path.isdir(os.path.join(root, CURRENT_DIR)):
        return [root]
    return discover(root).effective_index_dirs


def find_index_file(root: str, ledger: LedgerId) -> str:
    """The ledger's .idx under ``root``, probing each index dir in order like ``findIndexFile``."""
    rel = index_relpath(ledger)
    dirs = _storage_dirs(root)
    for d in dirs:
        cand = os.path.join(d, CURRENT_DIR, rel)
        if os.path.isfile(cand):
            return cand
    rocks = [d for d in dirs if os.path.isdir(os.path.join(d, CURRENT_DIR, "locations"))]
    why = " (DbLedgerStorage: its index is in RocksDB, not in .idx files)" if rocks else ""
    raise DumpError(f"{root}: no index file {rel} for ledger {ledger} under {', '.join(dirs) or 'any dir'}{why}")


@dump.command("index")
@click.argument("path")
@click.option("--page-size", type=click.IntRange(min=8), default=None,
              help="List whole pages only, as BookKeeper does with this pageSize (default: every slot).")
@_json_option
@ledger_options
@one_line_errors
def index_cmd(path: str, page_size: int | None, as_json: bool, ledger: LedgerId | None) -> None:
    """A ledger index (.idx, or a ledger dir / bookie root with a ledger option): `bookkeeper shell ledger -m <id>`."""
    if os.path.isdir(path):
        if ledger is None:
            raise click.UsageError("PATH is a directory: name the ledger with --ledger-id or --ledger-qualified-name")
        path = find_index_file(path, ledger)
    p, data = _file(path)
    named = parse_index_name(os.path.basename(p))
    if ledger is not None and named is not None and named != ledger:
        raise DumpError(f"{p}: the file name is ledger {named}, not ledger {ledger}")
    lid = ledger or named
    if lid is None:
        raise DumpError(f"{p}: the file name does not name a ledger; give --ledger-id")
    x = read_index(p, data=data)
    size = max(0, x.size - INDEX_HEADER_SIZE)
    slots = x.locations
    if page_size is not None:
        slots = slots[:(page_size // 8) * (size // page_size)]
    text = sf.ledger_text(lid)
    out = _Out()
    if as_json:
        h = x.header
        out.obj({"file": p, "kind": "header", "scope": lid.scope, "ledger": lid.ledger, "version": h.version,
                 "master_key": h.master_key.hex(), "size": size, "entries": size // 8, "fenced": h.fenced,
                 "state_bits": h.state_bits, "explicit_lac": h.explicit_lac, "trailing_bytes": x.trailing_bytes})
        for i, loc in enumerate(slots):
            loc = int(loc)
            if loc:
                pos = loc & 0xFFFFFFFF
                out.obj({"file": p, "kind": "location", "scope": lid.scope, "ledger": lid.ledger, "entry": i,
                         "log": loc >> 32, "pos": pos, "offset": pos - 4,
                         "slot_offset": INDEX_HEADER_SIZE + 8 * i})
    else:
        out.text(sf.ledger_index_meta_text(text, x.header.master_key, size, x.header.fenced))
        out.text(sf.ledger_index_entries_text(text, slots))
    out.flush()
    if x.trailing_bytes:
        raise FormatError("an index of 1024 header bytes plus whole 8-byte slots",
                          f"{x.trailing_bytes} bytes of a partial slot", path=p, offset=x.size - x.trailing_bytes)


# --------------------------------------------------------------------------------------------
# lastMark, cookie, ledger metadata


def _mark_files_in(cur: str) -> list[str]:
    try:
        names = os.listdir(cur)
    except OSError:
        return []
    marks = [n for n in names if n == "lastMark" or n.startswith("lastMark.")]
    return [os.path.join(cur, n) for n in sorted(marks, key=lambda n: (n != "lastMark", len(n), n))]


def _read_mark(path: str):
    _p, data = _file(path)
    return parse_last_mark(data, path=path)


@dump.command("lastmark")
@click.argument("path")
@_json_option
@one_line_errors
def lastmark_cmd(path: str, as_json: bool) -> None:
    """A lastMark file, a ledger dir, or a bookie root: `bookkeeper shell lastmark`."""
    out = _Out()
    rows: list[tuple[int | None, int, int, list[str]]] = []
    if not os.path.exists(path):
        raise DiskError(path, "no such file or directory")
    if not os.path.isdir(path):
        m = _read_mark(path)
        rows.append((None, m.log_id, m.offset, [path]))
    else:
        files = _mark_files_in(path) or _mark_files_in(os.path.join(path, CURRENT_DIR))
        if files:
            for f in files:
                m = _read_mark(f)
                rows.append((None, m.log_id, m.offset, [f]))
        else:
            bd = discover(path)
            n = max(1, len(bd.journal_dirs))
            for idx in range(n):
                best, seen = (0, 0), []
                for d in bd.ledger_dirs:
                    f = os.path.join(d, CURRENT_DIR, last_mark_name(idx, n))
                    if os.path.isfile(f):
                        m = _read_mark(f)
                        seen.append(f)
                        best = max(best, (m.log_id, m.offset))
                rows.append((idx, best[0], best[1], seen))
    for idx, log_id, offset, files in rows:
        if as_json:
            out.obj({"kind": "lastmark", "journal_index": idx, "journal_id": log_id,
                     "journal_file": f"{log_id & ((1 << 64) - 1):x}.txn", "offset": offset, "files": files})
        else:
            out.text(sf.last_mark_line(log_id, offset))
    out.flush()


@dump.command("cookie")
@click.argument("path")
@_json_option
@one_line_errors
def cookie_cmd(path: str, as_json: bool) -> None:
    """A cookie (current/VERSION, or a dir holding one): its fields."""
    if os.path.isdir(path):
        for cand in (os.path.join(path, "VERSION"), os.path.join(path, CURRENT_DIR, "VERSION")):
            if os.path.isfile(cand):
                path = cand
                break
        else:
            raise DumpError(f"{path}: no VERSION (cookie) file in it or in its current/")
    p, data = _file(path)
    c = parse_cookie(data, path=p)
    out = _Out()
    if as_json:
        out.obj({"file": p, "kind": "cookie", **c.to_json()})
    else:
        out.text(sf.cookie_text(c))
    out.flush()


@dump.command("metadata")
@click.argument("path")
@_json_option
@one_line_errors
def metadata_cmd(path: str, as_json: bool) -> None:
    """Ledger metadata (LedgerMetadataSerDe format 1, 2 or 3): BookKeeper's LedgerMetadata toString."""
    p, data = _file(path)
    md = parse_metadata(data, path=p)
    out = _Out()
    if as_json:
        out.obj({"file": p, "kind": "ledger_metadata", **md.to_json()})
    else:
        out.text(sf.ledger_metadata_text(md))
    out.flush()
