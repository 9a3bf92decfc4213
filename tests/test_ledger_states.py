"""The space accounting's per-ledger facts (bookie.ledger_states): a view that holds ledgers as columns
is decided a shape at a time, and must say of every ledger what the metadata looked up one ledger at
a time says: golden bookies against their metadata, changed at random (deleted, open, moved off the
bookie, no creation time, a Pulsar topic), some ledgers held as columns and the others looked up."""
from __future__ import annotations

import dataclasses

from conftest import GOLDEN
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie.gc_policy import GcSettings
from bkdisk.bookie.layout import bookie_id_of, discover
from bkdisk.bookie.metadata_dir import MetadataView, load_metadata_dir
from bkdisk.bookie.near_ledgers import NearLedgers
from bkdisk.bookie.space import account_bookie, indexed_ledgers
from bkdisk.diskio.distinct import PairSet

BOOKIES = [GOLDEN / "cluster-3" / "bookies" / "bk-1.rack-a", GOLDEN / "cluster-3" / "bookies" / "bk-3.rack-b",
           GOLDEN / "interleaved-v6-hostport", GOLDEN / "sorted-v5-bookieid", GOLDEN / "dbstorage-v6-bookieid"]
METADATA = {str(b): load_metadata_dir(str(b.parent.parent / "metadata" if "cluster-3" in str(b) else b / "metadata"))[0]
            for b in BOOKIES}
TOPICS = [b"public/default/persistent/orders", b"t/ns/persistent/a%2Fb", b"elsewhere"]
CHANGES = st.sampled_from(["same", "same", "gone", "open", "moved", "undated", "dated0", "topic0", "topic1", "topic2"])


def changed(m, how: str):
    if how == "gone":
        return None
    if how == "open":
        return dataclasses.replace(m, state="OPEN")
    if how == "moved":   # (closed, and this bookie in none of its ensembles: over-replicated here)
        return dataclasses.replace(m, ensembles=tuple((f, tuple(f"other-{i}:3181" for i in range(len(b))))
                                                      for f, b in m.ensembles))
    if how == "undated":
        return dataclasses.replace(m, ctime=None)
    if how == "dated0":   # (a creation time of 0 stored: not "none")
        return dataclasses.replace(m, ctime=0)
    if how.startswith("topic"):
        return dataclasses.replace(m, custom_metadata=(("pulsar/managed-ledger", TOPICS[int(how[-1])]),))
    return m


@settings(max_examples=80, deadline=None)
@given(which=st.integers(0, len(BOOKIES) - 1), how=st.lists(CHANGES, min_size=8, max_size=8),
       held=st.lists(st.booleans(), min_size=8, max_size=8), check=st.booleans(),
       indexed=st.lists(st.booleans(), min_size=8, max_size=8), foreign=st.booleans())
def test_ledgers_held_as_columns_get_the_facts_of_those_looked_up_one_by_one(which, how, held, check, indexed,
                                                                            foreign):
    """(some ledgers out of the bookie's index: not-indexed; the bookie named otherwise: every closed ledger
    over-replicated)"""
    root = BOOKIES[which]
    dirs = discover(str(root))
    groups, _warnings = indexed_ledgers(dirs)
    kept = [PairSet(g.scope[[indexed[i % 8] for i in range(len(g))]], g.ledger[[indexed[i % 8] for i in range(len(g))]])
            for g in groups]
    bookie = "elsewhere:3181" if foreign else None
    md = {}
    for i, (lid, m) in enumerate(sorted(METADATA[str(root)].items())):
        c = changed(m, how[i % 8])
        if c is not None:
            md[lid] = c
    as_columns = NearLedgers.of({lid: m for i, (lid, m) in enumerate(sorted(md.items())) if held[i % 8]})
    view = MetadataView(as_columns, lambda lid: md.get(lid))
    gc = GcSettings(gcOverreplicatedLedgerWaitTime=86400000 if check else 0)
    want = account_bookie(dirs, md, gc, indexed=kept, bookie_id=bookie)
    got = account_bookie(dirs, view, gc, indexed=kept, bookie_id=bookie)
    assert list(got.rows()) == list(want.rows())
    assert bookie_id_of(dirs) is not None and len(want.ledgers) > 0
