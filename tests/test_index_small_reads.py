"""Listed index files are read by a jitted loop (libc's openat, read, close) straight into the reader's
batch while they are small and regular; the files it leaves (not regular, unreadable, HEAD_BYTES or
more) are read by the reader as any walk reads them. Either way the inventory is the reference walk's,
across read blocks and batch boundaries, whatever the mix of files."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.diskio.libc_calls import c_strings
from bkdisk.diskio.mapped import OPEN_FLAGS
from bkdisk.formats import index as fi
from bkdisk.indexfiles import listing as listing_module
from bkdisk.indexfiles import reading, small_reads
from bkdisk.indexfiles.listing import list_index_tree
from bkdisk.indexfiles.reference_walk import walk_index_dirs_reference
from bkdisk.indexfiles.scan import walk_index_dirs
from bkdisk.indexfiles.writer import index_bytes
from tests.test_index_scan import assert_same_inventory

HEAD = small_reads.HEAD_BYTES
PAGE = 1024
# (kind, slots): a file of a header and so many slots (its size 1024 + 8 * slots), or another kind of file
FILLS = (HEAD - 1024) // 8   # slots of a file of HEAD_BYTES
SIZES = [0, 1, 127, 128, FILLS - 1, FILLS, FILLS + 1, 2 * FILLS]
KINDS = st.one_of(st.tuples(st.just("idx"), st.sampled_from(SIZES)),
                  st.tuples(st.sampled_from(["empty", "short", "fifo", "link", "dead link", "bad magic"]),
                            st.just(0)))


def _write(d: str, i: int, kind: str, slots: int) -> None:
    """Ledger ``i``'s index file, as BookKeeper places it (two levels of two hex digits)."""
    name = f"{i:x}.idx"
    folder = os.path.join(d, "current", f"{i & 0xff:x}", f"{(i >> 8) & 0xff:x}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    header = fi.IndexHeader(1, bytes([i % 251]) * 20, 0, None)
    rng = np.random.default_rng(i)
    if kind == "idx":
        locs = rng.integers(1, 1 << 40, size=slots, dtype=np.uint64)
        locs[rng.random(slots) < 0.3] = 0
        locs[-1:] = 1   # (the file holds every slot up to the last present one: its size is the slots')
        data = index_bytes(header, locs, 8)
    elif kind == "bad magic":
        data = b"XXXX" + index_bytes(header, np.ones(3, np.uint64), PAGE)[4:]
    elif kind == "short":
        data = index_bytes(header, np.zeros(0, np.uint64), PAGE)[:500]
    elif kind == "empty":
        data = b""
    elif kind == "fifo":
        os.mkfifo(path)
        return
    elif kind == "link":
        target = os.path.join(d, f"target-{i}")
        with open(target, "wb") as f:
            f.write(index_bytes(header, np.arange(1, 40, dtype=np.uint64), PAGE))
        os.symlink(target, path)
        return
    else:   # a dead link
        os.symlink(os.path.join(d, "nowhere"), path)
        return
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture
def small_blocks(monkeypatch):
    """Read blocks and batches far smaller than the defaults, so a few files cross both."""
    monkeypatch.setattr(listing_module, "READ_BLOCK", 5)
    monkeypatch.setattr(reading, "PACK", 3 * HEAD)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(KINDS, min_size=1, max_size=30))
def test_a_listed_walk_reads_every_mix_of_files_as_the_reference_does(small_blocks, files):
    with tempfile.TemporaryDirectory() as d:
        for i, (kind, slots) in enumerate(files):
            _write(d, i + 1, kind, slots)
        ref = walk_index_dirs_reference([d])
        for batch in (1 << 20, 2048):   # (2048: no room for the jitted loop: every file read by the reader)
            got = walk_index_dirs([d], batch_bytes=batch, listing=list_index_tree([d]))
            assert_same_inventory(got, ref)


def test_the_jitted_loop_takes_small_regular_files_and_stops_at_any_other(tmp_path):
    for i, (kind, slots) in enumerate([("idx", 3), ("idx", 127), ("fifo", 0), ("idx", FILLS), ("idx", 1),
                                       ("link", 0), ("dead link", 0), ("idx", 2)]):
        _write(str(tmp_path), i + 1, kind, slots)
    listing = list_index_tree([str(tmp_path)])
    paths = list(listing.paths)
    kinds = {os.path.basename(p): os.path.getsize(p) if os.path.isfile(p) and not os.path.islink(p) else None
             for p in paths}
    buf = np.zeros(4 * HEAD, np.uint8)
    names, starts, _ends = c_strings(paths)
    at, lens = np.zeros(len(paths), np.int64), np.zeros(len(paths), np.int64)
    stops, k, pos = [], 0, 0
    while k < len(paths):
        j, pos, full = small_reads.read_small_files(names, starts, listing.regular, k, len(paths), OPEN_FLAGS,
                                                    buf, 0, 2 * HEAD, at, lens)
        for n in range(j - k):   # each file taken is whole and byte for byte, on a word
            with open(paths[k + n], "rb") as f:
                assert buf[at[n]:at[n] + lens[n]].tobytes() == f.read()
            assert at[n] % 8 == 0
        if full:
            k = j
            continue
        stops.append(os.path.basename(paths[j])) if j < len(paths) else None
        k = j + 1
    left = {name for name, size in kinds.items() if size is None or size >= HEAD}
    assert set(stops) == left and len(left) == 4   # the FIFO, the large file, the link, the dead link
