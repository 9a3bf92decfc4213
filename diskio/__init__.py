"""Shared file access for every file-kind package: read-only mmap views and bounded reads, the windowed walk,
spilling, atomic replacement, and the jit helpers and numba settings the scanners share (digests are in digests/)."""
