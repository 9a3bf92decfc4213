"""RocksDB databases of a DbLedgerStorage bookie, read-only: SST tables, MANIFEST, WAL, merged view, indexes.

block.py and sst.py read BlockBasedTable files; logfile.py the record framing shared by the WAL and the
MANIFEST; manifest.py the live version; wal.py write batches; db.py the merged view and its problems;
dbindex.py the ``locations`` and ``ledgers`` indexes built on it. Nothing here writes.
"""
