"""Java behaviour that BookKeeper's shell text depends on, reproduced: signed ``long``s, ``Double.toString``,
``new String(bytes, UTF_8)``, and the iteration order of ``ConcurrentLongLongHashMap`` and ``HashMap``.

Sources (JDK 17, apache/bookkeeper util/collections/ConcurrentLongLongHashMap). shell_format.py
builds the shell's text on these.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal

from bkdisk.formats.ids import to_signed64


def java_long(v: int) -> int:
    """An unsigned or Python int as Java prints a ``long`` (two's complement, 64 bits)."""
    return to_signed64(v & ((1 << 64) - 1))


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
