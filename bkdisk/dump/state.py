"""`bkdisk dump index|lastmark|cookie|metadata`: a ledger's index, lastMark, cookies and ledger metadata."""

from __future__ import annotations

import os

import click

from bkdisk.bookie.layout import BookieDirs, discover
from bkdisk.bookie.lookup import find_index
from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.ledger_options import ledger_options
from bkdisk.commandline.runner import one_line_errors
from bkdisk.diskio.mapped import DiskError
from bkdisk.dump import shell_format as sf
from bkdisk.dump.common import DumpError, Out, json_option, regular_file, regular_path
from bkdisk.dump.file_kinds import expect_kind
from bkdisk.formats.cookie import parse_cookie
from bkdisk.formats.entrylog import ENTRY_SIZE
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import HEADER_SIZE as INDEX_HEADER_SIZE
from bkdisk.formats.index import SLOT_SIZE, slot_offset
from bkdisk.formats.lastmark import last_mark_name, parse_last_mark
from bkdisk.formats.ledger_metadata import bookkeeper_refusal
from bkdisk.formats.metadata import body_offset, parse_metadata
from bkdisk.formats.paths import CURRENT_DIR, index_relpath, parse_index_name

index_scan = lazy_import("bkdisk.indexfiles.scan")   # numba: loaded when an index is dumped

# --------------------------------------------------------------------------------------------
# index


def storage_dirs(root: str) -> list[str]:
    """Dirs D (used as D/current) to look in: a ``current`` dir, one ledger/index dir, or a bookie root."""
    root = os.path.abspath(root)
    if os.path.basename(root) == CURRENT_DIR and not os.path.isdir(os.path.join(root, CURRENT_DIR)):
        return [os.path.dirname(root)]
    if os.path.isdir(os.path.join(root, CURRENT_DIR)):
        return [root]
    return discover(root).effective_index_dirs


def find_index_file(root: str, ledger: LedgerId) -> str:
    """The ledger's .idx under ``root``, probing each index dir in order like ``findIndexFile``."""
    dirs = storage_dirs(root)
    found = find_index(BookieDirs([], [], index_dirs=dirs), ledger)
    if found is not None:
        return found
    rel = index_relpath(ledger)
    rocks = [d for d in dirs if os.path.isdir(os.path.join(d, CURRENT_DIR, "locations"))]
    why = " (DbLedgerStorage: its index is in RocksDB, not in .idx files)" if rocks else ""
    raise DumpError(f"{root}: no index file {rel} for ledger {ledger} under {', '.join(dirs) or 'any dir'}{why}")


@click.command("index")
@click.argument("path")
@click.option("--page-size", type=click.IntRange(min=8), default=None,
              help="List whole pages only, as BookKeeper does with this pageSize (default: every slot).")
@json_option
@ledger_options
@one_line_errors
def index_cmd(path: str, page_size: int | None, as_json: bool, ledger: LedgerId | None) -> None:
    """A ledger index (.idx, or a ledger dir / bookie root with a ledger option): `bookkeeper shell ledger -m <id>`."""
    if os.path.isdir(path):
        if ledger is None:
            raise click.UsageError("PATH is a directory: name the ledger with --ledger-id or --ledger-qualified-name")
        path = find_index_file(path, ledger)
    p = regular_path(path)
    expect_kind(p, "index")
    named = parse_index_name(os.path.basename(p))
    if ledger is not None and named is not None and named != ledger:
        raise DumpError(f"{p}: the file name is ledger {named}, not ledger {ledger}")
    lid = ledger or named
    if lid is None:
        raise DumpError(f"{p}: the file name does not name a ledger; give --ledger-id")
    # The bounded reader: memory follows the present slots, not the size a (sparse) file claims.
    x = index_scan.read_index_locations(p)
    if x.header_error is not None:
        raise x.header_error
    size = max(0, x.size - INDEX_HEADER_SIZE)
    slots = size // SLOT_SIZE
    if page_size is not None:
        slots = (page_size // SLOT_SIZE) * (size // page_size)
    present = x.locations[x.locations["entry"] < slots]
    text = sf.ledger_text(lid)
    out = Out()
    h = x.header
    if as_json:
        out.obj({"file": p, "kind": "header", "scope": lid.scope, "ledger": lid.ledger, "version": h.version,
                 "master_key": h.master_key.hex(), "size": size, "entries": size // SLOT_SIZE, "fenced": h.fenced,
                 "state_bits": h.state_bits, "explicit_lac": h.explicit_lac, "trailing_bytes": x.trailing_bytes})
        for entry, log, pos in zip(present["entry"].tolist(), present["log"].tolist(), present["pos"].tolist()):
            out.obj({"file": p, "kind": "location", "scope": lid.scope, "ledger": lid.ledger, "entry": entry,
                     "log": log, "pos": pos, "offset": pos - ENTRY_SIZE.sizeof(), "slot_offset": slot_offset(entry)})
    else:
        out.text(sf.ledger_index_meta_text(text, h.master_key, size, h.fenced))
        out.text(sf.ledger_index_header_line(text))
        # BookieShell lists every slot; written in chunks so that a file of 2^31 empty slots streams.
        for chunk in sf.ledger_index_slot_lines(slots, present["entry"], present["log"], present["pos"]):
            out.text(chunk)
    out.flush()
    if x.trailing_bytes:
        raise FormatError(f"an index of {INDEX_HEADER_SIZE} header bytes plus whole {SLOT_SIZE}-byte slots",
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
    _p, data = regular_file(path)
    return parse_last_mark(data, path=path)


@click.command("lastmark")
@click.argument("path")
@json_option
@one_line_errors
def lastmark_cmd(path: str, as_json: bool) -> None:
    """A lastMark file, a ledger dir, or a bookie root: `bookkeeper shell lastmark`."""
    out = Out()
    rows: list[tuple[int | None, int, int, list[str]]] = []
    if not os.path.exists(path):
        raise DiskError(path, "no such file or directory")
    if not os.path.isdir(path):
        expect_kind(path, "lastmark")
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
                    if os.path.lexists(f):   # present but not a readable file: said, not skipped
                        m = _read_mark(f)
                        seen.append(f)
                        best = max(best, (m.log_id, m.offset))
                rows.append((idx, best[0], best[1], seen))
    for journal_index, log_id, offset, files in rows:
        if as_json:
            out.obj({"kind": "lastmark", "journal_index": journal_index, "journal_id": log_id,
                     "journal_file": f"{log_id & ((1 << 64) - 1):x}.txn", "offset": offset, "files": files})
        else:
            out.text(sf.last_mark_line(log_id, offset))
    out.flush()


@click.command("cookie")
@click.argument("path")
@json_option
@one_line_errors
def cookie_cmd(path: str, as_json: bool) -> None:
    """A cookie (current/VERSION, a dir holding one, or a bookie root: the cookie of each of its dirs)."""
    files = [path] if not os.path.isdir(path) else _cookie_files(path)
    cookies = []
    for f in files:
        expect_kind(regular_path(f), "cookie")
        p, data = regular_file(f)
        cookies.append((p, data, parse_cookie(data, path=p)))
    out = Out()
    # The dirs of one bookie carry the same cookie: printed once, unless they differ.
    one = len({data for _p, data, _c in cookies}) == 1
    for i, (p, _data, c) in enumerate(cookies):
        if as_json:
            out.obj({"file": p, "kind": "cookie", **c.to_json()})
        elif one:
            if i == 0:
                out.text(sf.cookie_text(c))
        else:
            out.text(f"{p}:\n" + sf.cookie_text(c))
    out.flush()


def _cookie_files(path: str) -> list[str]:
    for cand in (os.path.join(path, "VERSION"), os.path.join(path, CURRENT_DIR, "VERSION")):
        if os.path.isfile(cand):
            return [cand]
    bd = discover(path)   # a bookie root: every dir's current/VERSION, journal dirs first
    found = [os.path.join(d, CURRENT_DIR, "VERSION") for d in bd.journal_dirs + bd.ledger_dirs + bd.index_dirs]
    found = [f for f in dict.fromkeys(found) if os.path.lexists(f)]
    if not found:
        raise DumpError(f"{path}: no VERSION (cookie) file in it, in its current/, or in the dirs of a bookie below it")
    return found


@click.command("metadata")
@click.argument("path")
@json_option
@one_line_errors
def metadata_cmd(path: str, as_json: bool) -> None:
    """Ledger metadata (LedgerMetadataSerDe format 1, 2 or 3): BookKeeper's LedgerMetadata toString."""
    expect_kind(regular_path(path), "metadata")
    p, data = regular_file(path)
    md = parse_metadata(data, path=p)
    out = Out()
    if as_json:
        out.obj({"file": p, "kind": "ledger_metadata", **md.to_json()})
    else:
        out.text(sf.ledger_metadata_text(md))
    out.flush()
    refusal = bookkeeper_refusal(md)
    if refusal is not None:
        raise FormatError("ledger metadata BookKeeper's client loads", refusal, path=p, offset=body_offset(data))
