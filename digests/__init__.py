"""Digests of stored entries: CRC32/CRC32C kernels, HMAC, each ledger's digest plan, and payload hashes."""
