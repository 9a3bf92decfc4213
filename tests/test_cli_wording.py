"""What the commands say about themselves agrees with what they do: counts as fsck counts them, in the
singular where there is one, help examples under the name the command was run by, whole summaries."""
from __future__ import annotations

import os
import re

from click.testing import CliRunner

from bkdisk.audit.cli import audit
from bkdisk.cli import cli
from bkdisk.demo import demo
from bkdisk.fsck_cli import fsck_command
from tests.fsck_helpers import make_disk


def test_the_demo_counts_entry_logs_as_fsck_does(tmp_path):
    r = CliRunner().invoke(demo, ["--out", str(tmp_path / "d"), "--no-audit"])
    said = int(re.search(r"(\d+) entry logs", r.stderr or r.output).group(1))
    checked = int(re.search(r"Checked (\d+) entry logs", r.output).group(1))
    assert said == checked, r.output


def test_one_journal_is_said_in_the_singular(tmp_path):
    disk = make_disk(str(tmp_path))
    for j in disk.written.journal_files[:-1]:
        os.remove(j)
    out = CliRunner().invoke(fsck_command, [disk.root]).stdout
    assert ", 1 journal, " in out and "1 journals" not in out, out


def test_fsck_help_examples_name_the_command_as_it_was_run():
    via_bkdisk = CliRunner().invoke(cli, ["fsck", "--help"], prog_name="bkdisk").stdout
    examples = [l.strip() for l in via_bkdisk.split("Examples:")[1].split("Exit codes")[0].splitlines() if l.strip()]
    assert examples and all(l.startswith("bkdisk fsck ") for l in examples), examples
    alone = CliRunner().invoke(fsck_command, ["--help"], prog_name="bookie-fsck").stdout
    assert "bookie-fsck /mnt/bookie1 -n" in alone and "bkdisk fsck" not in alone


def test_audit_takes_q_for_quiet():
    r = CliRunner().invoke(audit, ["-q", "--out", "/nonexistent-bkdisk-out"])
    assert "No such option" not in r.output + (r.stderr or ""), r.output
    assert "give the ledger metadata" in r.output + (r.stderr or "")   # past option parsing


def test_the_dump_list_gives_each_command_its_whole_summary():
    text = CliRunner().invoke(cli, ["dump", "--help"], prog_name="bkdisk").stdout
    commands = text.split("Commands:")[1]
    assert "..." not in commands, commands
    assert "`bookkeeper shell readlog <id>` (or" in commands and "`readlogmetadata <id>`)." in commands
