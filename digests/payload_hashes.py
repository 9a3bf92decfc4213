"""Payload hashes as arrays: one 32-byte SHA-256 row per entry and whether the entry has one.

A bookie of small entries has tens of millions of entries; a hex ``str`` per entry costs ~100 bytes
of Python heap each, so the hashes stay an (n, 32) uint8 array from the hashing to the rows, and
the hex text is written from it in bulk (``hex_ascii``).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

HASH_BYTES = 32
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


@dataclass(eq=False)
class PayloadHashes:
    """``raw[i]``: entry i's payload SHA-256 where ``present[i]`` (zeros elsewhere: payload unknown)."""

    raw: np.ndarray       # (n, 32) uint8
    present: np.ndarray   # (n,) bool

    @classmethod
    def empty(cls, n: int = 0) -> PayloadHashes:
        return cls(np.zeros((n, HASH_BYTES), np.uint8), np.zeros(n, bool))

    @classmethod
    def concat(cls, parts: Sequence[PayloadHashes]) -> PayloadHashes:
        if not parts:
            return cls.empty()
        return cls(np.concatenate([p.raw for p in parts]), np.concatenate([p.present for p in parts]))

    def __len__(self) -> int:
        return len(self.present)

    def __eq__(self, other) -> bool:
        return isinstance(other, PayloadHashes) and np.array_equal(self.present, other.present) \
            and np.array_equal(self.raw, other.raw)

    def __iter__(self) -> Iterator[str | None]:
        """Each entry's hex digest or None (for a few rows: the bulk path is ``hex_ascii``)."""
        for row, ok in zip(self.raw, self.present.tolist()):
            yield row.tobytes().hex() if ok else None

    def put(self, idx: np.ndarray, other: PayloadHashes) -> None:
        """Rows ``idx`` replaced by ``other``'s rows, in order."""
        self.raw[idx] = other.raw
        self.present[idx] = other.present


def hex_ascii(raw: np.ndarray) -> np.ndarray:
    """(m, 64) uint8: each 32-byte row as 64 lowercase hex digits, as ``bytes.hex()`` writes them."""
    raw = np.asarray(raw, np.uint8)
    out = np.empty((len(raw), 2 * HASH_BYTES), np.uint8)
    out[:, 0::2] = _HEX[raw >> 4]
    out[:, 1::2] = _HEX[raw & 15]
    return out


def sha256_payloads(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> PayloadHashes:
    """The SHA-256 of ``buf[start[i]:start[i] + length[i]]`` for every i with ``length[i] >= 0``,
    written into one preallocated array (no object kept per entry)."""
    out = PayloadHashes(np.zeros((len(length), HASH_BYTES), np.uint8), np.asarray(length) >= 0)
    mv, into = buf.data, out.raw.reshape(-1).data   # a view: raw is contiguous
    for i in np.flatnonzero(out.present).tolist():
        a, at = int(start[i]), i * HASH_BYTES
        into[at:at + HASH_BYTES] = hashlib.sha256(mv[a:a + int(length[i])]).digest()
    return out
