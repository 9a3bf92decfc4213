"""Bad inputs an operator may meet on a bookie host: one line naming the file, a sensible exit code,
never a traceback, never a hang, never a write. Commands run as child processes with a time limit
(a FIFO opened the wrong way would block forever)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from conftest import GOLDEN, golden_copy

BIN = Path(sys.executable).parent
LIMIT_S = 120


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=LIMIT_S)


def _one_line(r: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_a_fifo_given_as_the_server_config_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "bk_server.conf"
    os.mkfifo(fifo)
    _one_line(_run("bookie-fsck", "--conf", str(fifo)), 8, str(fifo), "not a regular file")
    _one_line(_run("bkdisk", "inventory", "--conf", str(fifo)), 8, str(fifo), "not a regular file")


def test_a_huge_sparse_small_file_is_refused_before_it_is_read(tmp_path):
    root = golden_copy(tmp_path)
    mark = root / "ledgers0" / "current" / "lastMark"
    os.truncate(mark, 1 << 40)
    r = _run("bookie-fsck", str(root), "--json", "-j", "1")
    assert r.returncode == 4 and "Traceback" not in r.stderr, r.stderr[-2000:]
    found = [f for f in json.loads(r.stdout)["findings"] if f["path"] == str(mark)]
    assert found and "expected a small file" in found[0]["message"], found
    _one_line(_run("bkdisk", "dump", "lastmark", str(mark)), 8, str(mark), "expected a small file")


def test_a_metadata_file_name_beyond_64_bits_names_no_ledger(tmp_path):
    root = golden_copy(tmp_path)
    md = tmp_path / "md"
    md.mkdir()
    shutil.copy(GOLDEN / "interleaved-v6-hostport" / "metadata" / "1.bin", md / "1.bin")
    shutil.copy(md / "1.bin", md / "10000000000000000000000.bin")
    from bkdisk.bookie.metadata_dir import load_metadata_dir
    meta, errors = load_metadata_dir(str(md))
    assert [(lid.scope, lid.ledger) for lid in meta] == [(0, 1)] and errors == []
    r = _run("bookie-fsck", str(root), "--metadata-dir", str(md), "-j", "1", "-q")
    assert r.returncode in (0, 1, 4) and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_an_unwritable_parquet_output_is_one_line_before_the_scan(tmp_path):
    root = golden_copy(tmp_path)
    out = tmp_path / "no" / "such" / "x.parquet"
    _one_line(_run("bkdisk", "inventory", str(root), "--parquet", str(out)), 8, str(out), "cannot write")
    assert not out.parent.exists()


def test_an_index_file_replaced_by_a_folder_is_an_error(tmp_path):
    root = golden_copy(tmp_path, "sorted-v5-bookieid")
    idx = next(p for p in sorted(root.rglob("*.idx")) if p.is_file())
    idx.unlink()
    idx.mkdir()
    r = _run("bookie-fsck", str(root), "--json", "-j", "1")
    assert r.returncode == 4, r.stderr[-2000:]
    found = [f for f in json.loads(r.stdout)["findings"] if f["path"] == str(idx)]
    assert [(f["code"], f["severity"]) for f in found] == [("FILE_UNREADABLE", "error")], found
    assert "not a regular file" in found[0]["message"]


def test_a_dangling_link_and_a_link_loop_are_named_for_what_they_are(tmp_path):
    root = golden_copy(tmp_path)
    cur = root / "ledgers1" / "current"
    (cur / "9.log").symlink_to(tmp_path / "nowhere")
    (cur / "a.log").symlink_to(cur / "a.log")
    r = _run("bookie-fsck", str(root), "--json", "-j", "1")
    found = {Path(f["path"]).name: f for f in json.loads(r.stdout)["findings"] if f["code"] == "FILE_UNREADABLE"}
    assert found["9.log"]["message"].endswith(": no such file or directory"), found
    assert found["a.log"]["message"].endswith(": too many levels of symbolic links"), found
    assert r.returncode == 4


def test_inventory_of_a_log_with_a_damaged_header_exits_4_as_fsck_does(tmp_path):
    root = golden_copy(tmp_path)
    log = root / "ledgers1" / "current" / "1.log"
    with open(log, "r+b") as f:
        f.write(b"XXXX")
    r = _run("bkdisk", "inventory", str(root), "--jsonl")
    assert r.returncode == 4 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"{log}: offset 0: expected an entry log header" in r.stderr
    assert _run("bookie-fsck", str(root), "-q", "-j", "1").returncode == 4
    clean = golden_copy(tmp_path / "clean")
    assert _run("bkdisk", "inventory", str(clean), "--jsonl").returncode == 0


def test_dump_of_a_bookie_root_names_a_damaged_dir_instead_of_leaving_it_out(tmp_path):
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    mark = root / "ledgers0" / "current" / "lastMark"
    mark.unlink()
    os.mkfifo(mark)
    _one_line(_run("bkdisk", "dump", "lastmark", str(root)), 8, str(mark), "not a regular file")
    current = root / "ledgers0" / "current" / "ledgers" / "CURRENT"
    current.unlink()
    os.mkfifo(current)
    _one_line(_run("bkdisk", "dump", "ledgers-index", str(root)), 8, str(current), "not a regular file")


def test_a_whole_file_problem_names_no_offset():
    from bkdisk.formats.errors import FormatError
    assert (str(FormatError("1087 bytes", "1001", path="/x/000008.sst"))
            == "/x/000008.sst: expected 1087 bytes, found 1001")
    assert (str(FormatError("'BKLO'", "'XXXX'", path="/x/0.log", offset=0))
            == "/x/0.log: offset 0: expected 'BKLO', found 'XXXX'")


def test_a_link_to_a_folder_of_the_same_index_tree_lists_nothing_twice(tmp_path):
    root = golden_copy(tmp_path)
    leaf = next(p.parent for p in sorted(root.rglob("*.idx")))
    (leaf / "up").symlink_to("..")
    r = _run("bookie-fsck", str(root), "--json", "-j", "1")
    codes = [f["code"] for f in json.loads(r.stdout)["findings"]]
    assert [c for c in codes if c.startswith(("INDEX_", "SYMLINK_"))] == ["SYMLINK_FOLLOWED"], codes
    assert r.returncode == 0


def test_dump_of_an_sst_that_is_not_a_regular_file_says_so(tmp_path):
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    sst = sorted((root / "ledgers0" / "current" / "locations").glob("*.sst"))[0]
    sst.unlink()
    os.mkfifo(sst)
    _one_line(_run("bkdisk", "dump", "rocksdb", str(sst)), 8, str(sst), "not a regular file")


def test_a_ledger_whose_metadata_file_is_unreadable_stops_fsck_space_and_inventory_never_an_orphan(tmp_path):
    root = golden_copy(tmp_path)
    md = tmp_path / "md"
    shutil.copytree(root / "metadata", md)
    bad = md / "1.bin"   # the preferred file of ledger 1, garbage beside a valid 1.txt
    bad.write_bytes(b"garbage\n")
    for cmd in (("bookie-fsck", str(root)), ("bookie-fsck", str(root), "--json"),
                ("bookie-fsck", str(root), "--repair", "-n"), ("bkdisk", "space", str(root)),
                ("bkdisk", "inventory", str(root), "--jsonl")):
        r = _run(*cmd, "--metadata-dir", str(md))
        _one_line(r, 8, f"{bad}: offset 0: expected header")
        assert "ORPHAN_LEDGER" not in r.stdout and r.stdout == "", (cmd, r.stdout[-2000:])


def test_a_folder_whose_current_holds_nothing_is_no_bookie(tmp_path):
    """An empty ``current/`` alone is refused (not a clean check of nothing); beside two bookies, the
    bookies are named (not a traceback over a bookie of no dirs)."""
    (tmp_path / "alone" / "x" / "current").mkdir(parents=True)
    for cmd in (("bookie-fsck",), ("bkdisk", "space")):
        _one_line(_run(*cmd, str(tmp_path / "alone")), 8, str(tmp_path / "alone"), "no bookie dirs found")
    two = tmp_path / "two"
    (two / "x" / "current").mkdir(parents=True)
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", two / "a")
    shutil.copytree(GOLDEN / "sorted-v5-bookieid", two / "b")
    for cmd in (("bookie-fsck",), ("bkdisk", "space")):
        _one_line(_run(*cmd, str(two)), 8, "holds 2 bookies", str(two / "a"), str(two / "b"))


def test_a_folder_whose_bookie_is_deeper_than_the_search_says_how_deep_it_looked(tmp_path):
    """A ROOT whose bookie's dirs sit more than 3 levels below it: one line naming ROOT, the depth
    searched and the folder below which nothing was searched; from that folder the bookie is found."""
    top = tmp_path / "x"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", top / "a" / "b" / "c" / "d" / "bookie")
    for cmd in (("bkdisk", "inventory"), ("bkdisk", "inventory", "--jsonl"), ("bookie-fsck",), ("bkdisk", "space")):
        r = _run(*cmd, str(top))
        _one_line(r, 8, f"{top}: no bookie dirs found up to 3 levels below it",
                  f"folders below {top / 'a' / 'b' / 'c'} not searched")
        assert r.stdout == "", (cmd, r.stdout[-2000:])
    r = _run("bkdisk", "inventory", str(top / "a" / "b" / "c"))
    assert r.returncode == 0 and "bookie 127.0.0.1:3181: 91 entries" in r.stdout, (r.stdout, r.stderr)
    (tmp_path / "empty").mkdir()   # nothing left unsearched: nothing said of deeper folders
    r = _run("bkdisk", "inventory", str(tmp_path / "empty"))
    _one_line(r, 8, f"{tmp_path / 'empty'}: no bookie dirs found up to 3 levels below it")
    assert "not searched" not in r.stderr


def test_a_disks_file_that_is_not_text_is_one_line(tmp_path):
    disks = tmp_path / "disks.tsv"
    disks.write_bytes(b"\xff\xfe\n")
    md = str(GOLDEN / "cluster-3" / "metadata")
    for cmd in (("bkdisk", "salvage", "--out", str(tmp_path / "o")),
                ("bkdisk", "audit", "--out", str(tmp_path / "a"), "--metadata-dir", md)):
        _one_line(_run(*cmd, "--disks-file", str(disks)), 8,
                  f"{disks}: expected a disks file of UTF-8 text, found byte 0xff at offset 0")


def test_an_output_in_a_bookie_dir_or_not_a_regular_file_is_refused_before_the_scan(tmp_path):
    """``--parquet`` naming an entry log of the bookie read would replace it with Parquet; a FIFO, a
    link, a folder or a device would be replaced by the rename (or fail it after the whole scan)."""
    root = golden_copy(tmp_path)
    log = root / "ledgers1" / "current" / "1.log"
    before = log.read_bytes()
    _one_line(_run("bkdisk", "inventory", str(root), "--parquet", str(log)), 8, str(log),
              "--parquet is inside", "a dir of a bookie this command reads")
    assert log.read_bytes() == before
    fifo, link, folder = tmp_path / "fifo", tmp_path / "link", tmp_path / "folder"
    os.mkfifo(fifo)
    link.symlink_to(tmp_path / "target.parquet")
    folder.mkdir()
    for out, what in ((fifo, "a FIFO"), (link, "a symbolic link"), (folder, "a folder"),
                      (Path("/dev/null"), "a device")):
        _one_line(_run("bkdisk", "inventory", str(root), "--parquet", str(out)), 8, f"--parquet is {what}")
    _one_line(_run("bkdisk", "scan-disk", str(root), "--out", str(fifo)), 8, "--out is a FIFO")
    assert not (tmp_path / "target.parquet").exists() and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_bookie_without_cookies_is_still_checked_against_the_metadata_given(tmp_path):
    """No cookie names the bookie: every ledger of --metadata-dir may be its, so an HMAC entry's digest is
    still checked with its ledger's password (it was left unverified, said to be a ledger the metadata
    given does not hold)."""
    root = golden_copy(tmp_path)
    for cookie in root.glob("*/current/VERSION"):
        cookie.unlink()
    log = root / "ledgers1" / "current" / "0.log"
    data = bytearray(log.read_bytes())
    data[1225] ^= 0xFF   # (a payload byte of ledger 255's entry 0: an HMAC ledger)
    log.write_bytes(bytes(data))
    r = _run("bookie-fsck", str(root), "--metadata-dir", str(root / "metadata"), "--json")
    found = [(f["code"], f["ledger"]) for f in json.loads(r.stdout)["findings"]]
    assert ("DIGEST_MISMATCH", 255) in found and not any(c == "DIGEST_NOT_VERIFIED" for c, _l in found), found
    assert sum(c == "COOKIE_MISSING" for c, _l in found) == 3


def test_a_name_that_is_not_utf8_is_one_line_where_rows_need_text_and_dumped_as_it_is(tmp_path):
    """A bookie folder or an option whose bytes are not UTF-8: the Parquet writers refuse it in one line
    before the scan (a traceback from pyarrow, or from the scan's child and then the command); a dump
    of a file so named prints the name's bytes as they are."""
    root = Path(os.fsdecode(bytes(tmp_path) + b"/bk\xff\xfe"))
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root)
    good = str(GOLDEN / "interleaved-v6-hostport")
    for args, option in ((("scan-disk", str(root), "--out", str(tmp_path / "a.parquet")), "ROOT"),
                         (("scan-disk", good, "--out", str(tmp_path / "b.parquet"), "--run-id", "r\udcff"), "--run-id"),
                         (("inventory", good, "--parquet", str(tmp_path / "o\udcff.parquet")), "--parquet"),
                         (("inventory", str(root), "--parquet", str(tmp_path / "c.parquet")), "ROOT")):
        _one_line(_run("bkdisk", *args), 8, f"{option}: expected UTF-8 text")
    journal = root / "journal" / "current" / "1a200497c65.txn"
    named = Path(os.fsdecode(bytes(tmp_path) + b"/j\xff.txn"))
    shutil.copy(journal, named)
    r = subprocess.run([str(BIN / "bkdisk"), "dump", "journal", str(named)], capture_output=True, timeout=LIMIT_S)
    assert r.returncode == 0 and b"(j\xff.txn)" in r.stdout and b"Traceback" not in r.stderr, r.stderr
