"""A scan's output table hands its kernel columns of one layout whatever its size: a column of one row is
contiguous, which numba types apart from a longer one's, and the walk met with it first compiled again
(over a minute) for a log of one entry, or a header alone, as a bookie's newest log often is. The joins'
kernels, given columns strided or contiguous by where they come from, run one variant for any mix."""
from __future__ import annotations

from conftest import GOLDEN
from numba import typeof

from bkdisk.diskio.windowed import Columns
from bkdisk.entrylogs.arrays import ENTRY_DTYPE
from bkdisk.entrylogs.scan import scan_entry_log
from bkdisk.entrylogs.walk import walk_entry_records
from bkdisk.journal.arrays import JOURNAL_DTYPE

LOG = GOLDEN / "interleaved-v6-hostport" / "ledgers1" / "current" / "0.log"


def test_a_table_of_any_room_gives_strided_columns():
    for dtype in (ENTRY_DTYPE, JOURNAL_DTYPE):
        for room in (0, 1, 2, 1000):
            cols = Columns(dtype, room)
            assert {typeof(a).layout for a in cols.arrays} == {"A"}, (dtype, room)
            cols.restart(room)
            assert {typeof(a).layout for a in cols.arrays} == {"A"}, (dtype, room)


def test_a_log_of_one_entry_or_none_is_walked_by_the_kernel_a_longer_one_was(tmp_path):
    scan_entry_log(LOG)
    seen = set(walk_entry_records.signatures)
    data = LOG.read_bytes()
    first = scan_entry_log(LOG).entries[0]
    for n in (1024, int(first["offset"]) + 4 + int(first["size"]), 700):
        short = tmp_path / f"{n}.log"
        short.write_bytes(data[:n])
        res = scan_entry_log(short)
        assert len(res.entries) == (n > 1024)
    assert set(walk_entry_records.signatures) == seen


def _dot(a, b, out):
    t = 0
    for i in range(a.shape[0]):
        t += a[i] * b[i]
    out[0] = t
    return t


def test_an_any_layout_kernel_runs_one_variant_for_every_mix_of_strided_and_contiguous_arrays(tmp_path, monkeypatch):
    import numpy as np

    from bkdisk.diskio.config import kernel
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    plain, free, named = kernel(_dot), kernel(_dot, any_layout=True), kernel(_dot, any_layout=("a", "b"))
    table = np.zeros(10, [("x", np.int64), ("y", np.int64)])
    table["x"], table["y"] = np.arange(10), 3
    mixes = [(table["x"], table["y"]), (np.arange(10), np.full(10, 3)), (table["x"], np.full(10, 3)),
             (table["x"][:1], table["y"][:1])]   # (a one-row column is contiguous)
    for a, b in mixes:
        out = np.zeros(1, np.int64)
        assert plain(a, b, out) == free(a, b, out) == named(a, b, out) == int(np.dot(a, b))
    assert len(plain.signatures) == 3   # numba's own: a variant per mix of layouts
    assert [{t.layout for t in sig} for sig in free.signatures] == [{"A"}]
    assert [[t.layout for t in sig] for sig in named.signatures] == [["A", "A", "C"]]   # (``out`` as given)
    compiled = []
    monkeypatch.setattr(free, "_compile_for_args", lambda *a: compiled.append(a))
    for a, b in mixes:   # each mix met once is found by numba's dispatch, not compiled nor looked up again
        free(a, b, np.zeros(1, np.int64))
    assert compiled == []


def test_the_kernels_given_columns_of_tables_take_them_in_any_layout():
    from bkdisk.digests import entry_bytes
    from bkdisk.digests import kernels as digests
    from bkdisk.diskio.any_layout import AnyLayoutDispatcher
    from bkdisk.fsck import placed_locations
    from bkdisk.fsck.passes.p5_crosscheck import kernels as p5
    from bkdisk.indexfiles import decode
    for k in (p5.entry_rows, p5.match_log, p5.match_by_ids, p5.match_locations, p5.range_rows_of, p5.file_runs,
              p5.parts_holding, p5.position_buckets, placed_locations.misplaced_locations, decode.write_locations,
              digests.digests_from_facts, entry_bytes.format_and_length):
        assert type(k) is AnyLayoutDispatcher, k


def test_an_any_layout_kernel_pickled_to_another_process_types_the_same_arguments_apart():
    import json
    import pickle
    import subprocess
    import sys

    import numpy as np

    from bkdisk.fsck.passes.p5_crosscheck import kernels as p5
    made = "(np.zeros(1, np.int32), np.zeros(1, np.int64), np.empty(2, np.int64), np.empty(1, np.int64))"
    one_row = (np.zeros(1, np.int32), np.zeros(1, np.int64), np.empty(2, np.int64), np.empty(1, np.int64))
    here = bool(p5.file_runs(*one_row))
    code = (f"import json, pickle, sys, numpy as np; k = pickle.loads(sys.stdin.buffer.read()); got = k(*{made}); "
            "print(json.dumps([type(k).__name__, sorted(k._general_at), bool(got), "
            "[[t.layout for t in s] for s in k.signatures]]))")
    r = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(p5.file_runs), capture_output=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert json.loads(r.stdout) == ["AnyLayoutDispatcher", [0, 1], here, [["A", "A", "C", "C"]]]
