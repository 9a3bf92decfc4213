"""What kind of BookKeeper file a path holds, told from its first bytes (and, for the kinds whose bytes
say nothing, its name), and the `bkdisk dump` subcommand that reads each kind. A dump checks the kind
before printing anything: a file of another kind is refused with the kind found and the dump to use."""
from __future__ import annotations

import os
import re
import stat

from bkdisk.dump.common import DumpError
from bkdisk.formats.entrylog import ENTRY_LOG_MAGIC
from bkdisk.formats.index import INDEX_MAGIC
from bkdisk.formats.journal import JOURNAL_MAGIC

METADATA_PREFIX = b"BookieMetadataFormatVersion"   # LedgerMetadataSerDe formats 1-3 start with it
_COOKIE = re.compile(rb"^\d+\n(bookieHost|journalDir)")   # a version line, then the text fields
_SST = re.compile(r"^\d+\.sst$")
_ROCKSDB_NAMES = re.compile(r"^(MANIFEST-\d+|CURRENT|OPTIONS-\d+|IDENTITY)$")
HEAD = 64

# (kind, how it is told, the dump subcommand that reads it)
JOURNAL = ("a journal", f"'{JOURNAL_MAGIC.decode()}' at offset 0", "journal")
ENTRY_LOG = ("an entry log", f"'{ENTRY_LOG_MAGIC.decode()}' at offset 0", "entrylog")
INDEX = ("a ledger index file", f"'{INDEX_MAGIC.decode()}' at offset 0", "index")
METADATA = ("ledger metadata", f"'{METADATA_PREFIX.decode()}' at offset 0", "metadata")
COOKIE = ("a cookie", "a version line, then bookieHost", "cookie")
LAST_MARK = ("a lastMark file", "its name", "lastmark")
ROCKSDB = ("a RocksDB file", "its name", "rocksdb")


def sniff(path: str) -> tuple[str, str, str] | None:
    """(kind, how it was told, dump subcommand) of a regular file, or None when nothing tells."""
    try:
        # Only a regular file is sniffed: opening a FIFO would wait for a writer, and a device's first
        # bytes say nothing; the dump's own open refuses both in its words.
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            head = f.read(HEAD)
    except OSError:
        return None    # the dump's own read says what is wrong, in its words
    for magic, kind in ((JOURNAL_MAGIC, JOURNAL), (ENTRY_LOG_MAGIC, ENTRY_LOG), (INDEX_MAGIC, INDEX),
                        (METADATA_PREFIX, METADATA)):
        if head.startswith(magic):
            return kind
    if _COOKIE.match(head):
        return COOKIE
    name = os.path.basename(path)
    if name.startswith("lastMark"):
        return LAST_MARK
    if _SST.match(name) or _ROCKSDB_NAMES.match(name):
        return ROCKSDB
    return None


def holds_rocksdb_files(folder: str) -> bool:
    """Whether ``folder`` holds a file only a RocksDB database has (a MANIFEST, an SST, OPTIONS,
    IDENTITY): a database, even when its CURRENT is gone."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(_SST.match(n) or (_ROCKSDB_NAMES.match(n) and n != "CURRENT") for n in names)


def expect_kind(path: str, dump_name: str) -> None:
    """Refuse ``path`` when its bytes say it is a kind another dump reads (nothing is printed)."""
    found = sniff(path)
    if found is None or found[2] == dump_name:
        return
    kind, told, reader = found
    raise DumpError(f"{path}: not a file `bkdisk dump {dump_name}` reads: found {kind} ({told}); "
                    f"dump it with `bkdisk dump {reader} {path}`")
