"""The index listing made by a forked process while a check loads its kernels: the walk that reads in
its order gives what listing and reading together give; anything but a whole listing is none (the
walk lists for itself); the command uses it."""
from __future__ import annotations

import json
import os
import signal
import tempfile
import time

import pytest
from click.testing import CliRunner

from bkdisk.fsck_cli import fsck_command
from bkdisk.indexfiles import listing_ahead
from bkdisk.indexfiles.listing import list_index_tree
from bkdisk.indexfiles.listing_ahead import ListingAhead
from bkdisk.indexfiles.scan import walk_index_dirs
from tests.test_index_scan import GOLDEN, _damaged_tree, assert_same_inventory


def _same_listing(got, want) -> None:
    assert got.dirs == want.dirs and got.paths == want.paths and got.relpaths == want.relpaths
    assert got.files.tolist() == want.files.tolist() and got.regular.tolist() == want.regular.tolist()
    assert got.strays == want.strays and got.failures == want.failures and got.symlinks == want.symlinks


def test_the_listing_made_ahead_is_the_listing_and_reads_like_the_walk():
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)   # strays, links, unreadable files, a missing dir (a failure)
        ahead = ListingAhead.start(dirs, d)
        assert ahead is not None
        listing = ahead.take(dirs)
        assert listing is not None and listing.failures   # (the failures came through the pipe too)
        _same_listing(listing, list_index_tree(dirs))
        got = walk_index_dirs(dirs, listing=listing)
        want = walk_index_dirs(dirs)
        assert_same_inventory(got, want)
        assert got.symlinks == want.symlinks
        assert ahead.take(dirs) is None   # once


def test_a_listing_of_other_dirs_is_not_given():
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)
        ahead = ListingAhead.start(dirs[:1], d)
        assert ahead is not None
        try:
            assert ahead.take(dirs) is None
        finally:
            ahead.close()


WHOLE = listing_ahead._write_listing


def _killed(dirs, spool):
    os.kill(os.getpid(), signal.SIGKILL)


def _killed_after_writing(dirs, spool):
    WHOLE(dirs, spool)
    os.kill(os.getpid(), signal.SIGKILL)


def _cut_short(dirs, spool):
    os.write(spool.fileno(), b"\x80\x05\x95")   # the start of a pickle, and no more


def _failing(dirs, spool):
    raise RuntimeError("a bug in the listing")


@pytest.mark.parametrize("send", [_killed, _killed_after_writing, _cut_short, _failing, WHOLE],
                         ids=["killed", "killed-after-writing", "cut-short", "raised", "whole"])
def test_anything_but_a_whole_listing_is_none(monkeypatch, send):
    monkeypatch.setattr(listing_ahead, "_write_listing", send)
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)
        ahead = ListingAhead.start(dirs, d)
        assert ahead is not None
        got = ahead.take(dirs)
        assert (got is not None) == (send is WHOLE)


def test_close_ends_a_listing_nobody_takes(monkeypatch, tmp_path):
    said = tmp_path / "pid"

    def stuck(dirs, spool):
        said.write_text(str(os.getpid()))
        time.sleep(3600)
    monkeypatch.setattr(listing_ahead, "_write_listing", stuck)
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
        assert ahead.take(dirs) is not None
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
