"""An index rebuilt from the entry logs is sized by entry ids a damaged header cannot inflate: a copy
whose digest fails counts only up to the last entry id the other copies or the current index vouch
for, and a rebuild that would still need a giant index is refused in one plan line. Before, one
flipped bit in an entry id made `bookie-fsck -n` die allocating 32 GiB."""
from __future__ import annotations

import json
import os

from click.testing import CliRunner
from conftest import GOLDEN, golden_copy

from bkdisk.fsck_cli import fsck_command
from tests.fsck_helpers import snapshot

CORPUS = "interleaved-v6-hostport"
METADATA = str(GOLDEN / CORPUS / "metadata")


def _cli(*args):
    return CliRunner().invoke(fsck_command, [*args, "--no-progress"], catch_exceptions=False)


def _set_byte(path, offset: int, value: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes([value]))


def _first_entry(ledger_dir: str, log_id: int, digest: str):
    """(ledger, entry, offset) of the first entry in that log of the golden disk whose ledger uses
    ``digest``, as the inventory lists them."""
    from bkdisk.inventory_cli import inventory
    r = CliRunner().invoke(inventory, [str(GOLDEN / CORPUS), "--jsonl", "--metadata-dir", METADATA])
    rows = [json.loads(line) for line in r.output.splitlines() if line.startswith("{")]
    row = next(x for x in rows if (x["ledger_dir"], x["log_id"], x["digest_type"]) == (ledger_dir, log_id, digest))
    return row["ledger"], row["entry"], row["offset"]


ENTRY_ID_BYTE_3 = 4 + 8 + 3   # size prefix, ledger id, then the entry id's bits 32-39 (big-endian)


def test_a_failed_copy_with_a_damaged_entry_id_is_left_out_of_the_rebuild(tmp_path):
    root = golden_copy(tmp_path)
    ledger, entry, offset = _first_entry("ledgers0", 2, "CRC32C")
    _set_byte(root / "ledgers0" / "current" / "2.log", offset + ENTRY_ID_BYTE_3, 1)   # entry id + 2^32
    r = _cli(str(root), "-n", "--metadata-dir", METADATA)
    assert r.exit_code == 4, r.output
    plan = r.output[r.output.index("Repair plan:"):]
    assert f"rebuild the index of ledger {ledger}" in plan
    assert f"entries {entry} it points at are in no entry log" in plan and "refused" not in plan
    r = _cli(str(root), "--repair", "-y", "--rebuild-dropping-lost-entries", "--metadata-dir", METADATA)
    sizes = [os.path.getsize(p) for p in root.rglob("*.idx")]
    assert r.exit_code == 4, r.output     # the damaged copy itself stays an error
    assert max(sizes) < 1 << 20, sizes


def test_a_rebuild_that_would_need_a_giant_index_is_refused_in_one_line_and_writes_nothing(tmp_path):
    root = golden_copy(tmp_path)
    # a DUMMY-digest ledger: nothing tells the damaged copy from a real one but its entry id
    ledger, _entry, offset = _first_entry("ledgers1", 0, "DUMMY")
    log = root / "ledgers1" / "current" / "0.log"
    _set_byte(log, offset + ENTRY_ID_BYTE_3, 1)
    before = snapshot(str(root))
    r = _cli(str(root), "-n")
    assert r.exit_code == 4, r.output
    [line] = [x for x in r.output.splitlines() if f"rebuild the index of ledger {ledger}" in x]
    assert "would make a rebuilt index of 32.0 GiB" in line and "rebuild refused" in line
    assert f"entry log 0 at offset {offset}" in line
    r = _cli(str(root), "--repair", "-y", "--rebuild-dropping-lost-entries")
    assert r.exit_code == 4, r.output
    assert "rebuild refused" in r.output
    after = snapshot(str(root))
    assert {k: v for k, v in after.items() if "fsck-backup" not in k} == before
