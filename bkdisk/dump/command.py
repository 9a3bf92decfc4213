"""``bkdisk dump``: print one BookKeeper file the way BookKeeper's own shell prints it, or as JSON lines.

journal   = ``bookkeeper shell readjournal``      entrylog            = ``readlog``
index     = ``ledger -m``                          entrylog --metadata = ``readlogmetadata``
lastmark  = ``lastmark``                           cookie, metadata    = the parsed fields

The text itself lives in bkdisk/dump/shell_format.py. Damage found by a reader is reported after
everything readable has been printed: one line on stderr naming file and offset, exit code 8.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import click

from bkdisk.commandline.lazy import lazy_import
from bkdisk.commandline.ledger_options import ledger_options
from bkdisk.commandline.output import HELP_OPTIONS
from bkdisk.commandline.runner import one_line_errors
from bkdisk.dump import db_storage, state
from bkdisk.dump import shell_format as sf
from bkdisk.dump.common import BodyReader, Out, json_option, matches, msg_options, regular_path
from bkdisk.dump.file_kinds import expect_kind
from bkdisk.dump.java_compat import JavaLongLongMap
from bkdisk.entrylogs.reader import Damage, EntryRecord
from bkdisk.formats.codec import read_field, read_value
from bkdisk.formats.entry import ENTRY_V1_HEADER
from bkdisk.formats.entrylog import ENTRY_SIZE, SIZE_PREFIX_SIZE
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import RECORD_LENGTH, SCOPED_PREFIX_SIZE, RecordKind, classify_body
from bkdisk.journal.arrays import JournalArrays
from bkdisk.journal.reader import EndKind

# The jitted scanners (numba) load when a dump runs, not for --help.
journal_scan = lazy_import("bkdisk.journal.scan")
entrylog_scan = lazy_import("bkdisk.entrylogs.scan")
map_check = lazy_import("bkdisk.entrylogs.map_check")

SIGNED_MAX = (1 << 63) - 1
RECORD_PREFIX = RECORD_LENGTH.sizeof()   # a journal record's length prefix
SIZE_PREFIX = ENTRY_SIZE.sizeof()        # an entry-log record's size prefix

JOURNAL_KIND_NAME = {
    RecordKind.DATA: "entry", RecordKind.LEDGER_KEY: "master_key", RecordKind.FENCE: "fence",
    RecordKind.FORCE_LEDGER: "force_ledger", RecordKind.EXPLICIT_LAC: "explicit_lac",
    RecordKind.UNKNOWN_META: "other",
}


class _WholeSummaries(click.Group):
    """A group whose command list gives each command's whole first sentence, wrapped, not cut at the
    terminal's width minus the names ("its...")."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=1000)) for name, cmd in
                ((n, self.get_command(ctx, n)) for n in self.list_commands(ctx)) if cmd is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_WholeSummaries, context_settings=HELP_OPTIONS)
def dump() -> None:
    """Print BookKeeper files as `bookkeeper shell` prints them (or as JSON lines).

    Text output is BookieShell's, byte for byte; --json prints one object per record (schemas in
    specs/schemas/). A damaged file prints everything readable, then one line naming the file and
    offset on stderr, and exits 8.

    \b
    Examples:
      bkdisk dump journal /mnt/bk/journal/current/18b2c3d4e5f.txn --msg
      bkdisk dump entrylog /mnt/bk/ledgers/current/0.log --metadata
      bkdisk dump index /mnt/bk --ledger-id 0x1234          (a bookie root: its index is found)
      bkdisk dump lastmark /mnt/bk
      bkdisk dump metadata ./metadata/1234.bin --json
    """


# --------------------------------------------------------------------------------------------
# journal


def _journal_end_error(scan: JournalArrays) -> FormatError | None:
    if scan.size < scan.header_size:   # (BookKeeper positions its read past the header: no record, no error)
        return FormatError(f"a V{scan.version} journal's {scan.header_size}-byte header (magic, version, zeros to "
                           "its end)", f"{scan.size} bytes: the file ends inside it", path=scan.path,
                           offset=scan.size)
    if scan.end_kind in (EndKind.CLEAN, EndKind.EOF):
        return None
    expected = {
        EndKind.TORN: "a complete record (length prefix and that many body bytes)",
        EndKind.INVALID: "a record length > 0, a padding record (V5+) or a well-formed record body",
        EndKind.GARBAGE: "only zeros after the zero length that ends the journal",
    }[scan.end_kind]
    return FormatError(expected, scan.end_detail, path=scan.path, offset=scan.end_offset)


def _journal_json(scan: JournalArrays, r, body: bytes) -> dict[str, Any]:
    o: dict[str, Any] = {
        "file": scan.path, "journal_id": scan.journal_id, "journal_version": scan.version,
        "offset": r.offset, "size": r.length, "kind": JOURNAL_KIND_NAME[r.kind],
        "scope": r.scope_id, "ledger": r.ledger_id, "entry": r.entry_id,
    }
    base = body[SCOPED_PREFIX_SIZE:] if r.scoped else body
    if r.kind == RecordKind.DATA:
        o["last_add_confirmed"] = read_field(ENTRY_V1_HEADER, "last_add_confirmed", base)
        o["length"] = read_field(ENTRY_V1_HEADER, "length", base)
    elif r.kind == RecordKind.LEDGER_KEY:
        o["master_key"] = (r.master_key or b"").hex()
    elif r.kind == RecordKind.EXPLICIT_LAC:
        o["explicit_lac"] = r.explicit_lac
    return o


RECORD_HEAD_MAX = 1 << 16   # bytes of a record read when its payload is not printed
MSG_PART = 1 << 20          # bytes of a payload read and printed at once


def _rest(read: BodyReader, start: int, n: int, size: int) -> Iterator[bytes]:
    """The bytes of a record of ``size`` bytes at ``start`` after its first ``n``, MSG_PART at a time
    (to the file's end at most: a length that says more is the scan's error to report)."""
    at, end = start + n, start + size
    while at < end:
        part = read(at, min(MSG_PART, end - at))
        if not part:
            return
        yield part
        at += len(part)


@dump.command("journal")
@click.argument("path")
@msg_options
@json_option
@ledger_options
@one_line_errors
def journal_cmd(path: str, msg: bool, entry_format: str, as_json: bool, ledger: LedgerId | None) -> None:
    """A journal file (.txn): `bookkeeper shell readjournal <id>`."""
    p = regular_path(path)
    expect_kind(p, "journal")
    # The windowed scanner finds the records; each body is then read on its own, so memory follows
    # the largest record, not the size of the journal.
    scan = journal_scan.scan_journal(p)
    out = Out()
    recs = scan.records[scan.records["kind"] != int(RecordKind.PADDING)]
    if not as_json:
        out.text(sf.journal_scan_header(scan.journal_id, os.path.basename(p)))
        if len(recs):
            out.text(sf.journal_version_line(scan.version))
    with BodyReader(p) as read:
        for off, size, scope, lid in zip(recs["offset"].tolist(), recs["size"].tolist(), recs["scope"].tolist(),
                                         recs["ledger"].tolist()):
            if not matches(ledger, scope, lid):
                continue
            # Every field a dump shows lies in a record's first bytes; the payload is read only to print
            # it, a part at a time (a record's length may say gigabytes).
            n = min(size, MSG_PART if (msg and not as_json) else RECORD_HEAD_MAX)
            body = read(off + RECORD_PREFIX, n)
            r = classify_body(body, offset=off, path=p)
            if n < size:
                r = dataclasses.replace(r, length=size)
            if as_json:
                out.obj(_journal_json(scan, r, body))
            else:
                for part in sf.entry_block_parts(r.offset, body, print_msg=msg, entry_format=entry_format,
                                                 scope=r.scope_id if r.scoped else None, size=size,
                                                 more=_rest(read, off + RECORD_PREFIX, n, size)):
                    out.text(part)
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


def _entry_log_error(scan, read) -> FormatError | None:
    if scan.header_error is not None:
        return scan.header_error
    if len(scan.problems):
        pr = scan.problems[0]
        off, reason, resumed = int(pr["offset"]), Damage(int(pr["reason"])), int(pr["resumed_at"])
        found = (f"size {read_value(ENTRY_SIZE, read(off, SIZE_PREFIX))}"
                 if off + SIZE_PREFIX <= scan.size else f"{scan.size - off} bytes")
        return FormatError(_DAMAGE_EXPECTED[reason], f"{found} ({reason.name.lower()}; next entry at {resumed})",
                           path=scan.path, offset=off)
    if scan.map_error is not None:
        return scan.map_error
    return _impossible_map(scan)


def _impossible_map(scan) -> FormatError | None:
    """A ledgers map that parses yet is true of no entries (BookKeeper's shell prints it as it is, and so
    does the dump): damage all the same, said once the dump is out."""
    claims = map_check.impossible_claims(scan)
    if not claims:
        return None
    return FormatError("a ledgers map true of the entries before it", f"one that {' and '.join(claims)}",
                       path=scan.path, offset=scan.header.ledgers_map_offset)


def _entries(scan) -> list[EntryRecord]:
    """The scanner's entry rows as the records the text and JSON builders read."""
    e = scan.entries
    return [EntryRecord(*row) for row in zip(*(e[c].tolist() for c in ("offset", "size", "format", "scope", "ledger",
                                                                   "entry", "lac", "length")))]


def entry_log_metadata(scan) -> tuple[str, list[tuple[int, int, int]], int]:
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
        m = JavaLongLongMap()
        try:
            total = 0
            for (_s, lid), size in lm.items():
                total += size
                m.add(lid if lid <= SIGNED_MAX else lid - (1 << 64), size)
            return "ledgers_map", [(0, k, v) for k, v in m.items()], total
        except ValueError:
            pass
    m = JavaLongLongMap()
    scoped: dict[tuple[int, int], int] = {}
    total = 0
    for r in _entries(scan):
        if r.format_version == 1:
            if r.ledger_id <= SIGNED_MAX:
                m.add(r.ledger_id, r.size + SIZE_PREFIX_SIZE)
                total += r.size + SIZE_PREFIX_SIZE
        else:
            scoped[(r.scope_id, r.ledger_id)] = scoped.get((r.scope_id, r.ledger_id), 0) + r.size + SIZE_PREFIX_SIZE
    items = [(0, k, v) for k, v in m.items()] + [(s, l, v) for (s, l), v in scoped.items()]
    return "scan", items, total + sum(scoped.values())


def _entry_json(scan, r: EntryRecord) -> dict[str, Any]:
    return {"file": scan.path, "log_id": scan.log_id, "offset": r.offset, "size": r.size, "kind": "entry",
            "format_version": r.format_version, "scope": r.scope_id, "ledger": r.ledger_id, "entry": r.entry_id,
            "last_add_confirmed": r.last_add_confirmed, "length": r.length}


@dump.command("entrylog")
@click.argument("path")
@click.option("--metadata", is_flag=True, help="Per-ledger sizes, like `bookkeeper shell readlogmetadata`.")
@click.option("--entry-id", type=int, default=None, help="With a ledger option: only this entry (readlog -e).")
@msg_options
@json_option
@ledger_options
@one_line_errors
def entrylog_cmd(path: str, metadata: bool, entry_id: int | None, msg: bool, entry_format: str, as_json: bool,
                 ledger: LedgerId | None) -> None:
    """An entry log (.log): `bookkeeper shell readlog <id>` (or `readlogmetadata <id>`)."""
    if entry_id is not None and ledger is None:
        raise click.UsageError("--entry-id needs --ledger-id or --ledger-qualified-name")
    p = regular_path(path)
    expect_kind(p, "entrylog")
    scan = entrylog_scan.scan_entry_log(p)   # windowed: memory follows the entries, not the file's size
    with BodyReader(p) as read:
        name = os.path.basename(p)
        out = Out()
        if metadata:
            source, items, total = entry_log_metadata(scan)
            shown = [(s, l, v) for s, l, v in items if matches(ledger, s, l)]
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
            for r in _entries(scan):
                if not matches(ledger, r.scope_id, r.ledger_id):
                    continue
                if entry_id is not None and (found or r.entry_id != entry_id):
                    continue
                found = True
                if as_json:
                    out.obj(_entry_json(scan, r))
                else:
                    n = min(r.size, MSG_PART if msg else RECORD_HEAD_MAX)
                    body = read(r.offset + SIZE_PREFIX, n)
                    for part in sf.entry_block_parts(r.offset, body, print_msg=msg, entry_format=entry_format,
                                                     scope=r.scope_id if r.format_version == 2 else None, size=r.size,
                                                     more=_rest(read, r.offset + SIZE_PREFIX, n, r.size)):
                        out.text(part)
            if lid_text is not None and not found and not as_json:
                out.text(sf.entry_log_not_found(scan.log_id, name, lid_text, entry_id))
        out.flush()
        err = _entry_log_error(scan, read)
    if err is not None:
        raise err


# The commands of bkdisk/dump/state.py and db_storage.py (DbLedgerStorage: it loads the RocksDB reader
# only when run) join the group.
for _name in ("index", "lastmark", "cookie", "metadata"):
    dump.add_command(getattr(state, f"{_name}_cmd"), _name)
for _name, _cmd in db_storage.COMMANDS.items():
    dump.add_command(_cmd, _name)
