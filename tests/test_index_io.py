"""Index walk I/O: a sparse multi-GiB ``.idx`` read within a memory bound (holes skipped, or read a
window at a time where SEEK_DATA is missing), and folders or files that cannot be read coming back
as data with their errno, which fsck reports as errors.

Children measure their own peak RSS (a memory bound, not a timing); their timeouts are hang guards.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.diskio.failures import LIST, OPEN
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import LOCATION, IndexHeader, pack_location, slot_offset
from bkdisk.indexfiles.reference_walk import walk_index_dirs_reference
from bkdisk.indexfiles.scan import read_index_locations, walk_index_dirs
from bkdisk.indexfiles.writer import index_bytes

REPO = Path(__file__).resolve().parents[1]
RSS_CEILING_MIB = 400
HANG_GUARD_S = 300
FAR_SLOT = 2 ** 31 - 2            # a slot 16 GiB into a sparse index file
FAR_LOCATION = pack_location(7, 4096)

CHILD = r"""
import json, resource, sys
from bkdisk.indexfiles.scan import read_index_locations, walk_index_dirs


def peak_mib():
    try:   # VmHWM: the high-water mark since the reset below
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) // 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


read_index_locations(sys.argv[3])   # the kernels loaded (or compiled, on a first run) before measuring
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")   # reset VmHWM: the figure is the walk's, not the compiler's
except OSError:
    pass


def bytes_read():
    with open("/proc/self/io") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("rchar:"))


before = bytes_read()
inv = walk_index_dirs([sys.argv[1]])
one = read_index_locations(sys.argv[2])
read = bytes_read() - before
print(json.dumps({
    "rows": [[int(r["present"]), int(r["last_entry"]), int(r["size"])] for r in inv.files],
    "entries": inv.locations["entry"].tolist(), "logs": inv.locations["log"].tolist(),
    "one": [one.present, one.last_entry, one.locations["entry"].tolist(), one.header.fenced],
    "failures": [f.path for f in inv.io_failures], "rss_mib": peak_mib(), "read_mib": read / 2**20}))
"""


def _sparse_index(path: Path, far_slot: int = FAR_SLOT) -> None:
    """A real header and two locations (entry 0 and ``far_slot``): everything between is a hole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    near = np.array([pack_location(7, 1028)], np.uint64)
    path.write_bytes(index_bytes(IndexHeader(1, bytes(range(20)), 1, None), near, 8192))
    with open(path, "r+b") as f:
        f.seek(slot_offset(far_slot))
        f.write(LOCATION.build(FAR_LOCATION))


def _child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_a_16_gib_sparse_index_is_read_within_the_memory_ceiling(tmp_path: Path):
    idx = tmp_path / "ledgers" / "current" / "0" / "5" / "5.idx"
    _sparse_index(idx)
    assert idx.stat().st_size == slot_offset(FAR_SLOT + 1) and idx.stat().st_blocks * 512 < 1 << 20
    small = tmp_path / "small.idx"
    _sparse_index(small, far_slot=5)
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "ledgers"), str(idx), str(small)],
                       capture_output=True, text=True, env=_child_env(), timeout=HANG_GUARD_S, cwd=REPO)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["rows"] == [[2, FAR_SLOT, slot_offset(FAR_SLOT + 1)]]
    assert doc["entries"] == [0, FAR_SLOT] and doc["logs"] == [7, 7]
    assert doc["one"] == [2, FAR_SLOT, [0, FAR_SLOT], True]
    assert doc["failures"] == []
    assert doc["rss_mib"] < RSS_CEILING_MIB, f"peak RSS {doc['rss_mib']} MiB"
    assert doc["read_mib"] < 8, f"{doc['read_mib']:.1f} MiB read: the holes were read"   # of 2 x 16 GiB


def test_without_seek_data_a_sparse_index_is_read_a_window_at_a_time(tmp_path: Path, monkeypatch):
    """Filesystems (or systems) without SEEK_DATA: every byte is read, a buffer at a time, same result."""
    idx = tmp_path / "ledgers" / "current" / "0" / "5" / "5.idx"
    _sparse_index(idx, far_slot=3_000_000)   # 24 MiB
    want = walk_index_dirs_reference([str(tmp_path / "ledgers")])
    for seek in ("SEEK_DATA", "SEEK_HOLE"):
        monkeypatch.delattr(os, seek)
    got = walk_index_dirs([str(tmp_path / "ledgers")], batch_bytes=1 << 20)
    assert got.files.tolist() == want.files.tolist() and got.locations.tolist() == want.locations.tolist()
    assert got.locations["entry"].tolist() == [0, 3_000_000]
    one = read_index_locations(idx)
    assert (one.present, one.last_entry, one.locations["entry"].tolist()) == (2, 3_000_000, [0, 3_000_000])


def test_large_files_windowed_equal_the_reference_with_data_in_every_window(tmp_path: Path):
    """Files larger than the batch buffer, with locations across several windows and in a partial slot."""
    rng = np.random.default_rng(3)
    hdr = IndexHeader(0, bytes(20), 0, None)
    cur = tmp_path / "l" / "current"
    for lid, n in ((1, 40_000), (2, 70_001), (3, 5)):
        locs = np.where(rng.random(n) < 0.01, rng.integers(1, 1 << 40, n), 0).astype(np.uint64)
        p = cur / "0" / f"{lid:x}" / f"{lid:x}.idx"
        p.parent.mkdir(parents=True)
        p.write_bytes(index_bytes(hdr, locs, 1024) + b"\x01\x02\x03")
    want = walk_index_dirs_reference([str(tmp_path / "l")])
    for batch in (4096, 64 << 10, 32 << 20):
        got = walk_index_dirs([str(tmp_path / "l")], batch_bytes=batch)
        assert got.files.tolist() == want.files.tolist() and got.locations.tolist() == want.locations.tolist()
        assert got.headers == want.headers and got.files["trailing"].tolist() == [3, 3, 3]


def _as_unprivileged(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    # Root reads anything; without these two capabilities it obeys permissions like anyone.
    setpriv = shutil.which("setpriv")
    assert setpriv, "util-linux setpriv is needed to drop root's read override"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]


FAILURES_CHILD = r"""
import json, sys
from bkdisk.indexfiles.scan import walk_index_dirs
inv = walk_index_dirs([sys.argv[1]])
print(json.dumps({"failures": [[f.path, f.op, f.errno, f.describe()] for f in inv.io_failures],
                  "paths": list(inv.paths), "errors": [str(e) if e else None for e in inv.errors],
                  "strays": inv.strays}))
"""


def test_unlistable_folder_and_unreadable_file_are_failures_with_their_errno(tmp_path: Path):
    ledgers = [LedgerSpec(i, [b"x"] * 3) for i in (1, 2, 258)]
    write_bookie(BookieSpec(ledgers, write_journal=False), str(tmp_path))
    cur = tmp_path / "ledgers" / "current"
    hidden, victim = cur / "0", cur / "1" / "2" / "102.idx"
    os.chmod(victim, 0)
    os.chmod(hidden, 0)
    try:
        r = subprocess.run(_as_unprivileged([sys.executable, "-c", FAILURES_CHILD, str(tmp_path / "ledgers")]),
                           capture_output=True, text=True, env=_child_env(), timeout=HANG_GUARD_S, cwd=REPO)
    finally:
        os.chmod(hidden, 0o755)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["failures"] == [[str(hidden), LIST, errno.EACCES, "cannot list (Permission denied)"],
                               [str(victim), OPEN, errno.EACCES, "cannot read (Permission denied)"]]
    assert doc["paths"] == [str(victim)] and doc["errors"] == [f"{victim}: cannot read (Permission denied)"]
    assert doc["strays"] == []
    # Which ledgers the unlisted folder may hide: those whose path runs through current/0.
    from bkdisk.diskio.failures import IoFailure
    from bkdisk.indexfiles.arrays import IndexInventory
    inv = IndexInventory([str(tmp_path / "ledgers")], io_failures=[IoFailure(*f[:3], "x") for f in doc["failures"]])
    assert inv.unlisted_folder_of(LedgerId(0, 1)).path == str(hidden)           # 0/1/1.idx
    assert inv.unlisted_folder_of(LedgerId(0, 258)) is None                     # 1/2/102.idx: read
    assert inv.unlisted_folder_of(LedgerId(0x42, 7)).path == str(hidden)        # 0/42/0/7/...: scope bits 0, 0x42
    assert inv.unlisted_folder_of(LedgerId(0x142, 7)) is None                   # 1/42/...


def test_fsck_reports_an_unlistable_index_folder_as_an_error_not_a_stray(tmp_path: Path):
    ledgers = [LedgerSpec(i, [b"x"] * 3) for i in (1, 2)]
    write_bookie(BookieSpec(ledgers), str(tmp_path / "bookie"))
    hidden = tmp_path / "bookie" / "ledgers" / "current" / "0"
    os.chmod(hidden, 0)
    cmd = [sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", str(tmp_path / "bookie"), "--json",
           "--no-progress"]
    try:
        r = subprocess.run(_as_unprivileged(cmd), capture_output=True, text=True, env=_child_env(),
                           timeout=HANG_GUARD_S, cwd=REPO)
    finally:
        os.chmod(hidden, 0o755)
    findings = json.loads(r.stdout)["findings"]
    about = [(f["code"], f["severity"]) for f in findings if f["path"] == str(hidden)]
    assert about == [("FILE_UNREADABLE", "error")], r.stdout
    assert not any(f["code"] == "STRAY_FILE" for f in findings)


def test_one_listing_of_the_hierarchy_feeds_passes_2_and_3(tmp_path: Path, monkeypatch):
    """fsck lists the index hierarchy once per check; pass 2 (placement) and pass 3 (headers) read it."""
    import bkdisk.indexfiles.scan as S
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie

    wb = write_bookie(BookieSpec([LedgerSpec(i, [b"x"] * 3) for i in (1, 2, 0x1234)]), str(tmp_path / "b"))
    bad_header = wb.index_files[LedgerId(0, 2)]
    with open(bad_header, "r+b") as f:
        f.write(b"XXXX")
    cur = os.path.dirname(os.path.dirname(os.path.dirname(wb.index_files[LedgerId(0, 1)])))
    misplaced = os.path.join(cur, "1.idx")
    os.rename(wb.index_files[LedgerId(0, 1)], misplaced)
    calls = []
    real = S.list_index_tree
    monkeypatch.setattr(S, "list_index_tree", lambda dirs, **kw: calls.append(list(dirs)) or real(dirs, **kw))
    rep = check_bookie(discover(str(tmp_path / "b")))
    assert len(calls) == 1, calls
    codes = {(f.code, f.path) for f in rep.findings}
    assert ("INDEX_MISPLACED", misplaced) in codes and ("INDEX_HEADER_BAD", bad_header) in codes
