"""Where the jitted walk (entrylogs/walk.py) takes up again after damage: ``resync_point``, the twin of
the reference reader's ``resync`` (entrylogs/reader.py, where the rule is argued), over a view of the
whole file: the first plausible entry after the damage whose records do not pass over the first entry
after it that proves itself by its CRC digest.
"""
from __future__ import annotations

from bkdisk.digests.kernels import FACT_CRC32_OK, FACT_CRC32C_OK, entry_facts
from bkdisk.diskio.config import inline_kernel
from bkdisk.diskio.kernels import unowned
from bkdisk.entrylogs.reader import PROOF_MAX_SIZE, PROOF_REACH, SKIP_RECORD
from bkdisk.entrylogs.record_heads import entry_header, padding_end
from bkdisk.formats.entry import ENTRY_V1_HEADER_SIZE
from bkdisk.formats.entrylog import DIRECT_PADDING_BYTE, SIZE_PREFIX_SIZE

_PROVED = FACT_CRC32C_OK | FACT_CRC32_OK
_SKIP = SKIP_RECORD
_SMALLEST = SIZE_PREFIX_SIZE + ENTRY_V1_HEADER_SIZE   # the bytes a candidate's header needs


@inline_kernel
def proves_itself(buf, pos, size, variant):
    """The entry of ``size`` stored bytes whose size prefix is at ``pos`` matches its CRC32C or CRC32 digest."""
    if size > PROOF_MAX_SIZE:
        return False
    return (entry_facts(buf, pos + SIZE_PREFIX_SIZE, size, variant, size) & _PROVED) != 0


@inline_kernel
def _after(buf, pos, end):
    """Where the record at ``pos`` ends when it is an entry, a skipped record or flush padding, else -1;
    and whether it is an entry."""
    code, size = entry_header(buf, 0, pos, end)[:2]
    if code == 0 or code == _SKIP:
        return pos + SIZE_PREFIX_SIZE + size, code == 0
    if buf[pos] == DIRECT_PADDING_BYTE:
        boundary = padding_end(buf, 0, pos, end)
        if boundary > 0:
            return boundary, False
    return -1, False


@inline_kernel
def proves_at(buf, pos, end, variant):
    """The reference reader's proves_at: an entry starts at ``pos``, followed by a record or the end of the
    data, that matches its CRC32C or CRC32 digest."""
    code, size = entry_header(buf, 0, pos, end)[:2]
    if code != 0:
        return False
    nxt = pos + SIZE_PREFIX_SIZE + size
    return (nxt == end or _after(buf, nxt, end)[0] >= 0) and proves_itself(buf, pos, size, variant)


@inline_kernel
def crosses(buf, pos, target, end):
    """The reference reader's crosses: the records from ``pos`` pass over ``target`` without one starting there."""
    q = pos
    while 0 <= q < target:
        nxt = _after(buf, q, end)[0]
        if nxt > target:
            return True
        q = nxt
    return False


@inline_kernel
def plausible_at(buf, pos, end, last_nonzero):
    """The reference reader's plausible_at: an entry whose successor is the end of the data, another
    entry, a skipped record, flush padding or a zero tail (nothing but zeros: ``last_nonzero`` before it)."""
    q, is_entry = _after(buf, pos, end)
    if not is_entry or q == end:
        return is_entry
    return _after(buf, q, end)[0] >= 0 or last_nonzero < q


@inline_kernel
def resync_point(buf, pos, end, last_nonzero, variant, unproved_to):
    """Where the walk takes up after damage at ``pos`` (``buf``: the whole file), ``end`` when nowhere; and
    ``unproved_to`` moved on. No entry proves itself between this damage and ``unproved_to``, where
    earlier resyncs of the file stopped searching (at an entry that does, or at the end of their reach):
    the walk only moves forward, and whether an entry proves itself depends on its bytes alone. So a log
    damaged in many places is not searched again after each."""
    buf = unowned(buf)
    proved = -1
    reach = min(end, pos + PROOF_REACH)
    q = max(pos + 1, unproved_to)
    while q + _SMALLEST <= reach:
        if proves_at(buf, q, end, variant):
            proved = q
            break
        q += 1
    unproved_to = max(unproved_to, q)
    q = pos + 1
    while q + _SMALLEST <= end:
        if plausible_at(buf, q, end, last_nonzero) and (proved < 0 or not crosses(buf, q, proved, end)):
            return q, unproved_to
        q += 1
    return end, unproved_to
