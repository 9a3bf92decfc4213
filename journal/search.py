"""Searching a journal past where its walk stopped: do two plausible records follow each other later?

fsck asks this after a torn end: if real records follow, the journal is corrupt mid-file, not torn
at its end. A record is plausible at ``q`` when its length prefix is a padding marker whose length
fits the file, or a length of at least one meta body that fits the file over a body whose entry id
is a data id (>= 0) or a ledger-key, fence or explicit-LAC marker. A pair is such a record, not
padding, directly followed by another plausible record.

``find_record_pair`` is the windowed, jitted search; ``find_record_pair_reference`` its
pure-Python twin over the whole file's bytes (tests compare them).
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from bkdisk.diskio.config import inline_kernel, kernel
from bkdisk.diskio.kernels import be_i32, be_i64, readonly, unowned
from bkdisk.diskio.mapped import file_size, map_window, read_range
from bkdisk.formats import journal as fj

SEARCH_WINDOW = 16 << 20
HEAD = fj.RECORD_LENGTH_SIZE + fj.META_BODY_SIZE   # length prefix, ledger id, entry id
_ENTRY_AT = fj.RECORD_LENGTH_SIZE + fj.META_ENTRY_AT
_MARKERS = (fj.META_LEDGER_KEY, fj.META_FENCE, fj.META_EXPLICIT_LAC)
_KEY, _FENCE, _LAC = _MARKERS
_ENTRY_ID = fj.FORCE_LEDGER_BODY.entry_id.subcon.subcon   # the entry id field, without its Const
NOT_FOUND = -1
NEED_SUCCESSOR = -2


@inline_kernel
def _record_end(buf, i, at, size):
    """The offset after a plausible record whose prefix is at file offset ``at`` (buf[i]), or -1.
    ``buf`` holds at least HEAD bytes from i, or the file ends before."""
    if at + fj.PADDING_HEAD_SIZE > size:
        return -1
    length = np.int64(be_i32(buf, i))
    if length == fj.PADDING_MARKER:
        pad = np.int64(be_i32(buf, i + fj.RECORD_LENGTH_SIZE))
        if pad >= 0 and at + fj.PADDING_HEAD_SIZE + pad <= size:
            return at + fj.PADDING_HEAD_SIZE + pad
        return -1
    if at + HEAD > size or length < fj.META_BODY_SIZE or at + fj.RECORD_LENGTH_SIZE + length > size:
        return -1
    entry = be_i64(buf, i + _ENTRY_AT)
    if entry >= 0 or entry == _KEY or entry == _FENCE or entry == _LAC:
        return at + fj.RECORD_LENGTH_SIZE + length
    return -1


@kernel
def _search_window(buf, base, size, start, stop):
    """Scan candidates q in [start, stop) (``buf`` holds file bytes from ``base``): (status, q) with
    status 1 a pair at q, NEED_SUCCESSOR when q's successor lies past ``buf``, NOT_FOUND otherwise."""
    buf = unowned(buf)
    buf_end = base + buf.size
    for q in range(start, stop):
        if q + HEAD > buf_end:
            return NOT_FOUND, q
        length = np.int64(be_i32(buf, q - base))
        if length == fj.PADDING_MARKER:
            continue   # a pair starts with a record that is not padding
        nxt = _record_end(buf, q - base, q, size)
        if nxt < 0:
            continue
        if min(nxt + HEAD, size) > buf_end:
            return NEED_SUCCESSOR, q
        if _record_end(buf, nxt - base, nxt, size) >= 0:
            return 1, q
    return NOT_FOUND, stop


_FULL = 2


@kernel
def _lone_window(buf, base, size, start, stop, out):
    """Plausible records in [start, stop), not padding (``buf`` holds file bytes from ``base``), that a
    zero length, a padding record or the file's end follows, their offsets into ``out``: (status, number
    found, q), status NEED_SUCCESSOR when q's successor lies past ``buf``, _FULL when ``out`` filled
    before q, else NOT_FOUND (the window done)."""
    buf = unowned(buf)
    buf_end = base + buf.size
    n = 0
    for q in range(start, stop):
        if q + HEAD > buf_end:
            return NOT_FOUND, n, q
        if be_i32(buf, q - base) == fj.PADDING_MARKER:
            continue
        nxt = _record_end(buf, q - base, q, size)
        if nxt < 0:
            continue
        if nxt + fj.RECORD_LENGTH_SIZE <= size:
            if nxt + fj.RECORD_LENGTH_SIZE > buf_end:
                return NEED_SUCCESSOR, n, q
            after = be_i32(buf, nxt - base)
            if after != 0 and after != fj.PADDING_MARKER:
                continue
        if n == out.size:
            return _FULL, n, q
        out[n] = q
        n += 1
    return NOT_FOUND, n, stop


def lone_records(path: str | os.PathLike, start: int, *, window: int = SEARCH_WINDOW) -> Iterator[int]:
    """Offsets >= ``start`` of plausible records (not padding) that a zero length (the preallocated zeros),
    a padding record (a flush's) or the file's end follows, in file order: where a journal's last record
    may stand after a damaged length. Plausible only (payload bytes can look so): the caller verifies
    each (a data record by its digest, a meta record by its exact size)."""
    p = os.fspath(path)
    size = file_size(p)
    pos = start
    out = np.empty(1024, np.int64)
    while pos + HEAD <= size:
        stop = min(pos + window, size)
        with map_window(p, pos, stop - pos + HEAD + fj.RECORD_LENGTH_SIZE) as w:
            buf = readonly(w)
            status, n, q = _lone_window(buf, pos, size, pos, stop, out)
            nxt = _record_end(buf, q - pos, q, size) if status == NEED_SUCCESSOR else -1
            del buf, w
        yield from out[:n].tolist()
        if status == NEED_SUCCESSOR:
            if fj.RECORD_LENGTH.parse(read_range(p, nxt, fj.RECORD_LENGTH_SIZE)) in (0, fj.PADDING_MARKER):
                yield q   # (one small read)
            pos = q + 1
        elif status == _FULL:
            pos = q
        else:
            pos = max(q, stop)


def lone_records_reference(b: bytes, start: int) -> list[int]:
    """lone_records over the file's bytes ``b``, one offset at a time."""
    out = []
    for q in range(max(start, 0), len(b) - HEAD + 1):
        if fj.RECORD_LENGTH.parse(b[q:q + fj.RECORD_LENGTH_SIZE]) == fj.PADDING_MARKER:
            continue
        nxt = record_end_reference(b, q)
        if nxt >= 0 and (nxt + fj.RECORD_LENGTH_SIZE > len(b) or
                         fj.RECORD_LENGTH.parse(b[nxt:nxt + fj.RECORD_LENGTH_SIZE]) in (0, fj.PADDING_MARKER)):
            out.append(q)
    return out


def find_record_pair(path: str | os.PathLike, start: int, *, window: int = SEARCH_WINDOW) -> int:
    """The first offset >= ``start`` where two plausible records follow each other, or -1."""
    p = os.fspath(path)
    size = file_size(p)
    pos = start
    while pos + HEAD <= size:
        stop = min(pos + window, size)
        with map_window(p, pos, stop - pos + HEAD) as w:
            buf = readonly(w)
            status, q = _search_window(buf, pos, size, pos, stop)
            if status == NEED_SUCCESSOR:
                nxt = _record_end(buf, q - pos, q, size)
            del buf, w
        if status == 1:
            return q
        if status == NEED_SUCCESSOR:
            head = readonly(np.frombuffer(read_range(p, nxt, HEAD), np.uint8))   # one small read
            if _record_end(head, 0, nxt, size) >= 0:
                return q
            pos = q + 1
            continue
        pos = q if q > pos else stop
    return -1


def record_end_reference(b: bytes, at: int) -> int:
    """_record_end's twin: the offset after a plausible record at ``at`` of the file ``b``, or -1."""
    size = len(b)
    if at + fj.PADDING_HEAD_SIZE > size:
        return -1
    length = fj.RECORD_LENGTH.parse(b[at:at + fj.RECORD_LENGTH_SIZE])
    if length == fj.PADDING_MARKER:
        pad = fj.PADDING_RECORD.padding_length.parse(b[at + fj.RECORD_LENGTH_SIZE:at + fj.PADDING_HEAD_SIZE])
        return at + fj.PADDING_HEAD_SIZE + pad if pad >= 0 and at + fj.PADDING_HEAD_SIZE + pad <= size else -1
    if at + HEAD > size or length < fj.META_BODY_SIZE or at + fj.RECORD_LENGTH_SIZE + length > size:
        return -1
    body = fj.RECORD_LENGTH_SIZE
    entry = _ENTRY_ID.parse(b[at + body + fj.META_ENTRY_AT:at + HEAD])
    return at + body + length if entry >= 0 or entry in _MARKERS else -1


def find_record_pair_reference(b: bytes, start: int) -> int:
    """find_record_pair over the file's bytes ``b``, one offset at a time."""
    for q in range(max(start, 0), len(b) - HEAD + 1):
        if not any(b[q:q + fj.RECORD_LENGTH_SIZE]):
            continue   # a zero length (the preallocated tail) is no record: a shortcut, not a rule
        if fj.RECORD_LENGTH.parse(b[q:q + fj.RECORD_LENGTH_SIZE]) == fj.PADDING_MARKER:
            continue
        nxt = record_end_reference(b, q)
        if nxt >= 0 and record_end_reference(b, nxt) >= 0:
            return q
    return -1
