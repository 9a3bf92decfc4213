"""The scans a check keeps between passes, within the memory limit.

Each entry log's and journal's scan writes its per-record arrays (entries, digests, payload hashes; a
journal's records and digest facts) into a sink (diskio.scan_sink) as it scans: parts are held while
the per-record arrays of all the check's scans fit in their share of ``--memory-limit``, and past it
go to the check's spill folder part by part. Every pass reads them back a bounded range at a time
(entrylogs.scan_parts, journal.scan_parts), so no file's per-record arrays are ever held whole, however
many records it has. The rows read back are the ones written: every pass gives the same findings
either way.
"""
from __future__ import annotations

from bkdisk.diskio.scan_sink import Room, ScanSink
from bkdisk.diskio.spill import SpillFolder

# Of --memory-limit: entry-log scans kept in memory. Room for the 64 bytes an entry of a 2 GiB log set
# of small entries (about 4 million) keeps, which a check then reads back without writing and reading
# them in its spill folder. A check that also keeps a payload hash per entry (the audit's disk task,
# 97 bytes an entry, its rows passed on to a second process) keeps the smaller share.
LOG_SHARE = 0.25
HASHED_LOG_SHARE = 0.10
JOURNAL_SHARE = 0.15    # journal scans: room for a 2 GiB journal of small records at the default limit
LOCATION_SHARE = 0.10   # the index files' locations (fsck.context.index_inventory)


class ScanStore(Room):
    """The share the scans of one kind draw on; ``sink()`` gives one scan its columns."""

    def __init__(self, folder: SpillFolder, limit: int):
        super().__init__(limit)
        self.folder = folder

    def sink(self) -> ScanSink:
        return ScanSink(self, self.folder)
