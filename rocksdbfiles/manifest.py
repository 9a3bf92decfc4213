"""CURRENT and the MANIFEST: version edits replayed into the live version (SST files per level, log
number, last sequence number) and what was deleted along the way."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from bkdisk.diskio.mapped import read_bytes
from bkdisk.formats import rocksdb as rf
from bkdisk.formats.errors import FormatError, shown
from bkdisk.rocksdbfiles.logfile import Tail, read_log

G = rf.Tag
# The fields RocksDB's recovery requires some edit to have set.
REQUIRED = {G.NEXT_FILE_NUMBER: "the next file number", G.LOG_NUMBER: "the log number",
            G.LAST_SEQUENCE: "the last sequence number"}


@dataclass(frozen=True)
class FileMeta:
    level: int
    number: int
    size: int
    smallest: bytes       # internal keys
    largest: bytes
    smallest_seq: int = 0
    largest_seq: int = 0

    @property
    def name(self) -> str:
        return f"{self.number:06d}.sst"


@dataclass
class Version:
    manifest: str
    comparator: str | None = None
    log_number: int = 0
    prev_log_number: int = 0
    next_file_number: int = 0
    last_sequence: int = 0
    min_log_number_to_keep: int = 0
    db_id: str | None = None
    files: dict[int, FileMeta] = field(default_factory=dict)     # live files by number
    deleted: list[tuple[int, int]] = field(default_factory=list)  # (level, number) in edit order
    column_families: dict[int, str] = field(default_factory=lambda: {0: "default"})
    edits: int = 0
    tail: Tail | None = None
    recorded: set[int] = field(default_factory=set)   # the tags the edits set

    def levels(self) -> dict[int, list[FileMeta]]:
        out: dict[int, list[FileMeta]] = {}
        for f in sorted(self.files.values(), key=lambda f: (f.level, f.number)):
            out.setdefault(f.level, []).append(f)
        return out


def read_current(db_dir: str | os.PathLike) -> str:
    """The MANIFEST file name CURRENT names (its text is the name and a newline)."""
    p = os.path.join(os.fspath(db_dir), "CURRENT")
    raw = read_bytes(p)
    name = raw[:-1] if raw.endswith(b"\n") else b""
    if not name or not name.startswith(b"MANIFEST-") or not name[9:].isdigit() or b"/" in name:
        raise FormatError("'MANIFEST-<number>' and a newline", shown(raw), path=p, offset=0)
    return name.decode("ascii")


class _Edit:
    """A cursor over one version edit, its errors anchored at the record in the MANIFEST."""

    def __init__(self, payload: bytes, path: str, base: int):
        self.b, self.p, self.path, self.base = payload, 0, path, base

    def varint(self, what: str, max_bytes: int = rf.VARINT64_MAX_BYTES) -> int:
        v, self.p = rf.read_varint(self.b, self.p, len(self.b), max_bytes, what=what, path=self.path,
                                   base=self.base)
        return v

    def slice(self, what: str) -> bytes:
        v, self.p = rf.read_slice(self.b, self.p, len(self.b), what=what, path=self.path, base=self.base)
        return v

    def ikey(self, what: str) -> bytes:
        k = self.slice(what)
        if len(k) < rf.INTERNAL_KEY_FOOTER_SIZE:
            raise FormatError(f"{what} as an internal key", f"{len(k)} bytes", path=self.path, offset=self.base)
        return k


def _new_file(e: _Edit, tag: int) -> FileMeta:
    level = e.varint("a level", rf.VARINT32_MAX_BYTES)
    number = e.varint("a file number")
    if tag == G.NEW_FILE3:
        e.varint("a path id", rf.VARINT32_MAX_BYTES)
    size = e.varint("a file size")
    smallest, largest = e.ikey("the smallest key"), e.ikey("the largest key")
    sseq = lseq = 0
    if tag != G.NEW_FILE:
        sseq, lseq = e.varint("the smallest sequence"), e.varint("the largest sequence")
    if tag == G.NEW_FILE4:
        while True:
            ctag = e.varint("a new-file field tag", rf.VARINT32_MAX_BYTES)
            if ctag == rf.NewFileTag.TERMINATE:
                break
            body = e.slice("a new-file field")
            if ctag == rf.NewFileTag.PATH_ID and (len(body) != 1 or body[0] > 3):
                raise FormatError("a path id 0..3", shown(body), path=e.path, offset=e.base)
            if ctag & rf.NEW_FILE_NON_SAFE_IGNORE_BIT and ctag != rf.NewFileTag.PATH_ID:
                raise FormatError("a new-file field this reader understands", f"tag {ctag}", path=e.path,
                                  offset=e.base)
    return FileMeta(level, number & rf.FILE_NUMBER_MASK, size, smallest, largest, sseq, lseq)


def apply_edit(v: Version, payload: bytes, *, path: str, base: int) -> None:
    """Apply one version edit to ``v`` (its fields in order; an unknown tag is an error unless ignorable)."""
    e = _Edit(payload, path, base)
    cf = 0
    while e.p < len(e.b):
        tag = e.varint("a version-edit tag", rf.VARINT32_MAX_BYTES)
        v.recorded.add(tag)
        if tag == G.COMPARATOR:
            v.comparator = e.slice("the comparator name").decode("utf-8", "replace")
        elif tag == G.LOG_NUMBER:
            v.log_number = e.varint("the log number")
        elif tag == G.PREV_LOG_NUMBER:
            v.prev_log_number = e.varint("the previous log number")
        elif tag == G.NEXT_FILE_NUMBER:
            v.next_file_number = e.varint("the next file number")
        elif tag == G.LAST_SEQUENCE:
            v.last_sequence = e.varint("the last sequence number")
        elif tag == G.MIN_LOG_NUMBER_TO_KEEP:
            v.min_log_number_to_keep = e.varint("the min log number to keep")
        elif tag == G.MAX_COLUMN_FAMILY:
            e.varint("the max column family", rf.VARINT32_MAX_BYTES)
        elif tag == G.COMPACT_CURSOR:
            e.varint("a level", rf.VARINT32_MAX_BYTES)
            e.ikey("a compact cursor")
        elif tag == G.DELETED_FILE:
            level = e.varint("a level", rf.VARINT32_MAX_BYTES)
            number = e.varint("a file number")
            if cf == 0:
                v.deleted.append((level, number))
                v.files.pop(number, None)
        elif tag in (G.NEW_FILE, G.NEW_FILE2, G.NEW_FILE3, G.NEW_FILE4):
            f = _new_file(e, tag)
            if cf == 0:
                v.files[f.number] = f
        elif tag == G.COLUMN_FAMILY:
            cf = e.varint("a column family id", rf.VARINT32_MAX_BYTES)
        elif tag == G.COLUMN_FAMILY_ADD:
            v.column_families[cf] = e.slice("a column family name").decode("utf-8", "replace")
        elif tag == G.COLUMN_FAMILY_DROP:
            v.column_families.pop(cf, None)
        elif tag == G.IN_ATOMIC_GROUP:
            e.varint("the atomic group size", rf.VARINT32_MAX_BYTES)
        elif tag == G.DB_ID:
            v.db_id = e.slice("the DB id").decode("utf-8", "replace")
        elif tag == G.WAL_ADDITION:
            e.varint("a WAL number")
            while (t := e.varint("a WAL addition field tag", rf.VARINT32_MAX_BYTES)) != rf.WAL_ADDITION_TERMINATE:
                if t != rf.WAL_ADDITION_SYNCED_SIZE:
                    raise FormatError("a WAL addition field 1..2", f"tag {t}", path=path, offset=base)
                e.varint("a synced WAL size")
        elif tag == G.WAL_DELETION:
            e.varint("a WAL number")
        elif tag & rf.TAG_SAFE_IGNORE_BIT:
            e.slice(f"the body of ignorable tag {tag}")
        else:
            raise FormatError("a version-edit tag this reader knows", f"tag {tag}", path=path, offset=base)
    v.edits += 1


def read_manifest(db_dir: str | os.PathLike, name: str | None = None) -> Version:
    """The live version of the database in ``db_dir``, from the MANIFEST CURRENT names."""
    d = os.fspath(db_dir)
    name = name or read_current(d)
    p = os.path.join(d, name)
    contents = read_log(read_bytes(p), path=p)
    v = Version(p, tail=contents.tail)
    for rec in contents.records:
        apply_edit(v, rec.payload, path=p, base=rec.offset)
    if v.edits == 0:
        raise FormatError("a MANIFEST with at least one version edit", "none", path=p, offset=0)
    missing = [name for tag, name in REQUIRED.items() if tag not in v.recorded]
    if missing:   # as RocksDB's recovery refuses it ("no meta-nextfile entry in descriptor", ...)
        end = contents.records[-1].offset if contents.records else 0
        *most, last = REQUIRED.values()
        raise FormatError(f"a MANIFEST that records {', '.join(most)} and {last}",
                          f"{', '.join(missing)} missing from its {v.edits} edits", path=p, offset=end)
    return v
