"""Entries placed on a bookie, counted for many ledgers at once (fsck.ensemble_placement): the counts of
what pass 7 compares id by id, and pass 7 deciding striped, changed and open ledgers by them."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie.near_ledgers import NearLedgers
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.fsck import ensemble_placement as placement
from bkdisk.fsck import held_entries as he
from bkdisk.fsck.ensemble_placement import Placement, expected_entries
from bkdisk.fsck.held_entries import HeldEntries
from bkdisk.fsck.passes import p7_metadata
from bkdisk.fsck.passes.p7_metadata import _missing_entries

ME, OTHERS = "me:3181", ("b:1", "c:2", "d:3", "e:4")


@st.composite
def placed(draw) -> LedgerMetadata:
    """Closed metadata BookKeeper's client loads (E >= Qw >= Qa), this bookie anywhere or nowhere in each
    of up to four ensembles (twice in one, sometimes), from entry ids near 0 or near 2^62."""
    size = draw(st.integers(1, 5))
    base = draw(st.sampled_from([0, 0, 2**40, 2**62 - 200]))
    firsts = sorted(set(draw(st.lists(st.integers(0, 60), min_size=1, max_size=4))))
    ensembles = []
    for f in firsts:
        e = list(draw(st.permutations((ME, *OTHERS))))[:size]
        if size > 1 and draw(st.integers(0, 5)) == 0:
            e[-1] = ME
        ensembles.append((base + f, tuple(e)))
    wq = draw(st.integers(1, size))
    return LedgerMetadata(format_version=3, write_quorum=wq, ensemble_size=size, ack_quorum=draw(st.integers(1, wq)),
                          length=0, last_entry_id=base + draw(st.integers(-1, 90)), state="CLOSED",
                          ensembles=tuple(ensembles))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(placed(), st.lists(st.integers(-3, 100), max_size=40), st.integers(1, 3)),
                min_size=1, max_size=8))
def test_counts_are_those_of_the_ids_placed_one_by_one(ledgers):
    """Per ledger: the entries its segments place here (the round after the last whole one included), and
    of the ids held, given in runs with repeats and out of order, the distinct ones among them."""
    shapes = [m for m, _ids, _r in ledgers]
    p = Placement.of(shapes, ME)
    assert p.counted.all()
    shape = np.arange(len(ledgers))
    last = np.array([m.last_entry_id for m in shapes], np.int64)
    want = [expected_entries(m, ME, m.last_entry_id) for m in shapes]
    assert p.wanted(shape, last).tolist() == [len(w) for w in want]
    base = [m.ensembles[0][0] for m in shapes]
    held = [[b + i for i in ids] for b, (_m, ids, _r) in zip(base, ledgers)]
    # (ascending runs, as a ledger's in the parts a check holds; or as drawn, in no order)
    runs = [sorted(h[k::r]) if r < 3 else h[k::r] for h, (_m, _ids, r) in zip(held, ledgers) for k in range(r)]
    ids = np.array([e for run in runs for e in run], np.int64)
    cuts = np.cumsum([0] + [len(h) for h in held])
    assert p.held(ids, cuts, shape, last).tolist() == [len(set(h) & set(w.tolist())) for h, w in zip(held, want)]


def test_shapes_compared_id_by_id_are_not_counted():
    """(refused by BookKeeper's client, an ensemble from a negative entry id, ensembles out of order)"""
    def md(ensembles, size=2):
        return LedgerMetadata(format_version=3, write_quorum=2, ensemble_size=size, ack_quorum=2, length=0,
                              last_entry_id=9, state="CLOSED", ensembles=ensembles)
    shapes = [md(((0, (ME, "b:1")),)), md(((0, (ME, "b:1", "c:2")),)), md(((-4, (ME, "b:1")),)),
              md(((5, (ME, "b:1")), (2, ("b:1", ME)))), md(((0, ("b:1", "c:2")),))]
    assert Placement.of(shapes, ME).counted.tolist() == [True, False, False, False, True]


def _striped(n: int, held_part: int) -> tuple[NearLedgers, HeldEntries, dict]:
    """``n`` ledgers of 3 bookies, Qw 2, this bookie at each index in turn, one in three changing its
    ensemble at entry 40; the bookie holding every entry 0..99 of each (more than it is given), in
    parts of ``held_part`` entries (a ledger's ids in several runs, the last part repeating the first)."""
    near, ids = NearLedgers(), {}
    for i in range(n):
        e = (ME, "b:1", "c:2")[i % 3:] + (ME, "b:1", "c:2")[:i % 3]
        ensembles = ((0, e), (40, e[1:] + e[:1])) if i % 3 == 0 else ((0, e),)
        near.add(LedgerId(0, 1000 + i), LedgerMetadata(
            format_version=3, write_quorum=2, ensemble_size=3, ack_quorum=2, length=0, last_entry_id=99,
            state="CLOSED", ensembles=ensembles))
        ids[LedgerId(0, 1000 + i)] = set(range(100))
    held = HeldEntries()
    for lo in [*range(0, 100, held_part), 0]:
        rows = [(lid.ledger, e) for lid, got in ids.items() for e in sorted(got) if lo <= e < lo + held_part]
        held.add(np.zeros(len(rows), np.uint64), np.array([r[0] for r in rows], np.uint64),
                 np.array([r[1] for r in rows], np.int64))
    return near, held.finish(), ids


@pytest.mark.parametrize("batch", [7, 1 << 20])
def test_pass_7_decides_striped_ledgers_held_whole_without_comparing_ids(monkeypatch, batch):
    """Every entry placed here is held: no ledger goes to the id-by-id comparison (which fails here if
    called); one entry taken away from one ledger, and that ledger alone is compared and reported."""
    monkeypatch.setattr(he, "COUNT_BATCH", batch)
    near, held, ids = _striped(30, 30)
    at = near.positions(held.scope, held.ledger)

    def not_here(*_a):
        raise AssertionError("compared id by id")
    monkeypatch.setattr(placement, "placed_blocks", not_here)
    assert list(_missing_entries(near, held, held.counts(), at, ME, set())) == []
    monkeypatch.undo()
    monkeypatch.setattr(he, "COUNT_BATCH", batch)

    lid = LedgerId(0, 1004)   # (this bookie third: given the entries e with (2 - e) mod 3 < 2, 1 among them)
    ids[lid].discard(1)
    held = HeldEntries()
    rows = [(x.ledger, e) for x, got in ids.items() for e in sorted(got)]
    held.add(np.zeros(len(rows), np.uint64), np.array([r[0] for r in rows], np.uint64),
             np.array([r[1] for r in rows], np.int64))
    held.finish()
    calls = []
    real = placement.placed_blocks

    def counted(m, me, last):
        calls.append(m)
        return real(m, me, last)
    monkeypatch.setattr(placement, "placed_blocks", counted)
    got = [(f.code.name, f.ledger, f.entry) for f in _missing_entries(near, held, held.counts(),
                                                                       near.positions(held.scope, held.ledger),
                                                                       ME, set())]
    assert got == [("ENTRY_MISSING", 1004, 1)] and len(calls) == 1


def test_pass_7_over_a_bookie_that_holds_nothing_finds_every_entry_placed_here_missing():
    """(storage wiped: no ledger held, every one of the metadata's compared)"""
    near = NearLedgers()
    near.add(LedgerId(0, 1), LedgerMetadata(format_version=3, write_quorum=1, ensemble_size=2, ack_quorum=1, length=0,
                                            last_entry_id=3, state="CLOSED", ensembles=((0, (ME, "b:1")),)))
    near.add(LedgerId(0, 2), LedgerMetadata(format_version=3, write_quorum=2, ensemble_size=2, ack_quorum=1, length=0,
                                            last_entry_id=-1, state="OPEN", ensembles=((0, (ME, "b:1")),)))
    held = HeldEntries().finish()
    got = [(f.code.name, f.ledger, f.entry) for f in _missing_entries(
        near, held, held.counts(), near.positions(held.scope, held.ledger), ME, set())]
    assert got == [("ENTRY_MISSING", 1, 0), ("ENTRY_MISSING", 1, 2)]


def test_a_ledger_of_billions_of_entries_missing_is_listed_in_part_and_counted(monkeypatch):
    """Metadata closed at entry 2^40 (or open, and one id held there; or closed past 2^62): the bookie
    holds 0..99 of a striped ledger and 2^40 - 5; the first missing ids are listed, a bounded number of
    them, and the finding says how many are missing where they were counted, in the memory of the ids
    listed."""
    monkeypatch.setattr(placement, "LISTED_MISSING", 1000)
    last = 2**40
    near = NearLedgers()
    for ledger, state, closed_at in ((1, "CLOSED", last), (2, "OPEN", -1), (3, "CLOSED", 2**62 + 10)):
        near.add(LedgerId(0, ledger), LedgerMetadata(
            format_version=3, write_quorum=2, ensemble_size=3, ack_quorum=2, length=0,
            last_entry_id=closed_at, state=state, ensembles=((0, (ME, "b:1", "c:2")),)))
    held = HeldEntries()
    for ledger in (1, 2, 3):
        ids = [*range(100), last - 5] if ledger == 1 else [*range(100), last] if ledger == 2 else [*range(100)]
        held.add(np.zeros(len(ids), np.uint64), np.full(len(ids), ledger, np.uint64), np.array(ids, np.int64))
    held.finish()
    got = list(_missing_entries(near, held, held.counts(), near.positions(held.scope, held.ledger), ME, set()))
    assert [(f.code.name, f.ledger) for f in got] == [("ENTRIES_MISSING", 1), ("ENTRIES_MISSING", 2),
                                                      ("ENTRIES_MISSING", 3)]
    # (closed past LAST_COUNTED: not counted, so the finding says only that there are more than it lists)
    assert got[2].extra["count"] is None and got[2].detail.startswith("more than 1000 entries (")
    assert got[2].extra["entries"] == got[0].extra["entries"]
    # (this bookie first of three, Qw 2: given the e with e mod 3 in {0, 2}, 2^40 + 1 of them up to 2^40 = 1
    # mod 3; held: 67 of 0..99, and 2^40 - 5 (2 mod 3) of the first, not 2^40 of the second)
    given = (last + 1) // 3 * 2 + 1
    for f, held_here in zip(got[:2], (68, 67)):
        listed = f.extra["entries"]
        assert len(listed) == 1000 and listed[:3] == [101, 102, 104] and listed == sorted(listed)
        assert f.extra["count"] == given - held_here and f.detail.startswith(f"{given - held_here} entries (")


def test_ids_placed_from_the_least_int64_and_by_a_quorum_of_none():
    """(the ids from -2^63 placed as Python's integers place them, b - e not wrapped in int64; a write
    quorum of 0, which BookKeeper's client loads with an ack quorum of 0, places nothing, over a range
    of 2^62 ids, at once)"""
    least = -(2**63)

    def md(ensemble, qw, first=least, last=least + 5):
        return LedgerMetadata(format_version=3, write_quorum=qw, ensemble_size=3, ack_quorum=qw, length=0,
                              last_entry_id=last, state="CLOSED", ensembles=((first, ensemble),))
    b, c = "b:1", "c:2"
    for ensemble in ((ME, b, c), (b, ME, c), (b, c, ME)):
        for qw in (1, 2):
            want = [e for e in range(least, least + 6) if (ensemble.index(ME) - e) % 3 < qw]
            assert placement.expected_entries(md(ensemble, qw), ME, least + 5).tolist() == want
    none = md((ME, b, c), 0, 0, 2**62)
    assert list(itertools.islice(placement.placed_blocks(none, ME, 2**62), 3)) == []   # (not a block each)
    got, all_listed = placement.missing_listed(none, ME, 2**62, np.zeros(0, np.int64))
    assert len(got) == 0 and all_listed


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(placed(), st.lists(st.integers(0, 100), max_size=6), st.integers(0, 3), st.booleans()),
                min_size=1, max_size=9), st.integers(1, 4))
def test_pass_7_decides_near_ledgers_a_block_at_a_time_as_all_at_once(ledgers, block):
    """Near ledgers decided NEAR_BLOCK at a time (1 to 4 here): the findings of one block of all of them
    (the ids of each the reference placement lists and the bookie lacks; listed two at a time, how many
    each misses), the same ledgers compared id by id."""
    near, held = NearLedgers(), HeldEntries()
    want: list[tuple[int, list[int]]] = []
    for i, (m, ids, dropped, has) in enumerate(ledgers):
        # (held: the ids placed here, every ``dropped``-th of them missing (none for 0), and a few others)
        placed_here = expected_entries(m, ME, m.last_entry_id).tolist()
        kept = [e for j, e in enumerate(placed_here) if not dropped or j % (dropped + 1)]
        base = m.ensembles[0][0]
        got = sorted({*kept, *(base + x for x in ids)}) if has else []
        near.add(LedgerId(0, i + 1), m)
        if has:
            held.add(np.zeros(len(got), np.uint64), np.full(len(got), i + 1, np.uint64), np.array(got, np.int64))
        lacks = sorted(set(placed_here) - set(got))
        if lacks:
            want.append((i + 1, lacks))
    held.finish()

    def found(most: int | None = None) -> tuple[list[tuple[int, list[int]]], list[int], list[tuple]]:
        """(the ids found missing per ledger, the ledgers compared id by id, the findings whole), each
        ledger's missing ids listed up to ``most``"""
        out: dict[int, list[int]] = {}
        compared: list[int] = []
        real = placement.missing_listed

        def listed(m, me, last, have):
            compared.append(m.last_entry_id)
            return real(m, me, last, have, most)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(placement, "missing_listed", listed)
            got = list(_missing_entries(near, held, held.counts(), near.positions(held.scope, held.ledger), ME, set()))
        for f in got:
            out.setdefault(f.ledger, []).extend([f.entry] if f.entry is not None else f.extra["entries"])
        return list(out.items()), compared, [(f.code, f.ledger, f.entry, f.detail, f.extra) for f in got]

    whole, cut = found(), found(2)
    assert whole[0] == want
    # (listed two at a time: a ledger missing more says how many where they were counted)
    counted = {f[1]: f[4]["count"] for f in cut[2] if f[4].get("count") is not None}
    assert all(counted[ledger] == len(ids) for ledger, ids in want if ledger in counted)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(p7_metadata, "NEAR_BLOCK", block)
        assert found() == whole and found(2) == cut
