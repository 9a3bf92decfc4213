"""What the digest checks (digests/verify.py) read of stored entries: their bytes, or first their digest
facts (digests.kernels.entry_facts) where a scan took them while it held the bytes."""
from __future__ import annotations

import numpy as np

from bkdisk.digests.kernels import (
    DIGEST_NEEDS_BYTES,
    FACT_CRC32C,
    FACT_CRC32C_OK,
    SNIFF_CRC32C,
    check_digests,
    check_digests_by_facts,
    sniff_crc,
)
from bkdisk.diskio.config import kernel
from bkdisk.diskio.kernels import as_bytes_array, be_i64
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE, V1_LENGTH_AT, V2_MARKER, V2_PREFIX_SIZE
from bkdisk.formats.entrylog import SIZE_PREFIX_SIZE


class EntryBytes:
    """What the digest checks read of the entries: their bytes (``data``: the bytes, or a callable giving
    them, called once and only when needed), or first their digest facts (digests.kernels.entry_facts)
    where a caller has them: then the bytes are read only for what the facts do not tell."""

    def __init__(self, data, base: int, off: np.ndarray, size: np.ndarray, variant: int, facts=None):
        self._data = data
        self._buf: np.ndarray | None = None
        self.base, self.off, self.size, self.variant, self.facts = base, off, size, variant, facts

    def buf(self) -> np.ndarray:
        if self._buf is None:
            self._buf = as_bytes_array(self._data() if callable(self._data) else self._data)
        return self._buf

    def lengths(self) -> np.ndarray:
        """The entries' cumulative ledger lengths, read from their headers."""
        fmt, length = np.empty(len(self.off), np.uint8), np.empty(len(self.off), np.int64)
        format_and_length(self.buf(), self.base, self.off, fmt, length)
        return length

    def sniff(self, sample: np.ndarray) -> np.ndarray:
        """sniff_crc's result for the entries ``sample`` (indices)."""
        out = np.zeros(len(sample), np.uint8)
        todo = np.arange(len(sample))
        if self.facts is not None:
            ok = (self.facts[sample] & FACT_CRC32C) == FACT_CRC32C_OK
            out[ok] = SNIFF_CRC32C
            # (an entry that fails CRC32C is tried as CRC32 when long enough for its digest)
            todo = np.flatnonzero(~ok & (self.size[sample] >= ENTRY_V1_HEADER_SIZE + DIGEST_LENGTH[DigestType.CRC32C]))
        if len(todo):
            part = np.zeros(len(todo), np.uint8)
            sniff_crc(self.buf(), self.base, self.off[sample[todo]], self.size[sample[todo]], self.variant, part)
            out[todo] = part
        return out

    def check(self, fmt, code, known, out_type, out_status) -> None:
        """check_digests of every entry."""
        if self.facts is None:
            check_digests(self.buf(), self.base, self.off, self.size, fmt, code, known, self.variant, out_type,
                          out_status)
            return
        check_digests_by_facts(self.size, fmt, self.facts, code, known, out_type, out_status)
        rest = np.flatnonzero(out_status == DIGEST_NEEDS_BYTES)
        if len(rest):
            t, st = np.zeros(len(rest), np.uint8), np.zeros(len(rest), np.uint8)
            check_digests(self.buf(), self.base, self.off[rest], self.size[rest], fmt[rest], code[rest], known[rest],
                          self.variant, t, st)
            out_type[rest], out_status[rest] = t, st


@kernel(any_layout=("offset", "out_format", "out_length"))
def format_and_length(arr, base, offset, out_format, out_length):
    """Each record's entry format (a V2 header is the V1 fields behind a prefix) and cumulative length:
    a record is a 4-byte size, then the entry (an entry log's and a journal's alike)."""
    for i in range(offset.size):
        body = offset[i] + SIZE_PREFIX_SIZE - base
        fields = body
        out_format[i] = 1
        if arr[body] >= V2_MARKER:
            out_format[i] = 2
            fields = body + V2_PREFIX_SIZE
        out_length[i] = be_i64(arr, fields + V1_LENGTH_AT)
