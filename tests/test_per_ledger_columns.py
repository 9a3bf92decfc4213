"""Per-ledger state held as arrays gives what the Python objects it replaces give: the index walk's
paths (their order too), the journals' master keys (a dict's answers) and the digest plan's decisions."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bkdisk.digests.plan import SOURCE_GIVEN, SOURCE_SNIFFED, DigestPlan
from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.digest_decisions import DigestDecisions
from bkdisk.indexfiles.listing import list_index_tree
from bkdisk.indexfiles.path_column import PathColumn
from bkdisk.journal.ledger_keys import LedgerKeys

# Paths as a file system gives them: bytes of ASCII, of other code points, and undecodable ones (escaped).
PART = st.one_of(st.text(alphabet="ab-_./0123456789", min_size=1, max_size=12).map(str.encode),
                 st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1,
                         max_size=6).map(str.encode),
                 st.binary(min_size=1, max_size=6).filter(lambda b: b"\0" not in b))
PATHS = st.lists(st.lists(PART, min_size=1, max_size=3).map(lambda parts: os.fsdecode(b"".join(parts))), max_size=40)


def _column(paths: list[str]) -> PathColumn:
    raw = [os.fsencode(p) for p in paths]
    return PathColumn(np.frombuffer(b"".join(raw), np.uint8).copy(),
                      np.cumsum([len(r) for r in raw], dtype=np.int64))


@settings(max_examples=200, deadline=None)
@given(paths=PATHS, prefix=st.sampled_from(["", "/data/ledgers/current/"]))
def test_a_path_column_reads_back_every_path(paths, prefix):
    col = _column(paths).prefixed([prefix], np.zeros(len(paths), np.int32))
    want = [prefix + p for p in paths]
    assert list(col) == want and col == want and len(col) == len(want)
    assert [col[i] for i in range(len(want))] == want and col[1:] == want[1:]
    assert _column(paths).count_byte(ord("/")).tolist() == [p.count("/") for p in paths]



@settings(max_examples=100, deadline=None)
@given(paths=st.lists(st.text(alphabet="a/", max_size=4), max_size=30), block=st.integers(1, 5))
def test_a_path_column_counts_a_byte_a_block_of_rows_at_a_time(paths, block):
    from bkdisk.indexfiles import path_column
    saved, path_column.BLOCK = path_column.BLOCK, block   # (rows, empty ones too, across the blocks' edges)
    try:
        assert _column(paths).count_byte(ord("/")).tolist() == [p.count("/") for p in paths]
    finally:
        path_column.BLOCK = saved

# One name of a folder or file, as a file system may hold it (no "/", no NUL; "." and ".." are not names).
NAME = st.one_of(st.text(alphabet="ab-_.0123456789", min_size=1, max_size=5),
                 st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"), min_size=1,
                         max_size=3),
                 st.binary(min_size=1, max_size=3).filter(lambda b: b"\0" not in b and b"/" not in b)
                 .map(os.fsdecode)).filter(lambda n: n not in (".", ".."))
TREES = st.lists(st.tuples(st.lists(NAME, max_size=2), NAME), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(tree=TREES)
def test_the_index_walk_lists_any_tree_in_pythons_order_of_its_paths(tree):
    with tempfile.TemporaryDirectory() as d:
        cur = Path(d, "current")
        names = set()
        for folders, name in tree:
            rel = "/".join([*folders, name + ".idx"])
            try:
                (cur / rel).parent.mkdir(parents=True, exist_ok=True)
                (cur / rel).write_bytes(b"")
            except OSError:   # a name that is a file in one path and a folder in another
                assume(False)
            names.add(rel)
        got = list_index_tree([d])
        assert list(got.relpaths) == sorted(names)


def test_the_index_walk_lists_files_in_the_order_of_their_paths():
    # "a-b/..." sorts before "a/..." ('-' < '/'): an order by folder, then name, would differ.
    with tempfile.TemporaryDirectory() as d:
        cur = Path(d, "current")
        names = ["a/1.idx", "a-b/2.idx", "a/b/3.idx", "a/b-/4.idx", "a/bé/5.idx", "ab/c/6.idx", "a/B/7.idx"]
        for n in names:
            (cur / n).parent.mkdir(parents=True, exist_ok=True)
            (cur / n).write_bytes(b"")
        got = list_index_tree([d])
        assert list(got.relpaths) == sorted(names)
        assert list(got.paths) == sorted(str(cur / n) for n in names)
        assert got.depth.tolist() == [n.count("/") for n in sorted(names)]
        assert got.regular.all() and len(got.scope) == len(names)


KEY_RECORDS = st.lists(st.tuples(st.sampled_from([0, 0, 0, 3, 2**64 - 1]), st.integers(0, 12) | st.just(2**64 - 1),
                                 st.binary(max_size=24) | st.sampled_from([b"k" * 20, b"p" * 20, b""])), max_size=60)


@settings(max_examples=200, deadline=None)
@given(records=KEY_RECORDS)
def test_ledger_keys_answer_as_the_dict_of_the_same_records(records):
    want: dict[LedgerId, bytes] = {}
    for s, l, k in records:
        want[LedgerId(s, l)] = k
    keys = LedgerKeys(np.array([r[0] for r in records], np.uint64), np.array([r[1] for r in records], np.uint64),
                      np.frombuffer(b"".join(r[2] for r in records), np.uint8),
                      np.cumsum([len(r[2]) for r in records], dtype=np.int64))
    assert list(keys) == list(want) and dict(keys) == want and len(keys) == len(want)
    assert list(keys.pairs()) == list(want.items())   # walked without a look-up each, in the same order
    probes = [LedgerId(s, l) for s in (0, 3, 2**64 - 1) for l in (0, 5, 13, 2**64 - 1)]
    assert [keys.get(p) for p in probes] == [want.get(p) for p in probes]
    rows = keys.index_of(np.array([p.scope for p in probes], np.uint64),
                         np.array([p.ledger for p in probes], np.uint64))
    assert [keys.key_at(r) if r >= 0 else None for r in rows.tolist()] == [want.get(p) for p in probes]
    scope, ledger = keys.columns()
    assert sorted(want) == list(zip(scope.tolist(), ledger.tolist()))


@settings(max_examples=100, deadline=None)
@given(decided=st.dictionaries(st.tuples(st.sampled_from([0, 0, 0, 5]), st.integers(0, 2**64 - 1)),
                               st.tuples(st.integers(0, 4), st.sampled_from([SOURCE_GIVEN, SOURCE_SNIFFED])),
                               max_size=40))
def test_digest_decisions_report_as_the_plans_dict(decided):
    plan = DigestPlan(decided=dict(decided))
    got = DigestDecisions.of(plan)
    sniffed: dict[int, list[tuple[int, int]]] = {}
    for key, (code, src) in sorted(decided.items()):
        if src == SOURCE_SNIFFED and code:
            sniffed.setdefault(code, []).append(key)
    assert [(c, list(k)) for c, k in got.by_code(SOURCE_SNIFFED)] == sorted(sniffed.items())
    probes = list(decided) + [(0, 7), (5, 1), (9, 2)]
    assert [got.get(k) for k in probes] == [decided.get(k, (0, 0)) for k in probes]


KEYS = st.tuples(st.sampled_from([0, 0, 0, 1, 2**64 - 1]), st.integers(0, 40) | st.just(2**64 - 1))
OPS = st.lists(st.tuples(st.sampled_from(["set", "del", "get", "put"]), KEYS,
                         st.tuples(st.integers(0, 5), st.integers(0, 3))), max_size=120)


@settings(max_examples=100, deadline=None)
@given(ops=OPS, merge_every=st.sampled_from([1, 3, 65536]))
def test_the_decision_table_answers_as_a_dict_whatever_its_merges(ops, merge_every):
    from unittest import mock

    from bkdisk.digests import decision_table
    with mock.patch.object(decision_table, "MERGE_EVERY", merge_every):
        _check_decisions(decision_table.DecisionTable(), ops)


def _check_decisions(table, ops) -> None:
    model: dict = {}
    for op, key, value in ops:
        if op == "set" or (op == "put" and key[0] != 0):
            table[key], model[key] = value, value
        elif op == "put":   # scope-0 ledgers as arrays at once: this one and two others
            ledgers = sorted({key[1], (key[1] + 1) % 41, (key[1] * 7 + 3) % 41}, reverse=True)
            table.put_ledgers(np.array(ledgers, np.uint64), np.full(len(ledgers), value[0]), value[1])
            model.update({(0, lid): value for lid in ledgers})
        elif op == "del":
            assert (key in table) == (key in model)
            if key in model:
                del table[key], model[key]
        else:
            assert table.get(key) == model.get(key)
        assert len(table) == len(model)
    assert list(table) == sorted(model) and dict(table) == model
