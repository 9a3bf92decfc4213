"""The jitted twins of the reference reader's record tests (entrylogs/reader.py): ``entry_header`` is
``header_at``, ``padding_end`` is ``padding_end``. The framing walk (entrylogs/walk.py) and its resync
(entrylogs/resync.py) judge every record through them.
"""
from __future__ import annotations

import numpy as np

from bkdisk.diskio.config import inline_kernel
from bkdisk.diskio.kernels import be_i32, be_i64, be_u64
from bkdisk.entrylogs.reader import SKIP_RECORD, Damage
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import (
    ENTRY_V1_HEADER_SIZE,
    ENTRY_V2_HEADER_SIZE,
    V1_ENTRY_AT,
    V1_LAC_AT,
    V1_LEDGER_AT,
    V1_LENGTH_AT,
    V2_DIGEST_MASK,
    V2_FLAGS_BASE,
    V2_MARKER,
    V2_PREFIX_SIZE,
    V2_SCOPE_AT,
    V2_VERSION_MASK,
)
from bkdisk.formats.entrylog import (
    DIRECT_ALIGNMENT,
    DIRECT_PADDING_BYTE,
    MAX_ENTRY_SIZE,
    MIN_SANE_ENTRY_SIZE,
    SIZE_PREFIX_SIZE,
)

_ZERO_SIZE, _BAD_SIZE, _BAD_HEADER, _TRUNCATED = (int(Damage.ZERO_SIZE), int(Damage.BAD_SIZE),
                                                  int(Damage.BAD_HEADER), int(Damage.TRUNCATED))
_SKIP_RECORD = SKIP_RECORD
_MARKER_BYTES = V1_LEDGER_AT + 8   # a skipped record's ledger id: eight 0xFF bytes
_MIN_DIGEST_CODE, _MAX_DIGEST_CODE = int(min(DigestType)), int(max(DigestType))


@inline_kernel
def padding_end(buf, base, pos, end):
    """The reference reader's padding_end (0 when none); ``buf`` must hold the bytes up to the boundary."""
    into = pos % DIRECT_ALIGNMENT
    boundary = pos + DIRECT_ALIGNMENT - into
    if into == 0 or boundary > end:
        return 0
    for k in range(pos - base, boundary - base):
        if buf[k] != DIRECT_PADDING_BYTE:
            return 0
    return boundary


@inline_kernel
def entry_header(buf, base, pos, end):
    """The reference reader's header_at: (damage code or 0, size, format, scope, ledger, entry, lac, length)."""
    zero = np.uint64(0)
    if pos + SIZE_PREFIX_SIZE > end:
        return _TRUNCATED, 0, 0, zero, zero, 0, 0, 0
    i = pos - base
    size = np.int64(be_i32(buf, i))
    if size <= 0:
        return _ZERO_SIZE, size, 0, zero, zero, 0, 0, 0
    body = i + SIZE_PREFIX_SIZE
    if size >= MIN_SANE_ENTRY_SIZE and pos + SIZE_PREFIX_SIZE + size <= end:
        skip = True
        for k in range(V1_LEDGER_AT, _MARKER_BYTES):
            if buf[body + k] != 0xFF:
                skip = False
                break
        if skip:
            return _SKIP_RECORD, size, 0, zero, zero, 0, 0, 0
    if size < ENTRY_V1_HEADER_SIZE or size > MAX_ENTRY_SIZE or pos + SIZE_PREFIX_SIZE + size > end:
        return _BAD_SIZE, size, 0, zero, zero, 0, 0, 0
    flags = buf[body]
    fmt = 1
    scope = zero
    if flags >= V2_MARKER:
        digest_code = flags & V2_DIGEST_MASK
        if (size < ENTRY_V2_HEADER_SIZE or (flags & V2_VERSION_MASK) != V2_FLAGS_BASE
                or digest_code < _MIN_DIGEST_CODE or digest_code > _MAX_DIGEST_CODE):
            return _BAD_HEADER, size, 0, zero, zero, 0, 0, 0
        fmt = 2
        scope = be_u64(buf, body + V2_SCOPE_AT)
        body += V2_PREFIX_SIZE
    ledger = be_u64(buf, body + V1_LEDGER_AT)
    entry = be_i64(buf, body + V1_ENTRY_AT)
    lac = be_i64(buf, body + V1_LAC_AT)
    length = be_i64(buf, body + V1_LENGTH_AT)
    if entry < 0 or lac < -1 or lac >= entry or length < 0:
        return _BAD_HEADER, size, 0, zero, zero, 0, 0, 0
    return 0, size, fmt, scope, ledger, entry, lac, length
