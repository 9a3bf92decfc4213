"""The disk task's ledger_keys rows and the replicas' LAC and cumulative length, read from golden
cluster-3 (an Interleaved and a DbLedgerStorage bookie): what salvage takes from each disk."""
from __future__ import annotations

import json

import pytest
from conftest import GOLDEN
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.audit.rows import DiskInput, RunInfo, scan_disk, split_tables

C3 = GOLDEN / "cluster-3"
MANIFEST = json.loads((C3 / "manifest.json").read_text())
SCOPES, LEDGERS = st.sampled_from([0, 1, 2**64 - 1]), st.integers(0, 2**64 - 1) | st.integers(0, 9)


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


@settings(max_examples=150, deadline=None)
@given(keyed=st.dictionaries(st.tuples(SCOPES, LEDGERS), st.binary(min_size=1, max_size=3), max_size=12),
       lacs=st.lists(st.tuples(SCOPES, LEDGERS, st.none() | st.integers(-1, 2**62)), max_size=12),
       batch=st.integers(1, 4))
def test_journal_keys_and_lacs_a_row_a_ledger_in_batches(keyed, lacs, batch):
    """(a ledger the journals give a key: one row with its LAC; one they give only a LAC: a row without a key)"""
    from types import SimpleNamespace

    import numpy as np

    import bkdisk.audit.ledger_keys as lk
    from bkdisk.formats.ids import LedgerId, to_signed64
    from bkdisk.formats.journal import LAC_BODY
    from bkdisk.journal.ledger_keys import LedgerKeys
    ids = list(keyed)
    table = LedgerKeys.of_ids(np.array([s for s, _l in ids], np.uint64), np.array([x for _s, x in ids], np.uint64),
                              list(keyed.values()), np.arange(len(ids)))
    body = {LedgerId(s, x): None if lac is None else LAC_BODY.build({"ledger_id": x, "lac": lac, "digest": b""})
            for s, x, lac in lacs}
    ctx = SimpleNamespace(dirs=SimpleNamespace(storage_kind="empty"),
                          journal_facts=SimpleNamespace(master_keys=table, explicit_lac=body))
    lac_of = {LedgerId(s, x): lac for s, x, lac in lacs}   # (the last of a ledger's)
    want = {(to_signed64(s), to_signed64(x)): (k.hex(), lac_of.get(LedgerId(s, x))) for (s, x), k in keyed.items()}
    want.update({(to_signed64(lid.scope), to_signed64(lid.ledger)): (None, lac)
                 for lid, lac in lac_of.items() if (lid.scope, lid.ledger) not in keyed})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lk, "KEY_BATCH_ROWS", batch)
        got = list(lk.key_rows(ctx))
    assert {(s, x): (k, lac) for s, x, k, lac, _src in got} == want and len(got) == len(want)
