"""A dump checks the file's kind before printing anything: a file another dump reads is refused in one
line naming the kind found and that dump. The folder forms: `dump cookie` takes a bookie root as
`dump index` and `dump lastmark` do; `dump locations` reads any RocksDB folder `dump rocksdb` reads."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bkdisk.dump.command import dump
from tests.conftest import GOLDEN

V6 = GOLDEN / "interleaved-v6-hostport"
DB = GOLDEN / "dbstorage-v6-bookieid"
FILES = {
    "journal": next((V6 / "journal" / "current").glob("*.txn")),
    "entrylog": V6 / "ledgers0" / "current" / "2.log",
    "index": next((V6 / "ledgers0" / "current").rglob("*.idx")),
    "cookie": V6 / "ledgers0" / "current" / "VERSION",
    "lastmark": V6 / "ledgers0" / "current" / "lastMark",
    "metadata": next((V6 / "metadata").glob("*.bin")),
}
KIND_WORDS = {"journal": "a journal", "entrylog": "an entry log", "index": "a ledger index file",
              "cookie": "a cookie", "lastmark": "a lastMark file", "metadata": "ledger metadata"}
PAIRS = [(cmd, kind) for cmd in FILES for kind in FILES if cmd != kind]


def _run(*argv: str):
    return CliRunner().invoke(dump, [str(a) for a in argv])


@pytest.mark.parametrize("cmd,kind", PAIRS)
def test_a_file_of_another_kind_is_refused_naming_its_kind_and_dump_with_nothing_printed(cmd, kind):
    path = FILES[kind]
    argv = [cmd, path] + (["--ledger-id", "1"] if cmd == "index" else [])
    r = _run(*argv)
    assert r.exit_code == 8, (r.exit_code, r.stdout[:500], r.stderr)
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert str(path) in line and KIND_WORDS[kind] in line and f"bkdisk dump {kind} {path}" in line, line


@pytest.mark.parametrize("kind", sorted(FILES))
def test_each_dump_still_reads_its_own_kind(kind):
    r = _run(kind, FILES[kind])
    assert r.exit_code == 0 and r.stdout, (kind, r.stderr)


def test_dump_cookie_takes_a_bookie_root_like_index_and_lastmark():
    one = _run("cookie", V6 / "journal" / "current" / "VERSION")
    root = _run("cookie", V6)
    assert root.exit_code == 0, root.stderr
    assert root.stdout == one.stdout
    assert _run("lastmark", V6).exit_code == 0
    docs = [json.loads(l) for l in _run("cookie", V6, "--json").stdout.splitlines()]
    assert {Path(d["file"]).parent.parent.name for d in docs} == {"journal", "ledgers0", "ledgers1"}


def test_dump_locations_reads_a_rocksdb_folder_of_any_name(tmp_path):
    moved = tmp_path / "locations-copy"
    shutil.copytree(DB / "ledgers0" / "current" / "locations", moved)
    assert _run("rocksdb", moved).exit_code == 0
    r = _run("locations", moved)
    assert r.exit_code == 0, r.stderr
    want = _run("locations", DB / "ledgers0" / "current" / "locations")
    assert r.stdout == want.stdout and r.stdout.startswith("===== LEDGER")
    assert json.loads(_run("locations", moved, "--json").stdout.splitlines()[0])["db"] == str(moved)
