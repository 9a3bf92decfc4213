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
import math
import re
from decimal import Decimal
from typing import Iterable

from formats.ids import LedgerId, to_signed64

BLOCK_DASHES = "---------"
META_KEY_ENTRY = -0x1000
META_FENCE_ENTRY = -0x2000
ENTRY_HEADER = 32            # ledgerId, entryId, lastAddConfirmed, length
SCOPED_ENTRY_HEADER = 41     # BP-35 flags byte + scope id in front of the 32 bytes

ENTRY_FORMATS = ("string", "hex")


# --------------------------------------------------------------------------------------------
# Java scalars


def java_long(v: int) -> int:
    """An unsigned or Python int as Java prints a ``long`` (two's complement, 64 bits)."""
    return to_signed64(v & ((1 << 64) - 1))


def ledger_text(ledger: int | LedgerId, scope: int = 0) -> str:
    """``LongLedgerIdFormatter``: ``Long.toString(id)``; a BP-35 scoped ledger by its qualified name."""
    if isinstance(ledger, LedgerId):
        scope, ledger = ledger
    return str(java_long(ledger)) if scope == 0 else LedgerId(scope, ledger).qualified_name


def bytes2hex(data: bytes) -> str:
    """``FormatUtil.bytes2Hex``: ``%02x`` per byte."""
    return bytes(data).hex()


def java_double(x: float) -> str:
    """``Double.toString``: shortest round-trip digits (JDK 19+), plain between 10^-3 and 10^7,
    else ``d.dddE<n>``."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0.0"
    t = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, t.digits))
    exp10 = len(digits) - 1 + int(t.exponent)
    digits = digits.rstrip("0") or "0"
    if 1e-3 <= abs(x) < 1e7:
        if exp10 >= 0:
            ip = digits[:exp10 + 1].ljust(exp10 + 1, "0")
            fp = digits[exp10 + 1:] or "0"
        else:
            ip, fp = "0", "0" * (-exp10 - 1) + digits
        return f"{sign}{ip}.{fp}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp10}"


# --------------------------------------------------------------------------------------------
# entry formatters


_ASCII_RUN = re.compile(rb"[\x00-\x7f]+")
REPL = "\ufffd"


def java_utf8_decode(data: bytes) -> str:
    """``new String(data, UTF_8)``: JDK's ``String.decodeUTF8_UTF16`` with its replacement rules.

    Java replaces malformed input differently from Python's ``errors='replace'`` in a few
    cases (truncated sequences at the end, surrogates), so this is a port, not a codec call.
    """
    b = bytes(data)
    n = len(b)
    out: list[str] = []
    sp = 0
    while sp < n:
        m = _ASCII_RUN.match(b, sp)
        if m:
            out.append(m.group().decode("ascii"))
            sp = m.end()
            if sp >= n:
                break
        b1 = b[sp]
        sp += 1
        if b1 >> 5 == 0b110 and (b1 & 0x1E) != 0:
            if sp < n:
                b2 = b[sp]
                sp += 1
                if (b2 & 0xC0) != 0x80:
                    out.append(REPL)
                    sp -= 1
                else:
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                continue
            out.append(REPL)
            break
        if b1 >> 4 == 0b1110:
            if sp + 1 < n:
                b2, b3 = b[sp], b[sp + 1]
                sp += 2
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or (b2 & 0xC0) != 0x80 or (b3 & 0xC0) != 0x80:
                    out.append(REPL)
                    sp -= 3
                    sp += 1 if ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or (b2 & 0xC0) != 0x80) else 2
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(REPL if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < n and ((b1 == 0xE0 and (b[sp] & 0xE0) == 0x80) or (b[sp] & 0xC0) != 0x80):
                out.append(REPL)
                continue
            out.append(REPL)
            break
        if b1 >> 3 == 0b11110:
            if sp + 2 < n:
                b2, b3, b4 = b[sp], b[sp + 1], b[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if (b2 & 0xC0) != 0x80 or (b3 & 0xC0) != 0x80 or (b4 & 0xC0) != 0x80 \
                        or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(REPL)
                    sp -= 4
                    sp += _malformed4(b, sp)
                else:
                    out.append(chr(uc))
                continue
            if b1 > 0xF4 or (sp < n and _malformed4_2(b1, b[sp])):
                out.append(REPL)
                continue
            sp += 1
            out.append(REPL)
            if sp < n and (b[sp] & 0xC0) != 0x80:
                continue
            break
        out.append(REPL)
    return "".join(out)


def _malformed4_2(b1: int, b2: int) -> bool:
    return (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF)) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) \
        or (b2 & 0xC0) != 0x80


def _malformed4(b: bytes, sp: int) -> int:
    b1, b2 = b[sp], b[sp + 1]
    if b1 > 0xF4 or (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF)) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) \
            or (b2 & 0xC0) != 0x80:
        return 1
    if (b[sp + 2] & 0xC0) != 0x80:
        return 2
    return 3


def string_entry(data: bytes) -> str:
    """``StringEntryFormatter.formatEntry``: the bytes as UTF-8, then a newline."""
    return java_utf8_decode(data) + "\n"


def hexdump(data: bytes, offset: int = 0) -> str:
    """commons-io ``HexDump.dump(data, offset, out, 0)``: 16 bytes a line, uppercase hex.

    An empty array makes HexDump throw; ``HexDumpEntryFormatter`` prints the exception instead.
    """
    b = bytes(data)
    if not b:
        return ("Warn: Index is outside the data array's bounds : illegal index: 0 into array of length 0\n")
    lines = []
    for j in range(0, len(b), 16):
        chunk = b[j:j + 16]
        hexpart = "".join(f"{c:02X} " for c in chunk) + "   " * (16 - len(chunk))
        text = "".join(chr(c) if 0x20 <= c < 0x7F else "." for c in chunk)
        lines.append(f"{(offset + j) & 0xFFFFFFFF:08X} {hexpart}{text}\n")
    return "".join(lines)


def format_payload(data: bytes, entry_format: str) -> str:
    return hexdump(data) if entry_format == "hex" else string_entry(data)


# --------------------------------------------------------------------------------------------
# FormatUtil.formatEntry


def entry_block(pos: int, body: bytes, *, print_msg: bool = False, entry_format: str = "string",
                scope: int | None = None) -> str:
    """One ``FormatUtil.formatEntry`` block for a record body (journal) or stored entry (entry log).

    ``pos`` is the offset of the record's 4-byte size prefix. Any entry id other than the
    ledger-key and fence markers prints as DATA with ``LastConfirmed`` read at body bytes
    16..23, which for an explicit-LAC journal record is the int length of the LAC body followed
    by the first 4 bytes of that body, exactly as BookKeeper prints it. With ``scope`` (a BP-35
    scoped record, which BookKeeper cannot read) the 9-byte prefix is skipped and the ledger is
    named by its qualified name.
    """
    b = bytes(body)
    size = len(b)
    base = b[9:] if scope is not None else b
    ledger = int.from_bytes(base[0:8], "big")
    entry = int.from_bytes(base[8:16], "big", signed=True)
    lid = ledger_text(ledger, scope or 0)
    out = [f"{BLOCK_DASHES} Lid={lid}, Eid={entry}, ByteOffset={pos}, EntrySize={size} {BLOCK_DASHES}\n"]
    if entry == META_KEY_ENTRY:
        klen = int.from_bytes(base[16:20], "big", signed=True)
        out.append("Type:           META\n")
        out.append(f"MasterKey:      {bytes2hex(base[20:20 + max(klen, 0)])}\n")
        out.append("\n")
        return "".join(out)
    if entry == META_FENCE_ENTRY:
        out.append("Type:           META\nFenced\n\n")
        return "".join(out)
    lac = int.from_bytes(base[16:24], "big", signed=True)
    out.append("Type:           DATA\n")
    out.append(f"LastConfirmed:  {lac}\n")
    if not print_msg:
        out.append("\n")
        return "".join(out)
    out.append("Data:\n\n")
    out.append(format_payload(base[ENTRY_HEADER:], entry_format))
    out.append("\n")
    return "".join(out)


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


def ledger_index_entries_text(ledger: str, locations: Iterable[int]) -> str:
    """``LedgerCommand``'s page listing: one line per slot, ``N/A`` for an empty one."""
    out = [f"===== LEDGER: {ledger} =====\n"]
    for i, loc in enumerate(locations):
        loc = int(loc)
        if loc == 0:
            out.append(f"entry {i}\t:\tN/A\n")
        else:
            out.append(f"entry {i}\t:\t(log:{loc >> 32}, pos: {loc & 0xFFFFFFFF})\n")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Java collections' iteration order


_MIX = 0xC6A4A7935BD1E995
_U64 = (1 << 64) - 1
_FILL = 0.6600000262260437  # (double) 0.66f


def _cllhm_hash(key: int) -> int:
    h = (key * _MIX) & _U64
    h ^= h >> 47
    return (h * _MIX) & _U64


def _align_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length()) if n > 1 else 1


class JavaLongLongMap:
    """``ConcurrentLongLongHashMap(expectedItems=256, concurrencyLevel=1)`` as EntryLogMetadata builds it:
    open addressing with linear probing, expansion at 66% use, ``forEach`` in bucket order.

    ``add`` is ``addAndGet``; like Java it refuses negative keys and negative results (ValueError).
    """

    def __init__(self, expected: int = 256, sections: int = 1):
        if sections != 1:
            raise ValueError("only one section is modelled")
        self.capacity = _align_pow2(int(expected / _FILL))
        self.keys: list[int | None] = [None] * self.capacity
        self.values: list[int] = [0] * self.capacity
        self.used = 0
        self.threshold = int(self.capacity * _FILL)

    def add(self, key: int, delta: int) -> int:
        if key < 0:
            raise ValueError("Keys and values must be >= 0")
        cap = self.capacity
        b = _cllhm_hash(key) & (cap - 1)
        try:
            while True:
                k = self.keys[b]
                if k == key:
                    nv = self.values[b] + delta
                    if nv < 0:
                        raise ValueError("Keys and values must be >= 0")
                    self.values[b] = nv
                    return nv
                if k is None:
                    if delta < 0:
                        raise ValueError("Keys and values must be >= 0")
                    self.keys[b], self.values[b] = key, delta
                    self.used += 1
                    return delta
                b = (b + 1) & (cap - 1)
        finally:
            if self.used > self.threshold:
                self._rehash(_align_pow2(int(self.capacity * 2.0)))

    def _rehash(self, cap: int) -> None:
        keys: list[int | None] = [None] * cap
        values = [0] * cap
        for k, v in zip(self.keys, self.values):
            if k is None:
                continue
            b = _cllhm_hash(k) & (cap - 1)
            while keys[b] is not None:
                b = (b + 1) & (cap - 1)
            keys[b], values[b] = k, v
        self.keys, self.values, self.capacity = keys, values, cap
        self.threshold = int(cap * _FILL)

    def items(self) -> list[tuple[int, int]]:
        return [(k, v) for k, v in zip(self.keys, self.values) if k is not None]

    def __len__(self) -> int:
        return self.used


def java_string_hash(s: str) -> int:
    """``String.hashCode`` over UTF-16 code units, as an unsigned 32-bit value."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.HashMap`` filled with ``keys`` in that order (no treeified bins)."""
    table: list[list[str]] = [[] for _ in range(16)]
    size = 0
    for k in keys:
        h = java_string_hash(k)
        h ^= h >> 16
        bucket = table[h & (len(table) - 1)]
        if k in bucket:
            continue
        bucket.append(k)
        size += 1
        if size > int(len(table) * 0.75):
            new: list[list[str]] = [[] for _ in range(len(table) * 2)]
            for bk in table:
                for key in bk:
                    hh = java_string_hash(key)
                    hh ^= hh >> 16
                    new[hh & (len(new) - 1)].append(key)
            table = new
    return [k for bk in table for k in bk]


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
