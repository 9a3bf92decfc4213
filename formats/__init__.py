"""Declarations of every BookKeeper on-disk format: pure bytes, ids, paths and digests, no I/O."""
