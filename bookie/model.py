"""Descriptions of a bookie's content, from which bookie/writer.py builds a complete disk."""
from __future__ import annotations

from dataclasses import dataclass, field

from bkdisk.formats.digests import DigestType
from bkdisk.formats.ids import LedgerId


@dataclass
class LedgerSpec:
    """One ledger as a client wrote it to this bookie."""

    ledger_id: int
    payloads: list[bytes]
    digest_type: DigestType = DigestType.CRC32C
    password: bytes = b""
    scope_id: int = 0
    fenced: bool = False
    explicit_lac: int | None = None
    entry_format: int | None = None     # None: V1 for scope 0, V2 otherwise
    first_entry: int = 0
    # A striped replica (bookie/cluster.py) holds some entries of a ledger: their ids, and the
    # ledger-wide length after each, as the client put it in the entry header.
    entry_ids: list[int] | None = None
    lengths: list[int] | None = None

    @property
    def lid(self) -> LedgerId:
        return LedgerId(self.scope_id, self.ledger_id)

    @property
    def format_version(self) -> int:
        return self.entry_format or (2 if self.scope_id else 1)


@dataclass
class BookieSpec:
    """A whole bookie: identity, dirs, format versions, size limits and ledgers."""

    ledgers: list[LedgerSpec]
    bookie_id: str = "127.0.0.1:3181"
    instance_id: str | None = "bkdisk-demo-instance"
    journal_dirs: list[str] = field(default_factory=lambda: ["journal"])
    ledger_dirs: list[str] = field(default_factory=lambda: ["ledgers"])
    journal_version: int = 6
    index_version: int = 1
    page_size: int = 8192
    entry_log_size_limit: int = 512 * 1024
    journal_max_size: int = 1 << 20
    journal_prealloc_size: int = 1 << 20
    journal_alignment: int = 512
    journal_group_bytes: int = 64 * 1024
    first_journal_id: int = 0x1A200000000
    first_log_id: int = 0                # a bookie written in parts: each part's logs after the last part's
    interleave: bool = True              # round-robin entries across ledgers, as concurrent writers do
    cookie_layout_version: int = 5
    write_journal: bool = True
    # "index-files" (Interleaved/SortedLedgerStorage: .idx files) or "rocksdb" (DbLedgerStorage: its
    # locations and ledgers databases; one ledger dir, scope-0 ledgers: bookie/db_index_writer.py)
    storage: str = "index-files"


@dataclass
class WrittenBookie:
    """What the writer produced, for tests and benchmarks to compare a scan against."""

    root: str
    spec: BookieSpec
    journal_files: list[str]
    entry_log_files: list[str]
    index_files: dict[LedgerId, str]
    locations: dict[tuple[LedgerId, int], int]          # (ledger, entry) -> location
    entries: dict[tuple[LedgerId, int], bytes]          # (ledger, entry) -> stored bytes
    last_mark: tuple[int, int]
    bytes_written: int
