"""Journal writer: version header, length-prefixed records, V5+ alignment padding, preallocated tail."""
from __future__ import annotations

from bkdisk.formats import journal as fj
from bkdisk.formats.journal import JournalRecord, RecordKind


class JournalWriter:
    """Writes one ``.txn`` file the way a bookie's journal thread lays it out.

    Records are grouped; each group flush is padded to ``alignment`` (V5+), as BookKeeper pads
    every flush. The file is zero-extended to a multiple of ``prealloc_size``.
    """

    def __init__(self, path: str, *, version: int = 6, alignment: int = 512, prealloc_size: int = 1 << 20,
                 group_bytes: int = 64 * 1024):
        if alignment % 512 or alignment <= 0:
            raise ValueError("journal alignment must be a positive multiple of 512")
        self.path = path
        self.version = version
        self.alignment = alignment
        self.prealloc_size = max(alignment, prealloc_size - prealloc_size % alignment)
        self.group_bytes = group_bytes
        self._f = open(path, "wb")
        self._f.write(fj.build_header(version))
        self.position = fj.header_size(version)
        self._group = 0

    def append(self, body: bytes) -> int:
        """Write one record; return the offset of its length prefix."""
        off = self.position
        self._f.write(fj.RECORD_LENGTH.build(len(body)))
        self._f.write(body)
        self.position += fj.RECORD_LENGTH_SIZE + len(body)
        self._group += fj.RECORD_LENGTH_SIZE + len(body)
        if self._group >= self.group_bytes:
            self.flush_group()
        return off

    def append_framed(self, records) -> int:
        """Write records already framed (each a length prefix, then its body) back to back, as the
        bench's bulk writer packages them; return the offset of the first."""
        off = self.position
        self._f.write(memoryview(records))
        self.position += len(records)
        self._group += len(records)
        return off

    def append_padding(self, n: int) -> None:
        self._f.write(fj.PADDING_RECORD.build(dict(padding_length=n, padding=bytes(n))))
        self.position += fj.PADDING_HEAD_SIZE + n

    def flush_group(self) -> int:
        """End a flush group: pad to the alignment (V5+). Returns the aligned position (a lastMark offset)."""
        if self.version >= 5:
            n = fj.padding_payload_length(self.position, self.alignment)
            if n is not None:
                self.append_padding(n)
        self._group = 0
        return self.position

    def close(self, *, size: int | None = None) -> int:
        """Zero-extend to the preallocation boundary (or to ``size``) and close; return the file size."""
        if size is None:
            size = max(self.prealloc_size, -(-self.position // self.prealloc_size) * self.prealloc_size)
        self._f.flush()
        self._f.truncate(size)
        self._f.close()
        return size

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc) -> None:
        if not self._f.closed:
            self.close()


def record_body(r: JournalRecord, data: bytes) -> bytes:
    """A record's body rebuilt from its parsed fields; data entries are their own content."""
    if r.kind == RecordKind.LEDGER_KEY:
        assert r.master_key is not None, "a parsed ledger-key record holds its key"
        return fj.build_ledger_key_body(r.ledger_id, r.master_key, r.scope_id)
    if r.kind == RecordKind.FENCE:
        return fj.build_fence_body(r.ledger_id, r.scope_id)
    if r.kind == RecordKind.EXPLICIT_LAC:
        assert r.lac_body is not None, "a parsed explicit-LAC record holds its body"
        return fj.build_explicit_lac_body(r.ledger_id, r.lac_body, r.scope_id)
    return data[r.offset + fj.RECORD_LENGTH_SIZE:r.offset + fj.RECORD_LENGTH_SIZE + r.length]


def rebuild_journal(scan, data: bytes, path: str) -> None:
    """Write a journal from a parsed one: same header version, records, padding and file size."""
    with JournalWriter(path, version=scan.version, group_bytes=1 << 62) as w:
        for r in scan.records:
            if r.kind == RecordKind.PADDING:
                w.append_padding(r.length)
            else:
                w.append(record_body(r, data))
        w.close(size=scan.size)
