"""``Problem``: damage found while reading a RocksDB database, returned as data (fsck makes findings of it).

Below the database view (``db.py``) and the readers that stream its tables (``stream.py``,
``dbindex.py``), which all report damage this way."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """Damage found while reading; fsck turns these into findings."""
    # sst-checksum | sst-unreadable | sst-missing | sst-size | wal-torn-tail | wal-bad-batch | wal-unreadable
    # | manifest-torn-tail | db-missing (the folder gone or empty beside the other database's)
    kind: str
    path: str
    offset: int | None
    detail: str
    key_range: tuple[bytes | None, bytes | None] | None = None   # user keys the damage may hide (SST blocks)
    lost_bytes: int = 0
    key: bytes | None = None   # the one key the problem is about (a value of the wrong size)
