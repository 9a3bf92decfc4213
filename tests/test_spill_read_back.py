"""Spilled rows read back into reused memory: an array a reader still holds is never overwritten by a
later read, a block nobody refers to is read into again (no fresh pages), and a spill file that ends
early is a one-line error naming it."""
from __future__ import annotations

import resource

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.read_back import ReadBuffers
from bkdisk.diskio.spill import MemoryLimit, SpillError, SpillFolder

DT = np.dtype([("a", "<u8"), ("b", "<i4"), ("c", "u1")])   # packed rows, as the scans' (13 bytes)


def _file(tmp_path, n: int, seed: int = 0):
    rows = np.zeros(n, DT)
    rng = np.random.default_rng(seed)
    rows["a"], rows["b"], rows["c"] = rng.integers(0, 1 << 63, n), rng.integers(-9, 9, n), rng.integers(0, 255, n)
    p = tmp_path / "rows.bin"
    rows.tofile(p)
    return str(p), rows


POOL = ReadBuffers(1 << 20)


def read_rows(path, dtype, n, offset):
    return POOL.read_rows(path, dtype, n, offset)


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_block_nobody_refers_to_is_read_into_again(tmp_path):
    path, rows = _file(tmp_path, 10_000)
    first = read_rows(path, DT, 4_000, 0)
    where = _address(first)
    assert first.tolist() == rows[:4_000].tolist()
    del first
    second = read_rows(path, DT, 3_000, 4_000 * DT.itemsize)
    assert _address(second) == where
    assert second.tolist() == rows[4_000:7_000].tolist()


@pytest.mark.parametrize("keep", ["array", "slice", "row", "field", "memoryview"])
def test_what_a_reader_still_holds_is_never_read_over(tmp_path, keep):
    path, rows = _file(tmp_path, 10_000)
    first = read_rows(path, DT, 5_000, 0)
    held = (first if keep == "array" else first[10:20] if keep == "slice" else first[7] if keep == "row"
            else first["a"] if keep == "field" else memoryview(first))
    before = np.array(held, copy=True) if keep != "row" else held.item()
    del first
    second = read_rows(path, DT, 5_000, 5_000 * DT.itemsize)
    assert second.tolist() == rows[5_000:].tolist()
    after = np.array(held, copy=True) if keep != "row" else held.item()
    if keep == "row":
        assert after == before == rows[7].item()
    else:
        assert np.array_equal(np.asarray(after).view(np.uint8), np.asarray(before).view(np.uint8))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2_999), st.integers(1, 3_000), st.booleans()), min_size=1, max_size=25),
       st.integers(1, 4))
def test_reads_kept_or_dropped_in_any_order_each_hold_their_rows(tmp_path_factory, reads, blocks):
    path, rows = _file(tmp_path_factory.mktemp("rb"), 6_000, seed=len(reads))
    pool = ReadBuffers(64 << 10, kept_blocks=blocks)
    kept = []
    with open(path, "rb", buffering=0) as f:
        for lo, n, keep in reads:
            got = pool.read(f, path, DT, n, lo * DT.itemsize)
            if keep:
                kept.append((lo, n, got))
            for k_lo, k_n, k in kept:   # nothing read later changed a kept part
                assert k.tobytes() == rows[k_lo:k_lo + k_n].tobytes()
    assert len(pool._blocks) <= blocks and sum(len(b) for b in pool._blocks) <= 64 << 10


def test_a_spill_file_that_ends_early_names_it_and_where(tmp_path):
    path, _rows = _file(tmp_path, 100)
    with pytest.raises(SpillError) as e:
        read_rows(path, DT, 50, 60 * DT.itemsize)
    msg = str(e.value)
    assert path in msg and f"{50 * DT.itemsize} bytes wanted at offset {60 * DT.itemsize}" in msg
    assert "\n" not in msg


def test_a_spilled_table_read_back_again_and_again_takes_no_fresh_pages(tmp_path):
    """Parts larger than glibc hands back from its heap (32 MiB): read into new arrays, each one would
    be new pages, a fault each 4 KiB."""
    folder = SpillFolder(MemoryLimit(1024, str(tmp_path)))   # (a tenth of it kept for reading back)
    table = ChunkedArray(np.dtype("<u8"), 1, folder, "big")
    part = 5 << 20   # rows: 40 MiB
    table.append(np.arange(4 * part, dtype=np.uint64))
    assert table.spilled
    pages = part * 8 // resource.getpagesize()

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    total = 0
    for lo in range(0, 4 * part, part):   # the first read makes its block
        got = table[lo:lo + part]
        total += int(got[-1])
        del got
    start = faults()
    for _round in range(3):
        for lo in range(0, 4 * part, part):
            got = table[lo:lo + part]
            assert int(got[0]) == lo and int(got[-1]) == lo + part - 1
            del got
    assert faults() - start < pages // 4, "parts read back into fresh pages"
    folder.close()


def test_a_spill_folder_keeps_at_most_a_tenth_of_its_memory_limit_for_reading_back(tmp_path):
    folder = SpillFolder(MemoryLimit(10, str(tmp_path)))
    table = ChunkedArray(np.dtype("<u8"), 1, folder, "rows")
    table.append(np.arange(1 << 18, dtype=np.uint64))   # 2 MiB: more than a tenth of 10 MiB
    small, large = table[:1000], table[: 1 << 18]
    assert int(large[-1]) == (1 << 18) - 1 and int(small[-1]) == 999
    assert sum(len(b) for b in folder.read_back._blocks) <= 1 << 20
    folder.close()
    assert folder.read_back._blocks == []
