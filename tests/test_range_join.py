"""Pass 5's join of one range of entry logs: log by log on the scans' own arrays, it gives the wrong
locations, their slots' entries and the free entries of one sorted table of every entry's rows, and it
makes rows only of the entries no location points at."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.entrylogs.arrays import ENTRY_DTYPE, PROBLEM_DTYPE, EntryLogArrays
from bkdisk.formats.index import POSITION_BITS
from bkdisk.fsck.passes.p5_crosscheck import range_join
from bkdisk.fsck.passes.p5_crosscheck.location_ranges import LOCATION_ROW
from bkdisk.indexfiles.arrays import INDEX_FILE_DTYPE


def _log(log_id: int, offsets: list[int], ids: list[tuple[int, int, int]]) -> tuple[int, EntryLogArrays]:
    e = np.zeros(len(offsets), ENTRY_DTYPE)
    e["offset"] = offsets
    for col, vals in zip(("scope", "ledger", "entry"), zip(*ids) if ids else ((), (), ())):
        e[col] = vals
    return log_id, EntryLogArrays(f"{log_id:x}.log", log_id, 1 << 24, None, None, None, None, 1 << 24, e,
                                  np.zeros(0, PROBLEM_DTYPE))


@st.composite
def ranges(draw, unit: int = 16):
    """A range's logs and locations; ``unit``: the bytes between neighbouring entries' slots."""
    files = np.zeros(4, INDEX_FILE_DTYPE)
    files["scope"], files["ledger"] = [0, 0, 1, 0], [5, 6, 5, 7]
    # One id may be in two dirs; an id past a location's 32 bits names a log no location can point at.
    ids = sorted(draw(st.lists(st.sampled_from([1, 2, 3, 4, 1 << 32, (1 << 32) + 1]), min_size=0, max_size=4)))
    here = []
    for log_id in ids:
        gaps = draw(st.lists(st.integers(1, 3), max_size=8))
        offsets = (1024 + np.cumsum(gaps) * unit).tolist()
        if draw(st.booleans()):   # entries out of position order (a damaged or hand-made log)
            offsets = draw(st.permutations(offsets))
        owners = [draw(st.integers(0, 3)) for _ in offsets]
        entries = [(int(files["scope"][f]), int(files["ledger"][f]), draw(st.integers(0, 2))) for f in owners]
        here.append(_log(log_id, offsets, entries))
    n = draw(st.integers(0, 20))
    lr = np.zeros(n, LOCATION_ROW)
    lr["k"] = np.arange(n) * 3
    logs = [i for i in ids if i < range_join.LOCATABLE_LOGS] or [1]
    for i in range(n):
        log = draw(st.sampled_from(logs))
        pos = 1024 + unit * draw(st.integers(0, 30)) + 4 + draw(st.sampled_from([0, 0, 0, 8]))
        lr[i]["key"] = (log << POSITION_BITS) | pos
        lr[i]["file"], lr[i]["entry"] = draw(st.integers(0, 3)), draw(st.integers(0, 2))
    return files, here, lr


def _plain(result):
    found, free = result
    return [(k, None if e is None else (int(e["scope"]), int(e["ledger"]), int(e["entry"]))) for k, e in found], \
        free.tobytes()


@settings(max_examples=300, deadline=None)
@given(case=ranges(), rows=st.sampled_from([None, 1, 2, 3]))
def test_a_range_joined_log_by_log_equals_one_sorted_table(case, rows):
    """Whatever the parts each log's entries are read in (one, or a few entries each)."""
    files, here, lr = case
    want = _plain(range_join._join_rows(files, [(i, s.entries) for i, s in here], lr))
    assert _plain(range_join.join_range(files, here, lr, rows)) == want


@settings(max_examples=300, deadline=None)
@given(case=ranges(unit=40_000), rows=st.sampled_from([None, 1, 2, 3]))
def test_a_log_spread_over_many_64_kib_joined_log_by_log_equals_one_sorted_table(case, rows):
    """Locations looked up grouped by the 64 KiB they point into give the join of one sorted table."""
    files, here, lr = case
    want = _plain(range_join._join_rows(files, [(i, s.entries) for i, s in here], lr))
    assert _plain(range_join.join_range(files, here, lr, rows)) == want


def test_locations_of_interleaved_ledgers_are_looked_up_near_the_last(monkeypatch):
    """Two ledgers whose entries alternate over 1 MiB of a log: their index holds ledger 5's locations,
    then ledger 6's; looked up by position (the lookup by ids off), the join looks them up grouped by the
    64 KiB they point into (counted from the log part's first entry), so that each search
    starts near the entry it looks for."""
    files = np.zeros(2, INDEX_FILE_DTYPE)
    files["ledger"] = [5, 6]
    offsets = [1024 + 512 * j for j in range(2048)]
    here = [_log(1, offsets, [(0, 5 + j % 2, j // 2) for j in range(2048)])]
    lr = np.zeros(2048, LOCATION_ROW)
    lr["k"] = np.arange(2048)
    lr["key"] = [(1 << POSITION_BITS) | (offsets[2 * e + f] + 4) for f in (0, 1) for e in range(1024)]
    lr["file"] = np.repeat([0, 1], 1024)
    lr["entry"] = np.tile(np.arange(1024), 2)
    looked: list[np.ndarray] = []
    real = range_join.match_log
    monkeypatch.setattr(range_join, "match_log",
                        lambda *a: looked.append(a[4][a[9]] & ((1 << POSITION_BITS) - 1)) or real(*a))
    monkeypatch.setattr(range_join.ByIds, "of", classmethod(lambda cls, files, lr: None))
    found, free = range_join.join_range(files, here, lr)
    assert found == [] and len(free) == 0
    at = np.concatenate(looked).astype(np.int64)
    assert len(at) == 2048 and np.all(np.diff((at - 4 - offsets[0]) >> 16) >= 0)   # (from the log's first entry)


def _in_index_order(lr: np.ndarray) -> np.ndarray:
    """``lr`` as an index gives its locations: by file row, then entry id, one location a (file, entry)."""
    lr = lr[np.lexsort((lr["entry"], lr["file"]))]
    keep = np.ones(len(lr), bool)
    keep[1:] = (lr["file"][1:] != lr["file"][:-1]) | (lr["entry"][1:] != lr["entry"][:-1])
    return lr[keep]


@settings(max_examples=400, deadline=None)
@given(case=ranges(), rows=st.sampled_from([None, 1, 2, 3]), spread=st.booleans())
def test_locations_in_index_order_found_by_ids_give_the_join_of_one_sorted_table(case, rows, spread):
    """Locations in index order are looked up from the entries' side first (match_by_ids), the rest
    by position: the same wrong locations, their slots' entries and free entries."""
    files, here, lr = case
    lr = _in_index_order(lr)
    if spread:   # runs of entry ids with gaps: an entry's place in its run is searched for
        lr["entry"] = lr["entry"] * 2
        for _i, s in here:
            s.entries["entry"] = s.entries["entry"] * 2
    want = _plain(range_join._join_rows(files, [(i, s.entries) for i, s in here], lr))
    assert _plain(range_join.join_range(files, here, lr, rows)) == want


def test_entries_found_by_their_ids_leave_only_the_other_locations_to_look_up_by_position(monkeypatch):
    """A log of one ledger's entries, its index in order with one location wrong: the lookup by ids
    marks every other location, and only the wrong one is looked up by position."""
    files = np.zeros(1, INDEX_FILE_DTYPE)
    files["ledger"] = 9
    here = [_log(2, [1024 + 32 * j for j in range(100)], [(0, 9, j) for j in range(100)])]
    lr = np.zeros(100, LOCATION_ROW)
    lr["k"], lr["entry"] = np.arange(100), np.arange(100)
    lr["key"] = [(2 << POSITION_BITS) | (1024 + 32 * j + 4) for j in range(100)]
    lr["key"][40] = (2 << POSITION_BITS) | (1024 + 32 * 41 + 4)   # entry 40's location points at entry 41
    looked: list[int] = []
    real = range_join.match_log
    monkeypatch.setattr(range_join, "match_log", lambda *a: looked.extend(a[9].tolist()) or real(*a))
    found, free = range_join.join_range(files, here, lr)
    assert looked == [40]
    assert [(k, int(e["entry"])) for k, e in found] == [(40, 41)] and free["entry"].tolist() == [40]


def test_an_index_with_gaps_in_its_entry_ids_is_looked_up_by_ids_alone(monkeypatch):
    """Entry ids 0, 3, 6, ...: an entry's place in its file's run is searched for, none by position."""
    files = np.zeros(2, INDEX_FILE_DTYPE)
    files["ledger"] = [9, 4]
    ids = [(0, 9 if j % 2 else 4, 3 * (j // 2)) for j in range(200)]
    here = [_log(2, [1024 + 32 * j for j in range(200)], ids)]
    order = sorted(range(200), key=lambda j: (0 if ids[j][1] == 9 else 1, ids[j][2]))
    lr = np.zeros(200, LOCATION_ROW)
    lr["k"] = np.arange(200)
    lr["file"] = [0 if ids[j][1] == 9 else 1 for j in order]
    lr["entry"] = [ids[j][2] for j in order]
    lr["key"] = [(2 << POSITION_BITS) | (1024 + 32 * j + 4) for j in order]
    looked: list[int] = []
    real = range_join.match_log
    monkeypatch.setattr(range_join, "match_log", lambda *a: looked.extend(a[9].tolist()) or real(*a))
    found, free = range_join.join_range(files, here, lr)
    assert found == [] and len(free) == 0 and looked == []


def _entries(here):
    """(log id, offset, (scope, ledger, entry)) of every entry of ``here``, log by log in its order."""
    return [(log_id, int(e["offset"]), (int(e["scope"]), int(e["ledger"]), int(e["entry"])))
            for log_id, sc in here for e in sc.entries]


def _reference(files, here, lr):
    """The join by its definition: a location points at the entry whose size prefix ends where it says
    in the log it names (the first such, in the logs' order, when two dirs hold one id); every entry
    not pointed at by a location of its own ids is free, in (log id, position) order."""
    rows = [(log_id, off, ids) for log_id, off, ids in _entries(here) if log_id < range_join.LOCATABLE_LOGS]
    first: dict[tuple[int, int], int] = {}
    for j, (log_id, off, _ids) in enumerate(rows):
        first.setdefault((log_id, off + 4), j)
    pointed, found = set(), []
    for i in range(len(lr)):
        log_id, pos = int(lr["key"][i]) >> POSITION_BITS, int(lr["key"][i]) & ((1 << POSITION_BITS) - 1)
        f = int(lr["file"][i])
        j = first.get((log_id, pos))
        if j is not None and rows[j][2] == (int(files["scope"][f]), int(files["ledger"][f]), int(lr["entry"][i])):
            pointed.add(j)
        else:
            found.append((int(lr["k"][i]), None if j is None else rows[j][2]))
    free = sorted(((log_id, off), ids) for j, (log_id, off, ids) in enumerate(rows) if j not in pointed)
    free += [((log_id, off), ids) for log_id, off, ids in _entries(here) if log_id >= range_join.LOCATABLE_LOGS]
    return found, [(log_id, ids) for (log_id, _off), ids in free]


@settings(max_examples=300, deadline=None)
@given(case=ranges())
def test_the_one_table_join_gives_the_join_by_its_definition(case):
    files, here, lr = case
    found, free = range_join._join_rows(files, [(i, s.entries) for i, s in here], lr)
    got_found = [(k, None if e is None else (int(e["scope"]), int(e["ledger"]), int(e["entry"]))) for k, e in found]
    got_free = [(int(r["log"]), (int(r["scope"]), int(r["ledger"]), int(r["entry"]))) for r in free]
    want_found, want_free = _reference(files, here, lr)
    assert got_found == want_found
    assert sorted(got_free) == sorted(want_free) and [g[0] for g in got_free] == [w[0] for w in want_free]


def test_only_the_free_entries_are_made_rows(monkeypatch):
    files = np.zeros(1, INDEX_FILE_DTYPE)
    files["ledger"] = 9
    here = [_log(i, [1024 + 32 * j for j in range(1000)], [(0, 9, j) for j in range(1000)]) for i in (2, 3)]
    lr = np.zeros(1999, LOCATION_ROW)   # every entry but log 2's last, log 3's first
    lr["k"] = np.arange(1999)
    lr["key"] = [(i << POSITION_BITS) | (1024 + 32 * j + 4) for i in (3, 2) for j in range(1000)][:1999]
    lr["entry"] = [j for _i in (3, 2) for j in range(1000)][:1999]
    made = []
    real = range_join.log_rows
    monkeypatch.setattr(range_join, "log_rows", lambda e, log_id: made.append(len(e)) or real(e, log_id))
    found, free = range_join.join_range(files, here, lr)
    assert found == [] and free["log"].tolist() == [2] and free["entry"].tolist() == [999]
    assert made == [1]
