"""bookie-fsck's run options travel as one typed object (bkdisk.fsck_run.FsckRun), not as positional
parameters: every option of the command is a field of it (the three ledger options resolved into one,
the two memory options into a MemoryLimit)."""
from __future__ import annotations

import dataclasses
import inspect

from bkdisk import fsck_cli
from bkdisk.fsck_run import FsckRun

LEDGER_OPTIONS = {"ledger_id", "ledger_scope_id", "ledger_qname"}   # resolved into FsckRun.ledger
MEMORY_OPTIONS = {"memory_limit", "tmp_dir"}                        # made into FsckRun.memory


def test_every_option_of_the_command_is_a_field_of_the_run_and_the_run_takes_only_that():
    options = {p.name for p in fsck_cli.fsck_command.params if p.expose_value}   # (not --version, --help)
    fields = {f.name for f in dataclasses.fields(FsckRun)}
    assert fields == (options - LEDGER_OPTIONS - MEMORY_OPTIONS) | {"ledger", "memory"}
    assert list(inspect.signature(inspect.unwrap(fsck_cli._run)).parameters) == ["run"]
    assert list(inspect.signature(fsck_cli._report_and_repair).parameters) == ["report", "run"]


def test_the_options_are_named_not_placed():
    assert all(f.kw_only for f in dataclasses.fields(FsckRun))
