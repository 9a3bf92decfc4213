"""Text exactly as BookKeeper's shell prints it (4.17 message text, no log4j prefix), and the Java
behaviour that text depends on: signed ``long`` ids, ``new String(bytes, UTF_8)``, commons-io
``HexDump``, ``ConcurrentLongLongHashMap`` and ``HashMap`` iteration order, ``Double.toString``.

Sources (apache/bookkeeper, tools/cli/commands/bookie/): FormatUtil.formatEntry and bytes2Hex,
ReadJournalCommand, ReadLogCommand, ReadLogMetadataCommand, LedgerCommand, LastMarkCommand;
util/StringEntryFormatter, util/HexDumpEntryFormatter; bookie/EntryLogMetadata;
util/collections/ConcurrentLongLongHashMap; meta/LedgerMetadataImpl.toStringRepresentation.
Every function returns text (``str``); lines end with ``\\n`` like ``println``. Callers encode
the text as UTF-8, the charset BookKeeper's stdout used for the golden outputs.
"""
from __future__ import annotations

import base64
import binascii
import itertools
from collections.abc import Iterable, Iterator

import numpy as np

from bkdisk.dump.java_compat import (
    java_double,
    java_hashmap_order,
    java_long,
    java_utf8_decode,
)
from bkdisk.formats.codec import field_offset, read_field
from bkdisk.formats.entry import ENTRY_V1_HEADER, ENTRY_V1_HEADER_SIZE
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.journal import (
    LEDGER_KEY_BODY,
    META_FENCE,
    META_LEDGER_KEY,
    SCOPED_PREFIX_SIZE,
)

BLOCK_DASHES = "---------"

ENTRY_FORMATS = ("string", "hex")


# --------------------------------------------------------------------------------------------
# Java scalars


def ledger_text(ledger: int | LedgerId, scope: int = 0) -> str:
    """``LongLedgerIdFormatter``: ``Long.toString(id)``; a BP-35 scoped ledger by its qualified name."""
    if isinstance(ledger, LedgerId):
        scope, ledger = ledger
    return str(java_long(ledger)) if scope == 0 else LedgerId(scope, ledger).qualified_name


def bytes2hex(data: bytes) -> str:
    """``FormatUtil.bytes2Hex``: ``%02x`` per byte."""
    return bytes(data).hex()


# --------------------------------------------------------------------------------------------
# entry formatters


def string_entry(data: bytes) -> str:
    """``StringEntryFormatter.formatEntry``: the bytes as UTF-8, then a newline."""
    return java_utf8_decode(data) + "\n"


# commons-io HexDump's character column, by byte value: printable ASCII as itself, any other byte as '.'
_HEXDUMP_TEXT = bytes(c if 0x20 <= c < 0x7F else ord(".") for c in range(256))
_BYTE_SHIFTS = np.arange(24, -1, -8, dtype=np.uint32)    # a line offset's 4 bytes, most significant first


def hexdump(data: bytes, offset: int = 0) -> str:
    """commons-io ``HexDump.dump(data, offset, out, 0)``: 16 bytes a line, uppercase hex.

    An empty array makes HexDump throw; ``HexDumpEntryFormatter`` prints the exception instead.
    The lines are laid out together, a row of 74 characters each (offset, space, 16 x "XX ", 16
    characters, newline), each column made for every line at once (binascii, bytes.translate); on the
    last line the hex of missing bytes is blank and their characters are cut off with the row.
    """
    b = bytes(data)
    if not b:
        return ("Warn: Index is outside the data array's bounds : illegal index: 0 into array of length 0\n")
    n, tail = -(-len(b) // 16), (len(b) - 1) % 16 + 1     # lines; bytes on the last (1..16)
    b += bytes(16 - tail)
    at = np.arange(n, dtype=np.uint32) * np.uint32(16) + np.uint32(offset & 0xFFFFFFFF)   # HexDump prints 32 bits
    rows = np.empty((n, 74), np.uint8)
    rows[:, :8] = np.frombuffer(binascii.hexlify((at[:, None] >> _BYTE_SHIFTS).astype(np.uint8).data).upper(),
                                np.uint8).reshape(n, 8)
    rows[:, 8] = ord(" ")
    rows[:, 9:57] = np.frombuffer(binascii.hexlify(b, " ").upper() + b" ", np.uint8).reshape(n, 48)
    rows[:, 57:73] = np.frombuffer(b.translate(_HEXDUMP_TEXT), np.uint8).reshape(n, 16)
    rows[:, 73] = ord("\n")
    rows[-1, 9 + 3 * tail:57] = ord(" ")
    rows[-1, 57 + tail] = ord("\n")
    return str(rows.reshape(-1)[:(n - 1) * 74 + 58 + tail].data, "ascii")


def format_payload(data: bytes, entry_format: str) -> str:
    return hexdump(data) if entry_format == "hex" else string_entry(data)


def payload_parts(chunks: Iterable[bytes], entry_format: str) -> Iterator[str]:
    """``format_payload`` of the chunks' bytes joined, a part at a time, each part cut where the whole's
    text is cut the same (hex: at 16 bytes; UTF-8: before a byte that begins a character), so that a
    payload of gigabytes is printed without holding its text."""
    carry, at, total = b"", 0, 0
    for chunk in chunks:
        data = carry + bytes(chunk)
        total += len(chunk)
        cut = len(data) - len(data) % 16 if entry_format == "hex" else _utf8_cut(data)
        if cut:
            yield hexdump(data[:cut], at) if entry_format == "hex" else java_utf8_decode(data[:cut])
            at += cut
        carry = data[cut:]
    if entry_format != "hex":
        yield java_utf8_decode(carry) + "\n"
    elif carry or not total:
        yield hexdump(carry, at)


def _utf8_cut(data: bytes) -> int:
    """Where ``data`` may be cut without cutting a character: before its last byte within 4 of its end
    that is not a continuation byte (10xxxxxx); at its end when none is (those bytes are strays)."""
    for i in range(len(data) - 1, max(len(data) - 5, -1), -1):
        if data[i] & 0xC0 != 0x80:
            return i
    return len(data)


# --------------------------------------------------------------------------------------------
# FormatUtil.formatEntry


def entry_block(pos: int, body: bytes, *, print_msg: bool = False, entry_format: str = "string",
                scope: int | None = None, size: int | None = None) -> str:
    return "".join(entry_block_parts(pos, body, print_msg=print_msg, entry_format=entry_format, scope=scope,
                                     size=size))


def entry_block_parts(pos: int, body: bytes, *, print_msg: bool = False, entry_format: str = "string",
                      scope: int | None = None, size: int | None = None, more: Iterable[bytes] = ()) -> Iterator[str]:
    """One ``FormatUtil.formatEntry`` block for a record body (journal) or stored entry (entry log).

    ``pos`` is the offset of the record's 4-byte size prefix. Any entry id other than the
    ledger-key and fence markers prints as DATA with ``LastConfirmed`` read at body bytes
    16..23, which for an explicit-LAC journal record is the int length of the LAC body followed
    by the first 4 bytes of that body, exactly as BookKeeper prints it. With ``scope`` (a BP-35
    scoped record, which BookKeeper cannot read) the 9-byte prefix is skipped and the ledger is
    named by its qualified name. ``size``: the record's length when ``body`` holds only its head;
    ``more``: the bytes after ``body``, in order, when the payload is printed (``payload_parts``).
    """
    b = bytes(body)
    size = len(b) if size is None else size   # ``body`` may be the record's head only
    base = b[SCOPED_PREFIX_SIZE:] if scope is not None else b
    ledger = read_field(ENTRY_V1_HEADER, "ledger_id", base)
    entry = read_field(ENTRY_V1_HEADER, "entry_id", base)
    lid = ledger_text(ledger, scope or 0)
    out = [f"{BLOCK_DASHES} Lid={lid}, Eid={entry}, ByteOffset={pos}, EntrySize={size} {BLOCK_DASHES}\n"]
    if entry == META_LEDGER_KEY:
        klen = read_field(LEDGER_KEY_BODY, "key_length", base)
        key_at = field_offset(LEDGER_KEY_BODY, "master_key")
        out.append("Type:           META\n")
        out.append(f"MasterKey:      {bytes2hex(base[key_at:key_at + max(klen, 0)])}\n")
        out.append("\n")
        yield "".join(out)
        return
    if entry == META_FENCE:
        out.append("Type:           META\nFenced\n\n")
        yield "".join(out)
        return
    lac = read_field(ENTRY_V1_HEADER, "last_add_confirmed", base)
    out.append("Type:           DATA\n")
    out.append(f"LastConfirmed:  {lac}\n")
    if not print_msg:
        out.append("\n")
        yield "".join(out)
        return
    out.append("Data:\n\n")
    yield "".join(out)
    yield from payload_parts(itertools.chain([base[ENTRY_V1_HEADER_SIZE:]], more), entry_format)
    yield "\n"


# --------------------------------------------------------------------------------------------
# command headers and one-liners


def journal_scan_header(journal_id: int | None, name: str) -> str:
    """``ReadJournalCommand.scanJournal``'s first line."""
    if journal_id is None:
        return f"Scan journal ? ({name})\n"
    return f"Scan journal {journal_id} ({journal_id:x}.txn)\n"


def journal_version_line(version: int) -> str:
    """Printed once, before the first record (never for a journal without records)."""
    return f"Journal Version : {version}\n"


def entry_log_scan_header(log_id: int | None, name: str, ledger: str | None = None,
                          entry: int | None = None) -> str:
    """``ReadLogCommand``: ``Scan entry log {id} ({hex}.log)`` [`` for LedgerId l [for EntryId e]``]."""
    head = f"Scan entry log {log_id} ({log_id:x}.log)" if log_id is not None else f"Scan entry log ? ({name})"
    if ledger is not None:
        head += f" for LedgerId {ledger}" + ("" if entry is None else f" for EntryId {entry}")
    return head + "\n"


def entry_log_not_found(log_id: int | None, name: str, ledger: str, entry: int | None = None) -> str:
    where = f"{log_id} ({log_id:x}.log)" if log_id is not None else f"? ({name})"
    return f"LedgerId {ledger}" + ("" if entry is None else f" EntryId {entry}") + \
        f" is not available in the entry log {where}\n"


def entry_log_metadata_text(log_id: int | None, name: str, remaining: int, total: int,
                            ledgers: Iterable[tuple[str, int]]) -> str:
    """``ReadLogMetadataCommand.printEntryLogMetadata``; ``ledgers`` in the map's iteration order."""
    lid = str(log_id) if log_id is not None else "?"
    hexname = f"{log_id:x}.log" if log_id is not None else name
    usage = 0.0 if total == 0 else remaining / total
    out = [f"Print entryLogMetadata of entrylog {lid} ({hexname})\n",
           f"entryLogId: {lid}, remaining size: {remaining}, total size: {total}, usage: {java_double(usage)}\n"]
    for text, size in ledgers:
        out.append(f"{BLOCK_DASHES} Lid={text}, TotalSizeOfEntriesOfLedger={size}  {BLOCK_DASHES}\n")
    return "".join(out)


def last_mark_line(log_id: int, offset: int) -> str:
    """``LastMarkCommand``: one line per journal dir."""
    return f"LastLogMark : Journal Id - {log_id}({log_id & ((1 << 64) - 1):x}.txn), Pos - {offset}\n"


def ledger_index_meta_text(ledger: str, master_key: bytes | None, size: int, fenced: bool) -> str:
    """``LedgerCommand.printMeta`` (``ledger -m``); ``size`` is the .idx size minus its 1024-byte header."""
    key = "NULL" if master_key is None else bytes2hex(master_key)
    out = [f"===== LEDGER: {ledger} =====\n", f"master key  : {key}\n"]
    if size % 8 == 0:
        out.append(f"size         : {size}\n")
    else:
        out.append(f"size : {size}(not aligned with 8, may be corrupted or under flushing now)\n")
    out.append(f"entries      : {size // 8}\n")
    out.append(f"isFenced     : {'true' if fenced else 'false'}\n")
    return "".join(out)


def ledger_index_header_line(ledger: str) -> str:
    return f"===== LEDGER: {ledger} =====\n"


def ledger_index_slot_lines(slots: int, entries, logs, positions, chunk: int = 1 << 16) -> Iterator[str]:
    """``LedgerCommand``'s page listing of ``slots`` slots, one line each, ``N/A`` for an empty one; the
    present slots come as sorted arrays (entry, log, pos). Yields text ``chunk`` slots at a time."""
    present = {int(e): (int(lg), int(p)) for e, lg, p in zip(entries, logs, positions)}
    for start in range(0, slots, chunk):
        lines = []
        for i in range(start, min(slots, start + chunk)):
            loc = present.get(i)
            lines.append(f"entry {i}\t:\tN/A\n" if loc is None else f"entry {i}\t:\t(log:{loc[0]}, pos: {loc[1]})\n")
        yield "".join(lines)


# --------------------------------------------------------------------------------------------
# LedgerMetadata.toString and the cookie


API_DIGEST_NAME = {"CRC32": "CRC32", "HMAC": "MAC", "CRC32C": "CRC32C", "DUMMY": "DUMMY"}


def _b64(data: bytes) -> str:
    return "base64:" + base64.b64encode(bytes(data)).decode("ascii")


def ledger_metadata_text(md) -> str:
    """``LedgerMetadataImpl.toString()`` of metadata read by ``LedgerMetadataSerDe``.

    length/lastEntryId appear only when CLOSED; digestType/password only when the stored form has
    a password (format 1 never has one; an absent digestType reads as the proto default CRC32);
    customMetadata in HashMap order.
    """
    parts = [f"formatVersion={md.format_version}", f"ensembleSize={md.ensemble_size}",
             f"writeQuorumSize={md.write_quorum}", f"ackQuorumSize={md.ack_quorum}", f"state={md.state}"]
    if md.state == "CLOSED":
        parts += [f"length={md.length}", f"lastEntryId={md.last_entry_id}"]
    if md.password is not None:
        parts.append(f"digestType={API_DIGEST_NAME.get(md.digest_type or 'CRC32', md.digest_type)}")
        parts.append(f"password={_b64(md.password)}")
    ens = ", ".join(f"{first}=[{', '.join(members)}]" for first, members in sorted(md.ensembles))
    parts.append(f"ensembles={{{ens}}}")
    custom = dict(md.custom_metadata)
    order = java_hashmap_order(k for k, _ in md.custom_metadata)
    parts.append("customMetadata={" + ", ".join(f"{k}={_b64(custom[k])}" for k in order) + "}")
    return "LedgerMetadata{" + ", ".join(parts) + "}\n"


def cookie_text(c) -> str:
    """The cookie's fields, one per line, named as in ``CookieFormat``."""
    out = [f"layoutVersion: {c.layout_version}\n", f"bookieHost: {c.bookie_id}\n",
           f"journalDir: {','.join(c.journal_dirs)}\n",
           f"ledgerDirs: {len(c.ledger_dirs)}" + "".join(f"\t{d}" for d in c.ledger_dirs) + "\n"]
    out.append(f"instanceId: {c.instance_id if c.instance_id is not None else '(none)'}\n")
    if c.index_dirs is not None:
        out.append(f"indexDirs: {len(c.index_dirs)}" + "".join(f"\t{d}" for d in c.index_dirs) + "\n")
    return "".join(out)
