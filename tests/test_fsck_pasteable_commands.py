"""Every command the repair plan gives an operator to paste names the ledgers the plan means, in the
form the named tool parses; a ledger that tool cannot address gets an explanation instead."""
from __future__ import annotations

import json
import os
import re

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from bkdisk.bookie.metadata_dir import load_metadata_dir
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.shell_commands import JAVA_LONG_MAX, recover_commands
from bkdisk.fsck_cli import fsck_command
from tests.fsck_helpers import make_disk

RECOVER = re.compile(r"bin/bookkeeper shell recover -l (\S+) (\S+)")


def _pasted_ids(command: str) -> list[str]:
    """The ledger ids a shell would pass to `recover -l`, expanding a `for L in ...; do` loop."""
    loop = re.match(r"for L in ([^;]+); do (.*?); done", command)
    if loop:
        return [loop.group(2).replace("$L", a) for a in loop.group(1).split()]
    return [command]


def test_the_recovery_command_names_only_ledgers_the_shell_can_parse_and_the_metadata_holds(tmp_path):
    disk = make_disk(str(tmp_path))
    os.remove(os.path.join(disk.root, "ledgers0", "current", "2.log"))
    r = CliRunner().invoke(fsck_command, [disk.root, "--metadata-dir", disk.md_dir, "-n", "--json"])
    plan = json.loads(r.stdout)["repair"]["plan"]
    lost = {LedgerId(l["scope"], l["ledger"]) for l in plan["lost_entries"]}
    assert any(l.scope for l in lost) and any(not l.scope for l in lost), lost
    md, errors = load_metadata_dir(disk.md_dir)
    assert not errors
    pasted = set()
    for run in _pasted_ids(plan["recover_command"]):
        for arg, bookie in RECOVER.findall(run):
            # Java's Long.parseLong: decimal digits only, within a signed 64-bit long.
            assert re.fullmatch(r"[0-9]+", arg) and int(arg) <= JAVA_LONG_MAX, arg
            lid = LedgerId(0, int(arg))
            assert lid in md, f"{arg} names no ledger in the bookie's metadata"
            assert any(bookie in members for _first, members in md[lid].ensembles), (arg, bookie)
            pasted.add(lid)
    assert pasted == {l for l in lost if l.scope == 0}
    for scoped in (l for l in lost if l.scope):
        assert scoped in md
        assert str(scoped.ledger) not in plan["recover_command"].split()
        assert any(scoped.qualified_name in why and "64-bit" in why for why in plan["recover_refused"])
    text = CliRunner().invoke(fsck_command, [disk.root, "--metadata-dir", disk.md_dir, "-n"]).stdout
    assert plan["recover_command"] in text
    assert all(f"no shell command: {why}" in text for why in plan["recover_refused"])


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, (1 << 64) - 1)), min_size=1, max_size=6, unique=True))
def test_a_ledger_the_shell_cannot_parse_is_explained_never_printed(ids):
    lids = [LedgerId(s, l) for s, l in ids]
    command, refused = recover_commands(lids, "bk-1:3181")
    printed = set() if command is None else {
        int(a) for run in _pasted_ids(command.split("  (or")[0]) for a, _b in RECOVER.findall(run)}
    for lid in lids:
        addressable = lid.scope == 0 and lid.ledger <= JAVA_LONG_MAX
        assert (lid.ledger in printed) == addressable or (not addressable and any(
            l.ledger == lid.ledger and l.scope == 0 and l.ledger <= JAVA_LONG_MAX for l in lids))
        assert addressable or any((lid.qualified_name if lid.scope else str(lid.ledger)) in why for why in refused)
    assert len(refused) == sum(1 for l in lids if not (l.scope == 0 and l.ledger <= JAVA_LONG_MAX))
