"""The index listing made by a forked process while a check loads its kernels: the walk that reads in
its order gives what listing and reading together give; anything but a whole listing is none (the
walk lists for itself); the command uses it."""
from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from bkdisk.diskio.chunked_array import ChunkedArray
from bkdisk.diskio.spill import MemoryLimit, SpillFolder
from bkdisk.fsck_cli import fsck_command
from bkdisk.indexfiles import listing_ahead
from bkdisk.indexfiles import scan as index_scan
from bkdisk.indexfiles.arrays import LOCATION_DTYPE
from bkdisk.indexfiles.file_rows import FileRows
from bkdisk.indexfiles.listing import IndexListing, ListedBlock, list_index_tree, read_streamed, stream_index_tree
from bkdisk.indexfiles.listing_ahead import ListingAhead
from bkdisk.indexfiles.reading import Reader
from bkdisk.indexfiles.scan import walk_index_dirs
from tests.test_index_scan import GOLDEN, _damaged_tree, assert_same_inventory


def _same_listing(got, want) -> None:
    assert got.dirs == want.dirs and got.paths == want.paths and got.relpaths == want.relpaths
    assert got.files.tolist() == want.files.tolist() and got.regular.tolist() == want.regular.tolist()
    assert got.strays == want.strays and got.failures == want.failures and got.symlinks == want.symlinks


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of two files: every test tree streams in several."""
    monkeypatch.setattr(listing_ahead, "STREAM_BLOCK", 2)


def test_the_listing_streamed_ahead_is_the_listing_and_reads_like_the_walk(small_blocks):
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)   # strays, links, unreadable files, a missing dir (a failure)
        ahead = ListingAhead.start(dirs, d)
        assert ahead is not None
        parts = list(ahead.take(dirs))
        blocks, rest = parts[:-1], parts[-1]
        assert len(blocks) > 3 and all(isinstance(b, ListedBlock) and len(b) for b in blocks)
        assert isinstance(rest, IndexListing) and rest.failures and len(rest.files) == 0   # (the files came before)
        _same_listing(read_streamed(dirs, iter(parts), Reader(FileRows())),
                      list_index_tree(dirs, reader=Reader(FileRows())))
        assert ahead.take(dirs) is None   # once
        ahead2 = ListingAhead.start(dirs, d)
        got = walk_index_dirs(dirs, listing=ahead2.take(dirs))
        want = walk_index_dirs(dirs)
        assert_same_inventory(got, want)
        assert got.symlinks == want.symlinks


def test_a_listing_of_other_dirs_is_not_given():
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)
        ahead = ListingAhead.start(dirs[:1], d)
        assert ahead is not None
        try:
            assert ahead.take(dirs) is None
        finally:
            ahead.close()


WHOLE = listing_ahead._stream_listing


def _killed(dirs, spool, sink):
    os.kill(os.getpid(), signal.SIGKILL)


def _killed_after_two_blocks(dirs, spool, sink):
    from bkdisk.indexfiles import listing
    shipped = []

    def ship_two(found_ship):
        def ship(part):
            if len(shipped) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            shipped.append(part)
            found_ship(part)
        return ship
    real = listing.stream_index_tree
    listing.stream_index_tree = lambda dirs, ship, block: real(dirs, ship_two(ship), block)
    WHOLE(dirs, spool, sink)


def _killed_before_the_rest(dirs, spool, sink):
    from bkdisk.indexfiles import listing
    real = listing.stream_index_tree

    def blocks_only(dirs, ship, block):
        real(dirs, ship, block)
        os.kill(os.getpid(), signal.SIGKILL)
    listing.stream_index_tree = blocks_only
    WHOLE(dirs, spool, sink)


def _cut_short(dirs, spool, sink):
    os.pwrite(spool.fileno(), b"\x80\x05\x95", 0)   # the start of a pickle, and no more
    sink.write(listing_ahead.placed(0, 3))


def _failing(dirs, spool, sink):
    raise RuntimeError("a bug in the listing")


@pytest.mark.parametrize("send", [_killed, _killed_after_two_blocks, _killed_before_the_rest, _cut_short, _failing,
                                  WHOLE],
                         ids=["killed", "killed-after-two-blocks", "killed-before-the-rest", "cut-short", "raised",
                              "whole"])
def test_a_stream_cut_anywhere_is_listed_to_its_end_by_the_walk(monkeypatch, small_blocks, send):
    monkeypatch.setattr(listing_ahead, "_stream_listing", send)
    listed_here = []
    real = index_scan.list_index_tree
    monkeypatch.setattr(index_scan, "list_index_tree", lambda dirs, **kw: listed_here.append(1) or real(dirs, **kw))
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)
        ahead = ListingAhead.start(dirs, d)
        assert ahead is not None
        got = walk_index_dirs(dirs, listing=ahead.take(dirs))
        assert listed_here == ([] if send is WHOLE else [1])
        monkeypatch.setattr(index_scan, "list_index_tree", real)
        want = walk_index_dirs(dirs)
        assert_same_inventory(got, want)
        assert got.symlinks == want.symlinks


@pytest.mark.parametrize("change", ["first file gone", "file added first", "same"])
def test_files_read_from_a_cut_stream_are_kept_only_while_the_hierarchy_begins_with_them(tmp_path, change):
    dirs = _damaged_tree(str(tmp_path))
    parts: list = []
    stream_index_tree(dirs, parts.append, 2)   # (the rest left out: the stream is cut after its blocks)
    first = os.path.join(dirs[0], "current", os.fsdecode(parts[0].data[:parts[0].lengths[0]].tobytes()))
    if change == "first file gone":
        os.unlink(first)
    elif change == "file added first":
        shutil.copy(first, os.path.join(dirs[0], "current", "0.idx"))
    spill = tmp_path / "spill"
    spill.mkdir()
    with SpillFolder(MemoryLimit(1, str(spill))) as folder:
        sink = ChunkedArray(LOCATION_DTYPE, 64, folder, "locations")   # spills at once
        got = walk_index_dirs(dirs, listing=iter(parts[:3]), sink=sink, batch_bytes=4096)
        assert got.locations is sink
        # the files read again: what the first reads spilled is gone, not kept beside the second's
        assert len(list(Path(folder.get()).glob("locations-*"))) == 1
        want = walk_index_dirs(dirs)
        assert got.locations.array().tolist() == want.locations.tolist()
    got.locations = want.locations
    assert_same_inventory(got, want)


def _children() -> list[int]:
    return [int(p) for t in os.listdir("/proc/self/task")
            for p in Path(f"/proc/self/task/{t}/children").read_text().split()]


def test_the_stream_is_ended_as_soon_as_the_walk_has_read_it(tmp_path):
    dirs = _damaged_tree(str(tmp_path))   # (bad headers: their errors, kept, must not keep the stream alive)
    before = _children()
    ahead = ListingAhead.start(dirs, str(tmp_path))
    assert ahead is not None
    inv = walk_index_dirs(dirs, listing=ahead.take(dirs))
    assert any(e is not None for e in inv.errors)
    assert ahead._spool.closed   # the listing's file, and its process, gone with the walk
    assert _children() == before


def test_the_process_keeps_nothing_it_has_sent(tmp_path):
    dirs = _damaged_tree(str(tmp_path))
    held = []

    def ship(part):
        held.append(len(part))
    rest = stream_index_tree(dirs, ship, 2)
    assert len(held) > 3 and sum(held) == len(list_index_tree(dirs).files)
    assert len(rest.files) == 0 and len(rest.relpaths) == 0


def test_close_ends_a_listing_nobody_takes(monkeypatch, tmp_path):
    said = tmp_path / "pid"

    def stuck(dirs, spool, sink):
        said.write_text(str(os.getpid()))
        time.sleep(3600)
    monkeypatch.setattr(listing_ahead, "_stream_listing", stuck)
    ahead = ListingAhead.start(["/nonexistent"], tempfile.gettempdir())
    assert ahead is not None
    while not said.exists() or not said.read_text():
        time.sleep(0.01)
    pid = int(said.read_text())
    ahead.close()   # kills and reaps it: the call returns, and the process is gone (not a zombie)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert ahead.take(["/nonexistent"]) is None


def test_no_listing_ahead_without_fork(monkeypatch):
    monkeypatch.setenv("BKDISK_NO_FORK", "1")
    assert ListingAhead.start(["/nonexistent"], tempfile.gettempdir()) is None


CORPUS = GOLDEN / "interleaved-v6-hostport"


def test_the_command_reads_the_index_in_the_order_of_the_listing_made_ahead(monkeypatch):
    taken = []
    take = ListingAhead.take

    def spy(self, dirs):
        got = take(self, dirs)
        taken.append(got is not None)
        return got
    monkeypatch.setattr(ListingAhead, "take", spy)
    monkeypatch.delenv("BKDISK_NO_FORK", raising=False)
    runner = CliRunner()
    ahead = runner.invoke(fsck_command, [str(CORPUS), "--json", "-j", "2"])
    assert taken == [True], ahead.output
    alone = runner.invoke(fsck_command, [str(CORPUS), "--json", "-j", "1"])   # one job: no other process
    assert taken == [True]
    assert ahead.exit_code == alone.exit_code

    def findings(out: str) -> list:
        doc = json.loads(out)
        return [doc["summary"], doc["findings"], {k: v for k, v in doc["stats"].items() if k != "seconds"}]
    assert findings(ahead.output) == findings(alone.output)


def test_the_listing_passes_through_a_file_nobody_sees_and_nothing_is_left(tmp_path):
    spool = tmp_path / "tmp"
    spool.mkdir()
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)
        ahead = ListingAhead.start(dirs, str(spool))
        assert ahead is not None
        assert list(ahead.take(dirs))
    assert list(spool.iterdir()) == []


@pytest.mark.parametrize("jobs", ["2", "1"])   # 2: the listing made ahead; 1: the command's own walk
def test_an_index_file_linked_to_itself_is_unreadable_and_an_error(monkeypatch, tmp_path, jobs):
    import shutil
    root = tmp_path / "b"
    shutil.copytree(CORPUS, root, symlinks=True)
    idx = root / "ledgers1" / "current" / "0" / "ff" / "ff.idx"
    idx.unlink()
    os.symlink("ff.idx", idx)   # a loop: every open fails with ELOOP
    taken = []
    take = ListingAhead.take

    def spy(self, dirs):
        got = take(self, dirs)
        taken.append(got is not None)
        return got
    monkeypatch.setattr(ListingAhead, "take", spy)
    monkeypatch.delenv("BKDISK_NO_FORK", raising=False)
    res = CliRunner().invoke(fsck_command, [str(root), "--json", "-j", jobs])
    assert taken == ([True] if jobs == "2" else [])
    doc = json.loads(res.output)
    unreadable = [f for f in doc["findings"] if f["code"] == "FILE_UNREADABLE"]
    assert [f["path"] for f in unreadable] == [str(idx)], res.output
    assert "too many levels of symbolic links" in unreadable[0]["message"].lower()
    assert res.exit_code == 4
    assert doc["stats"]["index_files"] == 5   # counted among the index files, as one that could not be read
