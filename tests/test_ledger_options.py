"""Every command that names a ledger (BP-35's --ledger-id, --ledger-scope-id) parses it with one parser
(commandline.ledger_options) and says a bad value in one line naming the option and what it expects, with
exit 16: no Python wording (``invalid literal for int()``), no ``<bytes>:`` label."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN

BIN = Path(sys.executable).parent
ROOT = str(GOLDEN / "interleaved-v6-hostport")
BAD = [("--ledger-id", "0x", "expected a ledger id in decimal, or in hex with 0x, found '0x'"),
       ("--ledger-id", "abc", "expected a ledger id in decimal, or in hex with 0x, found 'abc'"),
       ("--ledger-id", "0x1g", "expected a ledger id in decimal, or in hex with 0x, found '0x1g'"),
       ("--ledger-id", "-1", "expected a ledger id in 0..2^64-1, found -1"),
       ("--ledger-id", str(1 << 64), f"expected a ledger id in 0..2^64-1, found {1 << 64}"),
       ("--ledger-scope-id", "zz", "expected a scope id in decimal, or in hex with 0x, found 'zz'")]
# What int() would take but names no ledger the way BookKeeper's shell or a metadata file does.
BAD += [("--ledger-id", v, f"expected a ledger id in decimal, or in hex with 0x, found {v!r}")
        for v in (" 7", "7 ", "\u0667", "+7", "1_000", " 0xff ", "0x 1f", "0x-1")]


@pytest.mark.parametrize("command", [["bookie-fsck", ROOT], ["bkdisk", "inventory", ROOT]], ids=["fsck", "inventory"])
@pytest.mark.parametrize("option,value,said", BAD, ids=[f"{o}={v}" for o, v, _ in BAD])
def test_a_bad_ledger_option_is_one_line_naming_the_option(command, option, value, said):
    extra = ["--ledger-id", "1"] if option == "--ledger-scope-id" else []
    p = subprocess.run([str(BIN / command[0]), *command[1:], *extra, option, value],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 16, p.stderr
    assert p.stderr.strip().splitlines()[-1] == f"Error: Invalid value for {option}: {said}"
    assert "Traceback" not in p.stderr and "int()" not in p.stderr and "<bytes>" not in p.stderr


@pytest.mark.parametrize("value", ["255", "0xff", "0XFF", "0255"])
def test_decimal_and_hex_name_the_same_ledger(value):
    from bkdisk.commandline.ledger_options import resolve_ledger
    from bkdisk.formats.ids import LedgerId
    assert resolve_ledger(value, None, None) == LedgerId(0, 255)
    assert resolve_ledger(value, "0x10", None) == LedgerId(16, 255)
    assert resolve_ledger(None, None, "0000000000000010" "00000000000000ff") == LedgerId(16, 255)


# Every command taking --ledger-qualified-name, and what it needs besides to get as far as reading it.
QNAME_COMMANDS = {"fsck": (["bookie-fsck"], [ROOT]), "inventory": (["bkdisk", "inventory"], [ROOT]),
                  "dump-index": (["bkdisk", "dump", "index"], [ROOT]),
                  "read-ledger": (["bkdisk", "read-ledger"], [ROOT]),
                  "metadata-get": (["bkdisk", "metadata", "get"], ["--server", "127.0.0.1:1"])}
SHORT = ["ff", "1234", "00000000000000ff", "0x" + "f" * 31, "0" * 33, "0000-00ff", ""]


@pytest.mark.parametrize("name", sorted(QNAME_COMMANDS))
def test_every_command_s_help_says_a_qualified_name_is_32_hex_digits(name):
    command, _extra = QNAME_COMMANDS[name]
    p = subprocess.run([str(BIN / command[0]), *command[1:], "--help"], capture_output=True, text=True, timeout=60)
    said = " ".join(p.stdout.split())
    assert p.returncode == 0 and "exactly 32 hex digits: 16 of the scope id, then 16 of the ledger id" in said, said


@pytest.mark.parametrize("name", sorted(QNAME_COMMANDS))
@pytest.mark.parametrize("value", SHORT, ids=[repr(v) for v in SHORT])
def test_a_qualified_name_of_another_length_is_a_usage_error_in_every_command(name, value):
    """(not padded: '1234' would name ledger 0x1234, and 16 digits a scope-0 ledger where a scope was meant)"""
    command, extra = QNAME_COMMANDS[name]
    p = subprocess.run([str(BIN / command[0]), *command[1:], *extra, "--ledger-qualified-name", value],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 16, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: Invalid value for --ledger-qualified-name: expected exactly 32 hex digits "
                           f"(16 of the scope id, then 16 of the ledger id), found {value!r}"), last
    assert "Traceback" not in p.stderr and "<bytes>" not in p.stderr and p.stdout == ""


@pytest.mark.parametrize("value", ["000000000000000000000000000000ff", "0x000000000000000000000000000000FF",
                                   "00000000-0000-0000-0000-0000000000ff"])
def test_a_32_digit_qualified_name_names_the_ledger_in_any_of_its_forms(value):
    from bkdisk.commandline.ledger_options import resolve_ledger
    from bkdisk.formats.ids import LedgerId
    assert resolve_ledger(None, None, value) == LedgerId(0, 255)
    p = subprocess.run([str(BIN / "bkdisk"), "inventory", ROOT, "--jsonl", "--ledger-qualified-name", value],
                       capture_output=True, text=True, timeout=60)
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 0 and len(rows) == 13 and {r["ledger"] for r in rows} == {255}, p.stderr
