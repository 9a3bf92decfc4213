"""JSON Lines from columns at kernel speed: one jitted loop writes every row's text into one buffer.

A row is a fixed template: literal text (keys, separators, values constant for the whole batch)
around value slots. Each slot takes one column of int64s and says how to write it: a signed or
unsigned decimal, a choice from a small table of JSON literals (``"CRC32"``, ``null``, ``true``), a
non-negative decimal or ``null`` for a negative value, or a 32-byte digest as 64 lowercase hex
digits in quotes (or ``null``). The pure-Python twin, ``encode_rows_reference``, is ``json.dumps``
per row; tests hold the two byte-identical.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel

INT, UINT, CHOICE, DIGEST, INT_OR_NULL = 0, 1, 2, 3, 4
DIGEST_BYTES = 32
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_NULL = np.frombuffer(b"null", np.uint8)


@dataclass(frozen=True)
class Slot:
    """One value of the row: its key, how it is written, and (for CHOICE) the JSON of each code."""

    key: str
    kind: int
    choices: tuple[Any, ...] = ()     # CHOICE: Python values, json.dumps'ed; code i -> choices[i]


@inline_kernel
def put_decimal(out, p, v, unsigned):
    if not unsigned and v < 0:
        out[p] = 45  # '-'
        p += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)   # |v| without overflowing at -2**63
    else:
        u = np.uint64(v)
    digits = 1
    t = u
    while t >= np.uint64(10):
        t //= np.uint64(10)
        digits += 1
    q = p + digits - 1
    while True:
        out[q] = 48 + np.uint8(u % np.uint64(10))
        u //= np.uint64(10)
        q -= 1
        if u == np.uint64(0):
            break
    return p + digits


@kernel
def _encode(values, kinds, lit, lit_off, choice, choice_off, choice_base, digests, digest_row, out):
    """Write every row into ``out``; returns the bytes used. ``values`` is (rows, slots) int64."""
    n_rows, n_slots = values.shape
    p = 0
    for r in range(n_rows):
        for s in range(n_slots + 1):
            for i in range(lit_off[s], lit_off[s + 1]):
                out[p] = lit[i]
                p += 1
            if s == n_slots:
                break
            v = values[r, s]
            k = kinds[s]
            if k == 0 or k == 1 or (k == 4 and v >= 0):
                p = put_decimal(out, p, v, k == 1)
            elif k == 4:
                for i in range(4):
                    out[p + i] = _NULL[i]
                p += 4
            elif k == 2:
                c = choice_base[s] + v
                for i in range(choice_off[c], choice_off[c + 1]):
                    out[p] = choice[i]
                    p += 1
            else:
                row = digest_row[r]
                if row < 0:
                    for i in range(4):
                        out[p + i] = _NULL[i]
                    p += 4
                else:
                    out[p] = 34
                    p += 1
                    for i in range(32):
                        b = digests[row, i]
                        out[p] = _HEX[b >> 4]
                        out[p + 1] = _HEX[b & 15]
                        p += 2
                    out[p] = 34
                    p += 1
        out[p] = 10
        p += 1
    return p


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


class RowTemplate:
    """A row's literal text and slots, built once per batch; ``encode`` then writes all rows."""

    def __init__(self, constants: dict[str, Any], slots: Sequence[Slot], order: Sequence[str]):
        """``order`` names every key, constants and slots alike, in the order json.dumps writes them."""
        self.slots = [s for k in order for s in slots if s.key == k]
        pieces: list[bytes] = []
        text = b"{"
        for i, key in enumerate(order):
            text += (b", " if i else b"") + _dumps(key) + b": "
            if key in constants:
                text += _dumps(constants[key])
            else:
                pieces.append(text)
                text = b""
        pieces.append(text + b"}")
        self.lit = np.frombuffer(b"".join(pieces), np.uint8)
        self.lit_off = np.cumsum([0] + [len(x) for x in pieces]).astype(np.int64)
        tables = [[_dumps(c) for c in s.choices] for s in self.slots]
        flat = [t for table in tables for t in table]
        self.choice = np.frombuffer(b"".join(flat) or b" ", np.uint8)
        self.choice_off = np.cumsum([0] + [len(x) for x in flat]).astype(np.int64)
        self.choice_base = np.cumsum([0] + [len(t) for t in tables[:-1]]).astype(np.int64)
        self.kinds = np.array([s.kind for s in self.slots], np.int8)
        widest_choice = [max((len(t) for t in table), default=0) for table in tables]
        self.row_bound = len(self.lit) + 1 + sum(
            21 if s.kind in (INT, UINT, INT_OR_NULL) else w if s.kind == CHOICE else 2 * DIGEST_BYTES + 2
            for s, w in zip(self.slots, widest_choice))

    def encode(self, columns: dict[str, np.ndarray], digests: np.ndarray | None = None,
               digest_row: np.ndarray | None = None) -> bytes:
        """JSON Lines of every row. CHOICE columns hold codes into the slot's choices; DIGEST slots take
        row ``digest_row[r]`` of ``digests`` ((n, 32) uint8), or null where it is -1."""
        return self.encode_view(columns, digests, digest_row).tobytes()

    def encode_view(self, columns: dict[str, np.ndarray], digests: np.ndarray | None = None,
                    digest_row: np.ndarray | None = None) -> np.ndarray:
        """``encode``'s text as a uint8 view of this template's buffer, valid until its next encode: the
        buffers are kept from one batch to the next, so a batch touches no memory it did not before."""
        n = len(next(iter(columns.values()))) if columns else 0
        values = self._buffer("_values", n * len(self.slots), np.int64).reshape(n, len(self.slots))
        for j, s in enumerate(self.slots):
            if s.kind == DIGEST:
                values[:, j] = 0
                continue
            col = np.asarray(columns[s.key])
            if s.kind == CHOICE and n and (col.min() < 0 or col.max() >= len(s.choices)):
                raise ValueError(f"column {s.key} has a code outside its {len(s.choices)} choices")
            values[:, j] = col.view(np.int64) if col.dtype == np.uint64 else col
        if digests is None:
            digests = np.zeros((0, DIGEST_BYTES), np.uint8)
            digest_row = np.full(n, -1, np.int64)
        out = self._buffer("_out", n * self.row_bound, np.uint8)
        used = _encode(values, self.kinds, self.lit, self.lit_off, self.choice, self.choice_off, self.choice_base,
                       np.ascontiguousarray(digests, np.uint8), np.asarray(digest_row, np.int64), out)
        return out[:used]

    def _buffer(self, name: str, n: int, dtype) -> np.ndarray:
        """The first ``n`` items of the buffer kept as ``name``, made larger when too small."""
        buf = getattr(self, name, None)
        if buf is None or len(buf) < n:
            buf = np.empty(n, dtype)
            setattr(self, name, buf)
        return buf[:n]


def encode_rows_reference(rows: list[dict[str, Any]]) -> bytes:
    """The twin: json.dumps of each row, one per line."""
    return b"".join(json.dumps(r).encode("utf-8") + b"\n" for r in rows)
