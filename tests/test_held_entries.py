"""Pass 7's entries held per ledger (fsck.held_entries): rows of many interleaved ledgers, added in parts
(index chunks, logs, the journal's pending adds), give each ledger's distinct entry ids and their count."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.formats.ids import LedgerId
from bkdisk.fsck import held_entries as he
from bkdisk.fsck.held_entries import HeldEntries

U64 = st.integers(0, 2**64 - 1)
ROWS = st.lists(st.tuples(st.sampled_from([0, 1, 2**63 + 5]), st.sampled_from([0, 7, 2**63, 2**64 - 1]) | U64,
                          st.integers(-1, 40) | st.integers(-1, 10**6)), max_size=300)


@settings(max_examples=300, deadline=None)
@given(ROWS, st.integers(1, 5), st.lists(st.tuples(st.sampled_from([0, 1]), st.sampled_from([0, 7, 9])), max_size=4),
       st.integers(1, 64))
def test_rows_added_in_parts_give_each_ledgers_distinct_entries(rows, parts, empty, batch):
    """(entries repeated within a part and across parts, ledgers with no entry, counts worked out in
    batches of as few as one entry)"""
    scope = np.array([r[0] for r in rows], np.uint64)
    ledger = np.array([r[1] for r in rows], np.uint64)
    entry = np.array([r[2] for r in rows], np.int64)
    held = HeldEntries()
    held.add_ledgers(np.array([e[0] for e in empty], np.uint64), np.array([e[1] for e in empty], np.uint64))
    for cut in np.array_split(np.arange(len(rows)), parts):
        held.add(scope[cut], ledger[cut], entry[cut])
    held.finish()
    want: dict[LedgerId, set[int]] = {LedgerId(s, lg): set() for s, lg in empty}
    for s, lg, e in rows:
        want.setdefault(LedgerId(s, lg), set()).add(e)
    order = sorted(want)
    assert [LedgerId(s, lg) for s, lg in zip(held.scope.tolist(), held.ledger.tolist())] == order
    for i, lid in enumerate(order):
        ids = held.ids(i)
        assert ids.dtype == np.int64 and ids.tolist() == sorted(want[lid])
        assert held.find(lid) == i
    assert held.find(LedgerId(3, 3)) == -1
    old = he.COUNT_BATCH
    he.COUNT_BATCH = batch
    try:
        assert held.counts().tolist() == [len(want[lid]) for lid in order]
        asked = np.arange(len(order))[::2]
        groups = list(held.batches(asked))
        assert np.concatenate(groups or [asked[:0]]).tolist() == asked.tolist()
        for group in groups:   # (each ledger's runs together, an id in two parts twice)
            ids, cuts = held.gathered(group)
            assert [sorted(set(ids[a:b].tolist())) for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist())] == \
                [sorted(want[order[i]]) for i in group.tolist()]
    finally:
        he.COUNT_BATCH = old


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2**63]), st.sampled_from([0, 5, 2**64 - 1]) | U64), max_size=30),
       st.lists(st.tuples(st.sampled_from([0, 1, 2**63]), st.sampled_from([0, 5, 2**64 - 1]) | U64), max_size=30))
def test_pair_members_is_membership_of_scope_ledger_pairs(rows, among):
    from bkdisk.diskio.distinct import pair_members
    col = lambda xs, k: np.array([x[k] for x in xs], np.uint64)   # noqa: E731
    got = pair_members(col(rows, 0), col(rows, 1), col(among, 0), col(among, 1))
    assert got.tolist() == [r in set(among) for r in rows]


def test_pair_members_of_a_listing_of_as_many_scopes_as_ledgers():
    """(BP-35 ids: a folder of 128-bit ledgers, each of its own scope, against a bookie's)"""
    from bkdisk.diskio.distinct import pair_members
    rng = np.random.default_rng(5)
    among = rng.integers(0, 2**64 - 1, (50_000, 2), dtype=np.uint64)
    rows = np.concatenate([among[::7], rng.integers(0, 2**64 - 1, (20_000, 2), dtype=np.uint64)])
    got = pair_members(rows[:, 0], rows[:, 1], among[:, 0], among[:, 1])
    assert got[:len(among[::7])].all() and not got[len(among[::7]):].any()


def test_a_folder_view_knows_the_ledgers_it_lists_in_batches(tmp_path, monkeypatch):
    """(plain and 32-digit scoped names, both files of one ledger, names of no ledger, a file that does
    not parse: listed, so known, though reading it fails)"""
    import shutil

    from conftest import GOLDEN

    from bkdisk.bookie import metadata_dir as mdd
    md = tmp_path / "md"
    shutil.copytree(GOLDEN / "cluster-3" / "metadata", md)
    scoped = LedgerId(7, 2**64 - 3)
    shutil.copy(md / "10.bin", md / f"{scoped.qualified_name}.bin")
    (md / "zz.txt").write_text("x")
    (md / "ff.bin").write_bytes(b"not metadata")
    (md / ("1" * 33 + ".bin")).write_bytes(b"")
    monkeypatch.setattr(mdd, "LISTED_BATCH", 3)
    view, errors = mdd.bookie_metadata_dir(str(md), None)
    assert len(errors) == 1
    ask = [LedgerId(0, 0x10), LedgerId(0, 0x2a), LedgerId(0, 0xff), LedgerId(0, 0x100000000), scoped,
           LedgerId(0, 0x12), LedgerId(7, 0x10), LedgerId(0, 2**64 - 3)]
    got = view.known(np.array([a.scope for a in ask], np.uint64), np.array([a.ledger for a in ask], np.uint64))
    assert got.tolist() == [True, True, True, True, True, False, False, False]
    assert [a in view for a in ask] == [True, True, False, True, True, False, False, False]   # (ff's file fails)
    # a ledger looked up is kept, found or not: asked again (space, the audit's rows), it is not read again
    asked = []
    real = view.lookup
    view.lookup = lambda lid: asked.append(lid) or real(lid)
    assert [a in view for a in ask] == [True, True, False, True, True, False, False, False]
    assert asked == []


@pytest.mark.parametrize("keep", [None, 0, 3])
def test_pass_7_finds_the_same_with_a_folder_view_as_with_every_ledger_loaded(tmp_path, keep):
    """Orphans told from the folder's listing, the rest asked: the findings of the whole folder loaded
    (none of the bookie's ledgers with metadata, some, all the cluster's)."""
    import shutil

    from conftest import GOLDEN

    from bkdisk.bookie.layout import discover
    from bkdisk.bookie.metadata_dir import load_metadata_dir
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    md = tmp_path / "md"
    md.mkdir()
    names = sorted(p.name for p in (GOLDEN / "cluster-3" / "metadata").iterdir())
    for n in names if keep is None else names[:keep]:
        shutil.copy(GOLDEN / "cluster-3" / "metadata" / n, md / n)
    whole, _ = load_metadata_dir(str(md))
    for bookie in ("interleaved-v6-hostport", "cluster-3/bookies/bk-2.rack-a"):
        dirs = discover(str(GOLDEN / bookie))
        viewed = check_bookie(dirs, CheckOptions(metadata_dir=str(md)))
        loaded = check_bookie(dirs, CheckOptions(metadata=whole))
        got = [f.to_json() for f in viewed.findings if f.pass_no == 7]
        assert got == [f.to_json() for f in loaded.findings if f.pass_no == 7], bookie
        assert any(f["code"] == "ORPHAN_LEDGER" for f in got) or keep is None
        viewed.close()
        loaded.close()


def test_a_bookie_s_view_shares_what_its_ledgers_metadata_repeat(tmp_path):
    """The view's metadata equal, field for field and serialized, what each file gives alone; what
    ledgers repeat (ensembles, bookie ids, passwords, custom keys and values) held once."""
    from bench.metadata_gen import write_shaped_folder
    from bkdisk.bookie.metadata_dir import bookie_metadata_dir, read_ledger_file
    from bkdisk.formats.metadata import serialize_metadata
    bookies = ["bk-a:3181", "bk-b:3181", "bk-c:3181", "bk-d:3181"]
    write_shaped_folder(str(tmp_path), 1500, bookies)
    view, errors = bookie_metadata_dir(str(tmp_path), "bk-a:3181")
    assert not errors and len(view.near) > 500
    seen: dict = {}
    for lid, m in view.near.items():
        alone = read_ledger_file(str(tmp_path), lid)
        assert m == alone and serialize_metadata(m) == serialize_metadata(alone)
        for v in (m.password, *(b for _f, members in m.ensembles for b in members),
                  *(x for pair in m.custom_metadata for x in pair)):
            assert seen.setdefault(v, v) is v   # (an equal value met before is the same object)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2**63]), st.sampled_from([0, 5, 2**64 - 1]) | U64,
                          st.lists(st.integers(-1, 10**6), min_size=5, max_size=20)), max_size=12),
       st.booleans())
def test_rows_that_come_a_ledger_at_a_time_are_ordered_by_their_runs(runs, sort_each):
    """Rows as an index chunk gives them (a file's entries ascending, file after file, in no order of
    ledger) are ordered by their runs' keys; a ledger in two runs, or a run out of order, sorted whole:
    the same ids either way."""
    rows = [(s, led, e) for s, led, ids in runs for e in (sorted(set(ids)) if sort_each else ids)]
    held = HeldEntries()
    held.add(np.array([r[0] for r in rows], np.uint64), np.array([r[1] for r in rows], np.uint64),
             np.array([r[2] for r in rows], np.int64))
    held.finish()
    want: dict[LedgerId, set[int]] = {}
    for s, led, ids in runs:
        want.setdefault(LedgerId(s, led), set()).update(ids)
    assert [LedgerId(s, lg) for s, lg in zip(held.scope.tolist(), held.ledger.tolist())] == sorted(want)
    assert [held.ids(i).tolist() for i in range(len(held))] == [sorted(want[lid]) for lid in sorted(want)]
    assert held.counts().tolist() == [len(want[lid]) for lid in sorted(want)]


def test_pass_7_holds_each_named_index_files_ledger_once_whether_or_not_it_locates_entries(monkeypatch):
    """An index file that locates nothing still holds its ledger (an orphan of 0 entries where metadata
    has none); one that locates entries is its ledger's single run of ids (in one chunk of locations),
    counted the short way; a file whose name is no ledger's holds only what it locates. The same read a
    location at a time."""
    from types import SimpleNamespace

    from bkdisk.fsck.passes import p7_metadata
    from bkdisk.indexfiles.arrays import INDEX_FILE_DTYPE, LOCATION_DTYPE
    from bkdisk.journal.pending import PendingRecords
    files = np.zeros(5, INDEX_FILE_DTYPE)
    for i, (scope, ledger, named) in enumerate([(0, 5, True), (0, 7, True), (0, 9, False), (1, 8, True),
                                                (0, 11, False)]):
        files[i]["scope"], files[i]["ledger"], files[i]["named"] = scope, ledger, named
    locations = np.zeros(5, LOCATION_DTYPE)
    locations["file"] = [4, 4, 0, 0, 0]
    locations["entry"] = [3, 4, 0, 1, 1]
    ctx = SimpleNamespace(dirs=SimpleNamespace(storage_kind="index-files"),
                          index_inventory=SimpleNamespace(files=files, locations=locations),
                          journal_facts=SimpleNamespace(pending=PendingRecords()))
    for chunk in (p7_metadata.CHUNK, 1):
        monkeypatch.setattr(p7_metadata, "CHUNK", chunk)
        held = p7_metadata.held_entries(ctx)
        assert list(zip(held.scope.tolist(), held.ledger.tolist())) == [(0, 5), (0, 7), (0, 11), (1, 8)]
        assert held.counts().tolist() == [2, 0, 2, 0]
        assert held.ids(0).tolist() == [0, 1] and held.ids(2).tolist() == [3, 4]
        # (a run per chunk a ledger's locations are in; a run of none only for a file that locates none)
        assert held._nruns.tolist() == ([1, 1, 1, 1] if chunk > 1 else [3, 1, 2, 1])
