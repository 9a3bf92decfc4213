"""Journal ``.txn`` files: read (reference parser and jitted scanner) and write."""
