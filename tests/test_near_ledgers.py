"""A bookie's ledgers' metadata as columns (bookie.near_ledgers), the digest plan's columns made from it
(digests.ledger_values), and pass 7 over them: the same mapping, plan and findings as the metadata
held as objects, in a bounded number of bytes a ledger."""
from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie.near_ledgers import NearLedgers
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata

U64 = st.integers(0, 2**64 - 1)
KEYS = st.tuples(st.sampled_from([0, 0, 1, 2**63 + 5]), st.sampled_from([0, 7, 2**63, 2**64 - 1]) | U64)
ME, OTHERS = "me:3181", ("b:1", "c:2", "d:3", "e:4")


@st.composite
def metadata(draw) -> LedgerMetadata:
    """Metadata of the shapes a check meets: ensembles with and without this bookie, changes, striping,
    open and closed, quorums BookKeeper refuses, absent ctime and ctoken, custom metadata."""
    size = draw(st.integers(1, 4))
    firsts = sorted(set(draw(st.lists(st.integers(0, 30), min_size=1, max_size=3))))
    if draw(st.booleans()):
        firsts[0] = 0
    ensembles = tuple((f, tuple(draw(st.permutations((ME, *OTHERS))))[:size]) for f in firsts)
    if draw(st.integers(0, 9)) == 0:   # (an ensemble of another size: refused)
        ensembles = ensembles + ((firsts[-1] + 5, (ME,) * (size + 1)),)
    wq = draw(st.integers(1, size + 1))
    closed = draw(st.booleans())
    return LedgerMetadata(
        format_version=3, write_quorum=wq, ensemble_size=size, ack_quorum=draw(st.integers(1, wq)),
        length=draw(st.integers(0, 2**40)), last_entry_id=draw(st.integers(-1, 60)),
        state="CLOSED" if closed else draw(st.sampled_from(["OPEN", "IN_RECOVERY"])), ensembles=ensembles,
        digest_type=draw(st.sampled_from([None, "CRC32C", "CRC32", "HMAC", "DUMMY"])),
        password=draw(st.sampled_from([None, b"", b"pw"])), ctime=draw(st.none() | st.integers(0, 2**62)),
        custom_metadata=draw(st.sampled_from([(), (("application", b"pulsar"),)])),
        ctoken=draw(st.none() | st.integers(0, 2**62)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(KEYS, metadata()), max_size=40), st.lists(KEYS, max_size=10), st.integers(0, 3))
def test_ledgers_held_as_columns_are_the_mapping_they_were_given(added, asked, read_between):
    """(a ledger added twice keeps its last metadata, as a dict's assignment; read between additions)"""
    near, want = NearLedgers(), {}
    for k, (key, m) in enumerate(added):
        near.add(LedgerId(*key), m)
        want[LedgerId(*key)] = m
        if read_between and k % read_between == 0:
            assert len(near) == len(want)
    assert list(near) == sorted(want) and len(near) == len(want)
    assert list(near.items()) == sorted(want.items()) and near == want
    for key in [lid for lid in want] + [LedgerId(*k) for k in asked]:
        assert (key in near) == (key in want) and near.get(key) == want.get(key)
    scope = np.array([k[0] for k in asked], np.uint64)
    ledger = np.array([k[1] for k in asked], np.uint64)
    rows = near.positions(scope, ledger)
    order = sorted(want)
    assert [order[r] if r >= 0 else None for r in rows.tolist()] == \
        [LedgerId(*k) if LedgerId(*k) in want else None for k in asked]


def test_positions_of_many_ledgers_of_one_scope_and_of_many_scopes():
    """(every V1 ledger is of scope 0: a search of the ids alone; BP-35 ledgers each of a scope of its own)"""
    rng = np.random.default_rng(3)
    template = LedgerMetadata(format_version=3, write_quorum=2, ensemble_size=2, ack_quorum=2, length=0,
                              last_entry_id=-1, state="CLOSED", ensembles=((0, (ME, "b:1")),))
    for scopes in (np.zeros(30_000, np.uint64), rng.integers(0, 2**64 - 1, 30_000, dtype=np.uint64)):
        ids = rng.integers(0, 2**64 - 1, 30_000, dtype=np.uint64)
        near = NearLedgers()
        for s, led in zip(scopes[::3].tolist(), ids[::3].tolist()):
            near.add(LedgerId(s, led), template)
        rows = near.positions(scopes, ids)
        held = rows >= 0
        assert held[::3].all() and held.sum() == len(near)
        assert (near.ledger[rows[held]] == ids[held]).all() and (near.scope[rows[held]] == scopes[held]).all()


def test_a_bookie_s_metadata_as_columns_holds_about_100_bytes_a_ledger(tmp_path):
    """A folder of 30,000 Pulsar-shaped ledgers (512 shapes: topics, ensembles, quorums, digests) read as
    the bookie's check reads it: the ledgers placed on it, their digest plan, and their KeySet for pass 5,
    each a few columns. As LedgerMetadata objects (with the values they repeat shared) they took 0.4 KB a
    ledger, the digest plan's dicts 0.3 KB more."""
    from bench.metadata_gen import write_shaped_folder
    from bkdisk.bookie.metadata_dir import bookie_metadata_dir, digest_plan, read_ledger_file
    bookies = ["bk-a:3181", "bk-b:3181", "bk-c:3181", "bk-d:3181"]
    write_shaped_folder(str(tmp_path / "few"), 10, bookies)
    digest_plan(bookie_metadata_dir(str(tmp_path / "few"), "bk-a:3181")[0])   # (the modules it loads: not counted)
    write_shaped_folder(str(tmp_path / "md"), 30_000, bookies)
    tracemalloc.start()
    try:
        view, errors = bookie_metadata_dir(str(tmp_path / "md"), "bk-a:3181")
        plan = digest_plan(view)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not errors and len(view) > 20_000
    # (92 bytes: 52 of columns, 24 of the plan's, the 512 shapes' share; a million ledgers share them more)
    assert held / len(view) < 110, f"{held / len(view):.0f} bytes a ledger"
    assert peak / len(view) < 400, f"peak {peak / len(view):.0f} bytes a ledger"
    for lid, m in list(view.items())[::997]:   # (the same values as each file read alone)
        assert m == read_ledger_file(str(tmp_path / "md"), lid)
        assert plan.known[lid].name == m.digest_type and plan.passwords[lid] == m.password


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(KEYS, metadata()), max_size=30))
def test_the_digest_plan_of_ledgers_held_as_columns_is_that_of_their_objects(added):
    from bkdisk.bookie.metadata_dir import MetadataView, digest_plan
    near, want = NearLedgers(), {}
    for key, m in added:
        near.add(LedgerId(*key), m)
        want[LedgerId(*key)] = m
    got, ref = digest_plan(MetadataView(near)), digest_plan(want)
    assert dict(got.known) == dict(ref.known) and dict(got.passwords) == dict(ref.passwords)
    assert len(got.known) == len(ref.known) and set(got.passwords) == set(ref.passwords)
    assert sorted(got.known.values()) == sorted(ref.known.values())
    ids, codes = got.known_table()
    ref_ids, ref_codes = ref.known_table()
    assert ids.tolist() == ref_ids.tolist() and codes.tolist() == ref_codes.tolist()
    for lid in list(want)[:5] + [LedgerId(5, 5)]:
        assert got.mac_key_for(lid) == ref.mac_key_for(lid)
        assert (lid in got.known) == (lid in ref.known)


@settings(max_examples=300, deadline=None)
@given(st.lists(KEYS, max_size=30), st.lists(KEYS, max_size=30))
def test_pair_positions_find_the_first_equal_row(rows, among):
    from bkdisk.diskio.distinct import pair_positions
    col = lambda xs, k: np.array([x[k] for x in xs], np.uint64)   # noqa: E731
    got = pair_positions(col(rows, 0), col(rows, 1), col(among, 0), col(among, 1))
    assert got.tolist() == [among.index(r) if r in among else -1 for r in rows]


def _missing_reference(held_ids: dict, want: dict, me: str) -> list[tuple]:
    """Pass 7's entries missing, a ledger at a time, as the check compared them before it went by columns."""
    from bkdisk.formats.ledger_metadata import bookkeeper_refusal
    from bkdisk.fsck.ensemble_placement import expected_entries
    out = []
    for lid, m in sorted(want.items()):
        if bookkeeper_refusal(m) is not None:
            out.append(("METADATA_UNLOADABLE", lid))
            continue
        have = sorted(held_ids.get(lid, ()))
        last = m.last_entry_id if m.state == "CLOSED" else have[-1] if have else -1
        missing = sorted(set(expected_entries(m, me, last).tolist()) - set(have))
        if len(missing) > 20:
            out.append(("ENTRIES_MISSING", lid, tuple(missing)))
        else:
            out += [("ENTRY_MISSING", lid, e) for e in missing]
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(KEYS, metadata(), st.sets(st.integers(-1, 70), max_size=40)), max_size=25),
       st.lists(st.tuples(KEYS, st.sets(st.integers(0, 70), max_size=5)), max_size=5))
def test_pass_7_passes_over_whole_ledgers_by_their_counts_and_finds_what_one_at_a_time_finds(ledgers, strays):
    """Ledgers held whole (every entry from the first ensemble's first to the last), with gaps, with ids
    past the last or before the first, open ledgers, striped ones and refused ones, and ledgers held
    that metadata does not name: the missing entries a ledger-at-a-time comparison finds."""
    from bkdisk.fsck.held_entries import HeldEntries
    from bkdisk.fsck.passes.p7_metadata import _missing_entries
    near, want, held_ids = NearLedgers(), {}, {}
    for key, m, ids in ledgers:
        lid = LedgerId(*key)
        if len(ids) > 20 and m.state == "CLOSED":   # (a whole ledger, sometimes)
            first = m.ensembles[0][0]
            ids = set(range(first, max(first, m.last_entry_id) + 1))
            m = dataclasses.replace(m, ensembles=tuple((f, (ME,) + e[1:]) for f, e in m.ensembles))
        near.add(lid, m)
        want[lid] = m
        held_ids[lid] = ids
    for key, ids in strays:
        held_ids.setdefault(LedgerId(*key), ids)
    held = HeldEntries()
    rows = [(lid.scope, lid.ledger, e) for lid, ids in held_ids.items() for e in ids]
    held.add(np.array([r[0] for r in rows], np.uint64), np.array([r[1] for r in rows], np.uint64),
             np.array([r[2] for r in rows], np.int64))
    held.add_ledgers(np.array([lid.scope for lid in held_ids], np.uint64),
                     np.array([lid.ledger for lid in held_ids], np.uint64))
    held.finish()
    at = near.positions(held.scope, held.ledger)
    got = []
    for f in _missing_entries(near, held, held.counts(), at, ME, set()):
        lid = LedgerId(f.scope, f.ledger)
        got.append((f.code.name, lid) if f.code.name == "METADATA_UNLOADABLE" else
                   (f.code.name, lid, tuple(f.extra["entries"])) if f.code.name == "ENTRIES_MISSING" else
                   (f.code.name, lid, f.entry))
    assert got == _missing_reference(held_ids, want, ME)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(KEYS, st.sets(st.integers(-5, 10**6), max_size=12)), max_size=30))
def test_held_bounds_are_each_ledger_s_least_and_greatest_id(ledgers):
    from bkdisk.fsck.held_entries import HeldEntries
    held = HeldEntries()
    want = {}
    for key, ids in ledgers:
        want.setdefault(LedgerId(*key), set()).update(ids)
    items = sorted(want.items())
    for part in (items[::2], items[1::2]):   # (a ledger's ids in two parts)
        rows = [(lid.scope, lid.ledger, e) for lid, ids in part for e in ids]
        held.add(np.array([r[0] for r in rows], np.uint64), np.array([r[1] for r in rows], np.uint64),
                 np.array([r[2] for r in rows], np.int64))
    held.add_ledgers(np.array([lid.scope for lid in want], np.uint64),
                     np.array([lid.ledger for lid in want], np.uint64))
    held.finish()
    lo, hi = held.bounds()
    assert [(a, b) for a, b in zip(lo.tolist(), hi.tolist())] == \
        [(min(ids), max(ids)) if ids else (0, -1) for _lid, ids in items]


def test_what_names_no_ledger_is_in_neither_mapping_as_in_a_dict():
    """(ids beyond 64 bits, negative ones, pairs that are not ints, keys that are no pair)"""
    from bkdisk.bookie.metadata_dir import digest_plan
    near = NearLedgers()
    near.add(LedgerId(0, 5), LedgerMetadata(format_version=3, write_quorum=1, ensemble_size=1, ack_quorum=1, length=0,
                                            last_entry_id=-1, state="CLOSED", ensembles=((0, (ME,)),),
                                            digest_type="CRC32C", password=b"pw"))
    plan = digest_plan(near)
    for bad in (LedgerId(0, 2**64), LedgerId(-1, 5), (0, -1), ("a", "b"), (0, 5.5), (0, 5, 1), 5):
        assert bad not in near and near.get(bad) is None   # type: ignore[call-overload]
        assert bad not in plan.known and plan.known.get(bad) is None and plan.passwords.get(bad) is None
    assert (0, 5) in near and (0, 5) in plan.known and plan.passwords[(0, 5)] == b"pw"


def test_pass_7_over_ensembles_from_the_least_int64_finds_what_one_at_a_time_finds(monkeypatch):
    """(metadata that parses and serializes again, its first entry id -2^63: no span is made of it, and
    no count of entries wraps; where 2^63 entries are placed here and none held, the first of them are
    listed, not made whole)"""
    from bkdisk.fsck import ensemble_placement as placement
    from bkdisk.fsck.held_entries import HeldEntries
    from bkdisk.fsck.passes.p7_metadata import _missing_entries
    monkeypatch.setattr(placement, "LISTED_MISSING", 50)
    least = -(2**63)
    for ensembles, last, ids in ((((least, (ME,)),), least, []), (((least, (ME,)),), least, [least]),
                                 (((least, (ME,)), (0, (ME,))), 2**63 - 1, []), (((0, (ME,)),), 2**63 - 1, [])):
        m = LedgerMetadata(format_version=3, write_quorum=1, ensemble_size=1, ack_quorum=1, length=0,
                           last_entry_id=last, state="CLOSED", ensembles=ensembles)
        near = NearLedgers()
        near.add(LedgerId(0, 1), m)
        held = HeldEntries()
        held.add_ledgers(np.array([0], np.uint64), np.array([1], np.uint64))
        held.add(np.zeros(len(ids), np.uint64), np.ones(len(ids), np.uint64), np.array(ids, np.int64))
        held.finish()
        at = near.positions(held.scope, held.ledger)
        got = [(f.code.name, LedgerId(f.scope, f.ledger), f.entry, f.extra)
               for f in _missing_entries(near, held, held.counts(), at, ME, set())]
        if last == least:
            assert [g[:3] for g in got] == _missing_reference({LedgerId(0, 1): set(ids)}, {LedgerId(0, 1): m}, ME)
        else:
            first = ensembles[0][0]
            assert got == [("ENTRIES_MISSING", LedgerId(0, 1), None,
                            {"entries": list(range(first, first + 50)), "count": None})]


def test_each_metadata_is_each_get_of_a_view():
    """(ledgers held as columns found at once, the others looked up, in the rows' order, repeats kept)"""
    from bkdisk.bookie.metadata_dir import MetadataView, each_metadata
    rng = np.random.default_rng(9)
    near, far = NearLedgers(), {}
    ids = rng.integers(0, 2**64 - 1, 400, dtype=np.uint64)
    for k, x in enumerate(ids.tolist()):
        m = LedgerMetadata(format_version=3, write_quorum=1, ensemble_size=1, ack_quorum=1, length=k,
                           last_entry_id=k, state="CLOSED", ensembles=((0, (ME,)),), ctime=k)
        (near.add(LedgerId(0, x), m) if k % 3 else far.__setitem__(LedgerId(0, x), m))
    view = MetadataView(near, far.get)
    rows = np.concatenate([ids, ids[:50], rng.integers(0, 2**64 - 1, 30, dtype=np.uint64)])
    scope = np.zeros(len(rows), np.uint64)
    got = list(each_metadata(view, scope, rows, batch=64))
    assert got == [view.get(LedgerId(0, x)) for x in rows.tolist()]
    assert sum(m is not None for m in got) == 450
    # (a plain mapping: asked row by row, its ids made a batch at a time)
    plain = {**far, **dict(near.items())}
    assert list(each_metadata(plain, scope, rows, batch=64)) == got
