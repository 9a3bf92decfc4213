"""The disk task's ledger_keys rows and the replicas' LAC and cumulative length, read from golden
cluster-3 (an Interleaved and a DbLedgerStorage bookie): what salvage takes from each disk."""
from __future__ import annotations

import json

import pytest
from conftest import GOLDEN

from bkdisk.audit.rows import DiskInput, RunInfo, scan_disk, split_tables

C3 = GOLDEN / "cluster-3"
MANIFEST = json.loads((C3 / "manifest.json").read_text())


@pytest.mark.parametrize("bookie,sources", [("bk-1.rack-a", {"index", "journal"}),
                                            ("bk-3.rack-b", {"ledgers_index", "journal"})])
def test_master_keys_and_explicit_lacs_of_every_ledger_from_each_place_the_disk_keeps_them(bookie, sources):
    t = split_tables(scan_disk(DiskInput(str(C3 / "bookies" / bookie)), {}, RunInfo.new("t")), ["ledger_keys"])
    got: dict[tuple[int, str], tuple[str, int | None]] = {
        (r["ledger_id"], r["key_source"]): (r["master_key"], r["explicit_lac"]) for r in t["ledger_keys"].to_pylist()}
    assert {s for _l, s in got} == sources
    for lg in MANIFEST["ledgers"]:
        lac = lg["explicit_lac"] if bookie in lg["explicit_lac_sent_to"] else None
        for s in sources:
            assert got[(int(lg["ledger_id"]), s)] == (lg["master_key_hex"], lac), (lg["ledger_id"], s)


def test_each_copy_carries_its_lac_and_cumulative_length():
    t = split_tables(scan_disk(DiskInput(str(C3 / "bookies" / "bk-2.rack-a")), {}, RunInfo.new("t")))
    want = {(int(r["ledger_id"]), r["entry_id"]): (r["last_add_confirmed"], r["ledger_length_after_entry"], 1)
            for r in MANIFEST["entries"] if "bk-2.rack-a" in r["bookies"]}
    got = {(r["ledger_id"], r["entry_id"]): (r["lac"], r["ledger_length"], r["entry_format"])
           for r in t["replicas"].to_pylist()}
    assert got == want
