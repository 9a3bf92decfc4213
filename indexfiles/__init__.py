"""Ledger index ``.idx`` files: read (reference parser, jitted scanner, hierarchy walk) and write."""
