"""bookie-fsck: ordered passes that check (and on request repair) a bookie's journal, ledger and index dirs.

The passes are a library (fsck.api.check_bookie returns findings as data); the command
(bkdisk/fsck_cli.py) is a thin shell over it.
"""
