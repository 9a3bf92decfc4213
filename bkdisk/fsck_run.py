"""``FsckRun``: one bookie-fsck run's options as its command line gave them, checked for usage.

The command parses and checks them (``fsck_cli.fsck_command``); the run (the check, the report, the
repair) reads them from this one typed object."""
from __future__ import annotations

from dataclasses import dataclass

from bkdisk.diskio.spill import MemoryLimit
from bkdisk.formats.ids import LedgerId


@dataclass(frozen=True, kw_only=True)
class FsckRun:
    # Where the bookie's dirs are: exactly one of root, conf, or the explicit dirs.
    root: str | None
    conf: str | None
    journal_dirs: tuple[str, ...]
    ledger_dirs: tuple[str, ...]
    index_dirs: tuple[str, ...]
    # The ledgers' metadata: a folder or the metadata service (at most one).
    metadata_dir: str | None
    metadata_url: str | None
    # The check.
    jobs: int
    no_digests: bool
    memory: MemoryLimit | None
    # The report.
    as_json: bool
    progress: bool | None      # None: on a terminal, unless --json
    verbose: bool
    quiet: bool
    ledger: LedgerId | None    # only findings about this ledger (never with a repair)
    # The repair.
    repair: bool               # true with dry_run too: -n shows what a repair would do
    dry_run: bool
    yes: bool
    force: bool
    backup_dir: str | None
    drop_lost: bool
