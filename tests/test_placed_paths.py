"""An index walk keeps a relative path only where it differs from the one its ledger id dictates; the
column reads as every path the walk met, and pass 2 looks at only the rows it kept."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.formats.ids import LedgerId
from bkdisk.formats.paths import index_relpath
from bkdisk.indexfiles.arrays import INDEX_FILE_DTYPE
from bkdisk.indexfiles.canonical_paths import PlacedPaths, placed_paths
from bkdisk.indexfiles.path_column import PathColumn
from bkdisk.indexfiles.scan import walk_index_dirs

IDS = st.tuples(st.sampled_from([0, 0, 1, 0xab12, 2**64 - 1]),
                st.sampled_from([0, 1, 9, 0xff, 0x100, 0xabcdef, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1))


def _near_misses(rel: str) -> list[str]:
    return [rel, rel.upper(), rel.replace("/", "//", 1), "0" + rel, rel[:-4] + ".IDX", rel + "x", rel[:-1],
            rel.replace(".idx", "0.idx"), "x/" + rel, rel.split("/", 1)[-1]]


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(IDS, st.booleans(), st.integers(0, 9)), max_size=12), data=st.data())
def test_a_row_is_placed_exactly_when_its_path_is_its_ledgers(rows, data):
    files = np.zeros(len(rows), INDEX_FILE_DTYPE)
    rels = []
    for i, ((s, l), named, miss) in enumerate(rows):
        files[i]["scope"], files[i]["ledger"], files[i]["named"] = s, l, named
        rels.append(_near_misses(index_relpath(LedgerId(s, l)))[miss])
    blobs = [os.fsencode(r) for r in rels]
    col = PathColumn(np.frombuffer(b"".join(blobs), np.uint8).copy(),
                     np.cumsum([len(b) for b in blobs]).astype(np.int64))
    got = placed_paths(col, files)
    assert isinstance(got, PlacedPaths)
    want_stored = [i for i, ((s, l), named, _m) in enumerate(rows)
                   if not named or rels[i] != index_relpath(LedgerId(s, l))]
    assert got.stored.tolist() == want_stored
    assert list(got) == rels and got == rels and len(got.column.data) == sum(len(blobs[i]) for i in want_stored)
    if rels:
        i = data.draw(st.integers(0, len(rels) - 1))
        assert got[i] == rels[i] and got[i:] == rels[i:]
    prefixes = ["/a/", "/b/"]
    group = np.array([i % 2 for i in range(len(rels))], np.int32)
    pre = got.prefixed(prefixes, group)
    assert list(pre) == [prefixes[i % 2] + r for i, r in enumerate(rels)]
    assert [pre[i] for i in range(len(rels))] == list(pre)   # a row alone reads as in a block


def test_a_walk_keeps_the_bytes_of_misplaced_files_only(tmp_path):
    cur = tmp_path / "current"
    placed = [LedgerId(0, l) for l in range(300)] + [LedgerId(3, 5)]
    for lid in placed:
        p = cur / index_relpath(lid)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")
    (cur / "0" / "5" / "777.idx").write_bytes(b"")     # misplaced
    (cur / "0" / "5" / "notes.txt.idx").write_bytes(b"")  # not an index name
    inv = walk_index_dirs([str(tmp_path)])
    assert isinstance(inv.relpaths, PlacedPaths)
    assert sorted(inv.relpaths[i] for i in inv.relpaths.stored.tolist()) == ["0/5/777.idx", "0/5/notes.txt.idx"]
    assert bytes(inv.relpaths.column.data) == b"0/5/777.idx0/5/notes.txt.idx"
    assert sorted(inv.relpaths) == sorted([index_relpath(l) for l in placed] + ["0/5/777.idx", "0/5/notes.txt.idx"])
    assert list(inv.paths) == [os.path.join(str(tmp_path), "current", r) for r in inv.relpaths]
