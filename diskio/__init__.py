"""Shared file access for every file-kind package: read-only mmap views and atomic replacement."""
