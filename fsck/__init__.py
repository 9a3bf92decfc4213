"""bookie-fsck: ordered passes that check (and on request repair) a bookie's journal, ledger and index dirs.

The passes are a library (fsck.api.check_bookie returns findings as data); fsck.cli is a thin shell.
"""
