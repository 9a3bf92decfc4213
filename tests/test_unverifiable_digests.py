"""An entry that carries no digest (DUMMY) was not verified: its digest_ok is null and it is counted
unverifiable, and the audit's divergence check, which compares payloads, is what finds its damage."""
from __future__ import annotations

import json

from click.testing import CliRunner

from bkdisk.formats.ids import LedgerId
from bkdisk.inventory_cli import inventory
from tests.fsck_helpers import flip_payload, make_disk

DUMMY_LEDGER = LedgerId(0, 256)   # the demo bookie's DUMMY-digest ledger


def test_a_flipped_dummy_entry_is_null_not_ok_and_counted_unverifiable(tmp_path):
    disk = make_disk(str(tmp_path))
    flip_payload(disk.written, DUMMY_LEDGER, 3)
    r = CliRunner().invoke(inventory, [disk.root, "--metadata-dir", disk.md_dir, "--jsonl"])
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    dummy = [x for x in rows if x["ledger"] == DUMMY_LEDGER.ledger]
    assert dummy and all(x["digest_type"] == "DUMMY" and x["digest_ok"] is None for x in dummy)
    assert all(x["digest_ok"] is True for x in rows if x["digest_type"] in ("CRC32", "CRC32C"))
    summary = CliRunner().invoke(inventory, [disk.root, "--metadata-dir", disk.md_dir]).output
    unverifiable = sum(1 for x in rows if x["digest_ok"] is None)
    ok = sum(1 for x in rows if x["digest_ok"] is True)
    assert f"digests ok {ok}, bad 0, unverifiable {unverifiable};" in summary, summary
    assert unverifiable >= len(dummy)


def test_the_divergence_check_compares_copies_that_carry_no_digest():
    from bkdisk.audit.tables import divergent
    from tests.spark_session import shared_spark
    spark = shared_spark()
    cols = ("ledger_scope long, ledger_id long, entry_id long, payload_sha256 string, digest_ok boolean, "
            "bookie_id string")
    rows = [(0, 256, 3, "a" * 64, None, "bk-1"), (0, 256, 3, "b" * 64, None, "bk-2"),   # DUMMY copies differ
            (0, 256, 4, "c" * 64, None, "bk-1"), (0, 256, 4, "c" * 64, None, "bk-2"),   # DUMMY copies agree
            (0, 7, 1, "d" * 64, True, "bk-1"), (0, 7, 1, "e" * 64, False, "bk-2")]      # one copy fails its digest
    found = divergent(spark.createDataFrame(rows, cols)).collect()
    assert [(r["ledger_id"], r["entry_id"], r["fingerprints"]) for r in found] == [(256, 3, 2)]
