"""`bkdisk dump rocksdb|locations|ledgers-index` on the golden DbLedgerStorage bookies and damaged copies."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from click.testing import CliRunner
from conftest import GOLDEN

from bench import rocksdb_tools as rt
from bkdisk.dump.command import dump
from bkdisk.formats.dbledger import ENTRY_SIZE_FIELD
from bkdisk.rocksdbfiles.sst import SstFile

DB = GOLDEN / "dbstorage-v6-bookieid"
BK3 = GOLDEN / "cluster-3" / "bookies" / "bk-3.rack-b"


def _run(*argv: str):
    return CliRunner().invoke(dump, list(argv))


def _manifest(b: Path) -> dict:
    return json.loads((b / "manifest.json").read_text())


def test_locations_of_one_ledger_print_as_the_bookie_shell_does():
    res = _run("locations", str(DB), "--ledger-id", "255")
    assert res.exit_code == 0, res.output
    want = [f"entry {r['entry_id']}\t:\t"
            f"(log: {int(r['entry_log_file'][:-4], 16)}, pos: {r['offset'] + ENTRY_SIZE_FIELD})"
            for r in sorted(_manifest(DB)["entry_log_records"], key=lambda r: r["entry_id"]) if r["ledger_id"] == "255"]
    assert res.stdout.splitlines() == want and len(want) > 10


def test_locations_json_covers_every_entry_of_a_bookie():
    res = _run("locations", str(BK3), "--json")
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    got = {(r["ledger"], r["entry"]): (r["log"], r["offset"]) for r in rows}
    want = {(int(r["ledger_id"]), r["entry_id"]): (int(r["entry_log_file"][:-4], 16), r["offset"])
            for r in _manifest(BK3)["entry_log_records"]}
    assert got == want and len(rows) == 236


def test_ledgers_index_json_and_text():
    res = _run("ledgers-index", str(DB), "--json")
    assert res.exit_code == 0, res.output
    rows = {r["ledger"]: r for r in map(json.loads, res.stdout.splitlines())}
    for led in _manifest(DB)["ledgers"]:
        r = rows[int(led["ledger_id"])]
        assert (r["fenced"], r["master_key"], r["explicit_lac"]) == (led["fenced"], led["master_key_hex"],
                                                                     led["explicit_lac"])
    text = _run("ledgers-index", str(DB / "ledgers1"), "--ledger-id", "255").stdout
    assert text.splitlines() == ["===== LEDGER: 255 =====", f"master key  : {rows[255]['master_key']}",
                                 "exists       : true", "isFenced     : false", "explicitLac  : 30"]


def test_rocksdb_summarizes_a_database_and_one_table():
    res = _run("rocksdb", str(DB / "ledgers0" / "current" / "locations"), "--json", "--records")
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    kinds = [r["kind"] for r in rows]
    assert kinds[:3] == ["manifest", "sst", "wal"] and kinds.count("record") == 51 and "problem" not in kinds
    assert rows[0]["last_sequence"] == 51 and rows[1]["format_version"] == 2 and rows[1]["compression"] == "LZ4"
    one = _run("rocksdb", str(DB / "ledgers0" / "current" / "ledgers" / "000008.sst"))
    assert one.exit_code == 0 and "format_version=5" in one.stdout and "compression=Snappy" in one.stdout


def test_a_damaged_table_prints_what_it_can_then_one_line_and_exit_8(tmp_path: Path):
    d = tmp_path / "locations"
    shutil.copytree(DB / "ledgers0" / "current" / "locations", d)
    sst = d / "000008.sst"
    sst.chmod(0o644)
    data = bytearray(sst.read_bytes())
    h = SstFile(str(sst), bytes(data)).index_handles[0]
    data[h.offset + 3] ^= 1
    sst.write_bytes(bytes(data))
    res = _run("rocksdb", str(d), "--json")
    assert res.exit_code == 8
    problems = [r for r in map(json.loads, res.stdout.splitlines()) if r["kind"] == "problem"]
    assert [p["problem"] for p in problems] == ["sst-checksum"] and problems[0]["offset"] == h.offset
    (line,) = res.stderr.splitlines()
    assert str(sst) in line and f"offset {h.offset}" in line and "Traceback" not in res.output
    res = _run("locations", str(tmp_path / "nothing"))
    assert res.exit_code == 8 and len(res.stderr.splitlines()) == 1


def test_a_database_folder_without_current_is_named_as_one(tmp_path: Path):
    """Given a locations or ledgers folder whose CURRENT is gone, the dumps read it as the database it is and
    name the missing file, rather than look for a bookie's dirs in it ("no bookie dirs found")."""
    for db in ("locations", "ledgers"):
        d = tmp_path / db
        shutil.copytree(DB / "ledgers0" / "current" / db, d)
        (d / "CURRENT").unlink()
        for cmd in ("locations", "ledgers-index", "rocksdb"):
            res = _run(cmd, str(d))
            (line,) = res.stderr.splitlines()
            assert res.exit_code == 8 and f"{d / 'CURRENT'}: cannot read" in line, (cmd, line)
    res = _run("locations", str(tmp_path / "ledgers" / ".."))   # a folder of databases is not one
    assert res.exit_code == 8 and "no bookie dirs found" in res.stderr


def test_a_damaged_filter_block_is_found_as_rocksdb_verifies_a_table(tmp_path: Path):
    """The bloom filter of a locations table is read by no lookup here, yet `dump rocksdb` verifies every block
    a table holds, as RocksDB's own verification does: the same block, the same stored and computed sums."""
    d = tmp_path / "locations"
    shutil.copytree(DB / "ledgers0" / "current" / "locations", d)
    sst = d / "000008.sst"
    sst.chmod(0o644)
    data = bytearray(sst.read_bytes())
    filters = [h for name, h in SstFile(str(sst), bytes(data)).metaindex.items() if name.startswith(b"fullfilter.")]
    (h,) = filters
    data[h.offset + 5] ^= 1
    sst.write_bytes(bytes(data))
    run = subprocess.run([rt.tool("sst_dump"), f"--file={sst}", "--command=verify"], capture_output=True, text=True)
    theirs = run.stdout + run.stderr
    stored, computed = re.search(r"stored = (\d+), computed = (\d+).* offset (\d+) size", theirs).group(1, 2)
    assert f"offset {h.offset} size {h.size}" in theirs
    res = _run("rocksdb", str(d), "--json")
    assert res.exit_code == 8
    (problem,) = [r for r in map(json.loads, res.stdout.splitlines()) if r["kind"] == "problem"]
    assert problem["problem"] == "sst-checksum" and problem["offset"] == h.offset
    assert f"expected block checksum {int(stored):#010x}" in problem["detail"]
    assert f"found {int(computed):#010x}" in problem["detail"]
    assert _run("locations", str(d)).exit_code == 0     # lookups never read it: the locations all print
