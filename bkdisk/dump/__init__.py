"""``bkdisk dump``: BookKeeper's files printed as ``bookkeeper shell`` prints them, or as JSON.

``command`` is the click group and the file commands; ``state`` the bookie-state files (cookie,
lastMark, ...); ``db_storage`` DbLedgerStorage's RocksDB databases; ``common`` what they share;
``shell_format``, ``java_compat``, ``locations_text`` and ``file_kinds`` the text and the kinds of file.
"""
