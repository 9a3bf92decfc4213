"""Ledger metadata service (BP-16) with bookie discovery (BP-41) and 128-bit scoped ledgers (BP-35)."""
