"""Where the jitted walk (entrylogs/walk.py) takes up again after damage: ``resync_point``, the twin of
the reference reader's ``resync`` (entrylogs/reader.py, where the rule is argued), over a view of the
whole file: the entry after the damage whose successor is whole and that proves itself by its CRC
digest, or an earlier one whose records lead exactly to it; where none proves itself within
PROOF_REACH, the first of CHAIN_LINKS whole records.
"""
from __future__ import annotations

from bkdisk.digests.kernels import FACT_CRC32_OK, FACT_CRC32C_OK, entry_facts
from bkdisk.diskio.config import inline_kernel
from bkdisk.diskio.kernels import unowned
from bkdisk.entrylogs.reader import CHAIN_LINKS, PROOF_MAX_SIZE, PROOF_REACH, SKIP_RECORD
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
def leads_to(buf, pos, target, end):
    """Records follow one another from the entry at ``pos`` to exactly ``target``."""
    if entry_header(buf, 0, pos, end)[0] != 0:
        return False
    q = pos
    while q < target:
        q = _after(buf, q, end)[0]
        if q < 0:
            return False
    return q == target


@inline_kernel
def chain_whole(buf, pos, end, last_nonzero, links):
    """The entry at ``pos`` and the records after it are whole for ``links`` entries, or up to the end of
    the data, a zero tail (nothing but zeros from there: ``last_nonzero`` before it), a skipped record or
    flush padding."""
    code, size = entry_header(buf, 0, pos, end)[:2]
    if code != 0:
        return False
    q = pos + SIZE_PREFIX_SIZE + size
    for _ in range(links - 1):
        if q == end or last_nonzero < q:
            return True
        nxt, is_entry = _after(buf, q, end)
        if nxt < 0:
            return False
        if not is_entry:
            return True
        q = nxt
    return True


@inline_kernel
def resync_point(buf, pos, end, last_nonzero, variant, unproved_to):
    """Where the walk takes up after damage at ``pos`` (``buf``: the whole file), ``end`` when nowhere; and
    ``unproved_to`` moved on. That is where earlier resyncs of the file stopped searching without finding
    an entry that proves itself: the walk only moves forward, so none does between this damage and there,
    and a log damaged in many places (of ledgers whose digests cannot be checked) is not searched again
    after each."""
    buf = unowned(buf)
    proved = -1
    reach = min(end, pos + PROOF_REACH)
    q = max(pos + 1, unproved_to)
    while q + _SMALLEST <= reach:
        # (the successor first: a chance header's is rarely whole, and the CRC reads every byte)
        if chain_whole(buf, q, end, last_nonzero, 2) and proves_itself(buf, q, entry_header(buf, 0, q, end)[1],
                                                                         variant):
            proved = q
            break
        q += 1
    if proved >= 0:
        for c in range(pos + 1, proved):
            if leads_to(buf, c, proved, end):
                return c, unproved_to
        return proved, unproved_to
    unproved_to = max(unproved_to, q)
    q = pos + 1
    while q + _SMALLEST <= end:
        if chain_whole(buf, q, end, last_nonzero, CHAIN_LINKS):
            return q, unproved_to
        q += 1
    return end, unproved_to
