"""The index walk's listing against a plain restatement of its rules on random hierarchies (symlinked
folders inside and outside the tree, link loops, FIFOs and folders named like index files, strays,
RocksDB folders), and its reading against the reference walk where small files are packed in the
buffer, a file fills it, or a file is larger than it; the location rows' reserve."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bkdisk.formats.index import IndexHeader
from bkdisk.indexfiles import reading
from bkdisk.indexfiles.arrays import LOCATION_DTYPE
from bkdisk.indexfiles.file_rows import FileRows, LocationRows
from bkdisk.indexfiles.listing import STRAY_OTHER, STRAY_RELOCATION, list_index_tree
from bkdisk.indexfiles.reference_walk import walk_index_dirs_reference
from bkdisk.indexfiles.scan import walk_index_dirs
from bkdisk.indexfiles.writer import index_bytes

NAMES = ["a", "a-b", "b", "ab", "x.idx", "1.idx", "ledgers", "locations", "é"]
KINDS = ["idx", "rloc", "stray", "fifo", "link_file", "link_out", "link_up", "link_self", "folder_idx"]


def _reference(cur: str):
    """The walk's rules said plainly: every index file below ``cur`` by path string, strays, links."""
    files: list[tuple[str, bool]] = []
    strays: list[tuple[str, str]] = []
    links: list[str] = []
    top = os.path.realpath(cur)
    seen = {top}

    def key(folder: str, name: str, depth: int) -> str:   # (the link followed first is the first by path)
        path = os.path.join(folder, name)
        followed = os.path.isdir(path) and (depth > 0 or name not in ("ledgers", "locations"))
        return name + "/" if followed else name

    def visit(folder: str, depth: int, via_link: bool) -> None:
        for name in sorted(os.listdir(folder), key=lambda n: key(folder, n, depth)):
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                if not via_link:
                    links.append(path)
                if (depth or name not in ("ledgers", "locations")) and os.path.isdir(path):
                    real = os.path.realpath(path)
                    if real not in seen and not real.startswith(top + os.sep):
                        seen.add(real)
                        visit(path, depth + 1, True)
                    continue
            if stat.S_ISDIR(mode):
                if name.endswith(".idx"):
                    files.append((path, False))
                if depth or name not in ("ledgers", "locations"):
                    visit(path, depth + 1, via_link)
            elif name.endswith(".idx"):
                files.append((path, stat.S_ISREG(mode)))
            elif depth:
                strays.append((path, STRAY_RELOCATION if name.endswith(".idx.rloc") else STRAY_OTHER))

    visit(cur, 0, False)
    return sorted(files), sorted(strays), sorted(links)


def _build(root: Path, outside: Path, plan: list[tuple[list[str], str, str]]) -> None:
    for folders, name, kind in plan:
        try:
            _make(root, outside, folders, name, kind)
        except (FileExistsError, NotADirectoryError):   # a name an earlier item took
            pass


def _make(root: Path, outside: Path, folders: list[str], name: str, kind: str) -> None:
    hdr = index_bytes(IndexHeader(1, bytes(20), 0, None), np.array([5 << 32 | 1028], np.uint64), 64)
    where = root.joinpath(*folders)
    if any(not root.joinpath(*folders[:i]).is_dir() or root.joinpath(*folders[:i]).is_symlink()
           for i in range(1, len(folders) + 1) if os.path.lexists(root.joinpath(*folders[:i]))):
        return   # (not through a file or a link)
    where.mkdir(parents=True, exist_ok=True)
    p = where / name
    if os.path.lexists(p):
        return
    if kind in ("idx", "rloc", "stray"):
        p = where / (name + {"idx": ".idx", "rloc": ".idx.rloc", "stray": ".txt"}[kind])
        if not os.path.lexists(p):
            p.write_bytes(hdr)
    elif kind == "fifo":
        if not os.path.lexists(where / (name + ".idx")):
            os.mkfifo(where / (name + ".idx"))
    elif kind == "link_file":
        (outside / "f.idx").write_bytes(hdr)
        os.symlink(outside / "f.idx", p)
    elif kind == "link_out":   # a folder outside, with a loop back to itself
        target = outside / ("o" + str(len(folders)) + name)
        (target / "k").mkdir(parents=True, exist_ok=True)
        (target / "k" / "9.idx").write_bytes(hdr)
        if not os.path.lexists(target / "back"):
            os.symlink(target, target / "back")
        os.symlink(target, p)
    elif kind == "link_up":
        os.symlink("..", p)
    elif kind == "link_self":
        os.symlink(".", p)
    else:
        (where / (name + ".idx") / "0").mkdir(parents=True, exist_ok=True)
        (where / (name + ".idx") / "0" / "7.idx").write_bytes(hdr)


PLAN = st.lists(st.tuples(st.lists(st.sampled_from(NAMES), max_size=4), st.sampled_from(NAMES),
                          st.sampled_from(KINDS)), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=PLAN)
# A folder reached by two links is listed by the first path in the strings' order (through ``a``, which
# leads back above current/, before ``b`` itself), not by the first link the walk happens to meet.
@example(plan=[([], "a", "link_up"), ([], "b", "link_out")])
def test_the_listing_follows_its_rules_on_random_hierarchies(tmp_path_factory, plan):
    base = tmp_path_factory.mktemp("walk")
    root, outside = base / "ledgers" / "current", base / "elsewhere"
    outside.mkdir()
    _build(root, outside, plan)
    files, strays, links = _reference(str(root))
    lst = list_index_tree([str(base / "ledgers")])
    assert list(lst.paths) == [p for p, _regular in files]
    assert lst.regular.tolist() == [regular for _p, regular in files]
    assert lst.strays == strays and sorted(p for _d, p in lst.symlinks) == links
    assert lst.failures == []
    got = walk_index_dirs([str(base / "ledgers")])
    assert list(got.paths) == [p for p, _regular in files]
    assert [f.path for f in got.io_failures] == sorted(p for p, regular in files if not regular and
                                                       not os.path.isfile(p))


def _index(path: Path, slots: int, rng: np.random.Generator) -> None:
    locs = np.where(rng.random(slots) < 0.3, rng.integers(1, 1 << 40, slots), 0).astype(np.uint64)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(index_bytes(IndexHeader(1, bytes(20), 0, None), locs, 64) + b"\x01" * (slots % 3))


def test_small_files_packed_a_file_filling_the_buffer_and_a_larger_one_equal_the_reference(tmp_path, monkeypatch):
    """Small files go back to back into the buffer's first PACK bytes (a file that does not fit them
    is read again after a decode); a file past PACK but within the buffer is decoded whole; a larger
    one a window at a time."""
    monkeypatch.setattr(reading, "PACK", 16 << 10)
    rng = np.random.default_rng(5)
    cur = tmp_path / "l" / "current"
    sizes = [1000] * 40 + [3000, 20_000, 9000, 70_000] + [500] * 30   # slots: 8 KB files, 160 KB, 560 KB
    for i, slots in enumerate(sizes):
        _index(cur / f"{i % 7:x}" / f"{i:x}" / f"{i:x}.idx", slots, rng)
    want = walk_index_dirs_reference([str(tmp_path / "l")])
    for batch in (256 << 10, 8 << 10):
        got = walk_index_dirs([str(tmp_path / "l")], batch_bytes=batch)
        assert got.files.tolist() == want.files.tolist() and got.locations.tolist() == want.locations.tolist()
        assert got.headers == want.headers and list(got.paths) == list(want.paths)


def _resident_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_location_rows_take_their_reserve_at_once_untouched():
    """Within the reserve the rows are never moved (one buffer) and its pages not yet reached are not
    resident; past it the rows grow and keep what was written."""
    rows = LocationRows(reserve=20_000_000)   # 400 MB of address space
    before = _resident_mib()
    first = rows.take(1000)
    first["entry"] = np.arange(1000)
    start = rows.array.ctypes.data
    for k in range(50):
        rows.take(10_000)["entry"] = k
    assert rows.array.ctypes.data == start and len(rows.array) == 20_000_000
    assert _resident_mib() - before < 64
    small = LocationRows(reserve=3000)
    small.take(2000)["entry"] = 1
    small.take(5000)["entry"] = 2
    assert small.finish()["entry"].tolist() == [1] * 2000 + [2] * 5000


@pytest.mark.parametrize("budget", [0, 1 << 20])
def test_a_walk_with_a_sink_keeps_its_location_rows_in_one_buffer(tmp_path, budget):
    """The reader's reserve holds the sink's budget and one buffer's locations: no growth, spilled or not."""
    from bkdisk.diskio.chunked_array import ChunkedArray
    from bkdisk.diskio.spill import MemoryLimit, SpillFolder

    rng = np.random.default_rng(2)
    for i in range(30):
        _index(tmp_path / "l" / "current" / "0" / f"{i:x}" / f"{i:x}.idx", 4000, rng)
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        sink = ChunkedArray(LOCATION_DTYPE, budget, folder, "locations")
        rd = reading.Reader(FileRows(), 64 << 10, sink)
        lst = list_index_tree([str(tmp_path / "l")], reader=rd)
        assert len(lst.files) == 30 and len(rd.locs.array) == rd.locs.reserve
        assert rd.locs.reserve > budget // LOCATION_DTYPE.itemsize and sink.spilled == (budget == 0)
