"""Every machine output validates against its JSON Schema in specs/schemas/ (strict: no unknown keys).

Real outputs are taken from the golden disks BookKeeper wrote, through the real commands.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import GOLDEN, REPO

from bkdisk.dump.command import dump
from bkdisk.inventory_cli import inventory
from bkdisk.read_ledger import read_ledger_command

SCHEMAS = REPO / "specs" / "schemas"
CORPORA = ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage", "dbstorage-v6-bookieid"]


def _validator(name: str) -> jsonschema.Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _lines(cmd, args: list[str], ok=(0,)) -> list[dict]:
    r = CliRunner().invoke(cmd, args)
    assert r.exit_code in ok, r.output
    return [json.loads(line) for line in r.stdout.splitlines()]


def _files(pattern: str) -> list[Path]:
    return sorted(p for c in CORPORA for p in (GOLDEN / c).glob(pattern) if p.is_file())


def _validate(schema: str, objs: list[dict]) -> None:
    v = _validator(schema)
    assert objs, "no output to validate"
    for o in objs:
        v.validate(o)


def test_every_schema_is_a_valid_draft_2020_12_schema():
    names = sorted(p.name for p in SCHEMAS.glob("*.schema.json"))
    assert len(names) >= 8 and "fsck.schema.json" in names
    for n in names:
        _validator(n)


def test_dump_journal_json_matches_its_schema():
    _validate("dump-journal.schema.json",
              [o for p in _files("journal/current/*.txn") for o in _lines(dump, ["journal", str(p), "--json"])])


def test_dump_entrylog_json_matches_its_schema_with_and_without_metadata():
    logs = [p for p in _files("ledgers*/current/*.log") if p.stat().st_size]
    _validate("dump-entrylog.schema.json", [o for p in logs for extra in ([], ["--metadata"])
                                            for o in _lines(dump, ["entrylog", str(p), "--json", *extra])])


def test_dump_index_json_matches_its_schema():
    _validate("dump-index.schema.json",
              [o for p in _files("ledgers*/current/*/*/*.idx") for o in _lines(dump, ["index", str(p), "--json"])])


def test_dump_lastmark_cookie_and_metadata_json_match_their_schemas():
    _validate("dump-lastmark.schema.json", [o for c in CORPORA for o in _lines(dump, ["lastmark", str(GOLDEN / c),
                                                                                      "--json"])])
    cookies = _files("*/current/VERSION") + _files("cookies/VERSION.*")
    _validate("dump-cookie.schema.json", [o for p in cookies for o in _lines(dump, ["cookie", str(p), "--json"])])
    md = sorted((GOLDEN / "metadata-vectors").rglob("*")) + _files("metadata/*")
    objs = [o for p in md if p.is_file() and p.suffix in (".bin", ".txt")
            for o in _lines(dump, ["metadata", str(p), "--json"], ok=(0, 8))]
    _validate("dump-metadata.schema.json", objs)


@pytest.mark.parametrize("corpus", CORPORA)
def test_inventory_rows_match_their_schema(corpus):
    rows = _lines(inventory, [str(GOLDEN / corpus), "--jsonl", "--payload-hash", "sha256"])
    _validate("inventory-row.schema.json", rows)
    assert all("payload_sha256" in r for r in rows)


def _fsck_doc(args: list[str], code: int) -> dict:
    from bkdisk.fsck_cli import fsck_command
    r = CliRunner().invoke(fsck_command, [*args, "--json", "--no-progress"], catch_exceptions=False)
    assert r.exit_code == code, r.output
    doc = json.loads(r.stdout)
    _validate("fsck.schema.json", [doc])
    assert doc["summary"]["exit_code"] == r.exit_code
    return doc


@pytest.mark.parametrize("corpus", CORPORA)
def test_fsck_json_of_a_clean_golden_bookie_matches_its_schema(corpus):
    doc = _fsck_doc([str(GOLDEN / corpus)], 0)
    assert [p["pass"] for p in doc["passes"]] == list(range(1, 8)) and "repair" not in doc


def test_fsck_json_of_a_damaged_copy_its_dry_run_plan_and_its_repair_match_the_schema(tmp_path):
    from fsck_helpers import make_disk

    from bkdisk.formats.ids import LedgerId
    disk = make_disk(str(tmp_path / "b"))
    log = disk.written.entry_log_files[0]
    os.truncate(log, os.path.getsize(log) // 2)                     # lost entries, causes and consequences
    with open(disk.written.index_files[LedgerId(0, 255)], "r+b") as f:
        f.write(bytes(4))                                             # an index to rebuild
    args = [disk.root, "--metadata-dir", disk.md_dir]
    checked = _fsck_doc(args, 4)
    assert any("caused_by" in f for f in checked["findings"])
    v = _validator("fsck.schema.json")
    f0 = checked["findings"][0]
    for bad in ({**checked, "findings": [{**f0, "surprise": 1}]}, {**checked, "summary": {**checked["summary"],
                                                                                            "exit_code": 2}}):
        with pytest.raises(jsonschema.ValidationError):
            v.validate(bad)
    plan = _fsck_doc([*args, "-n"], 4)["repair"]
    assert plan["after"] is None and plan["plan"]["lost_entries"] and plan["plan"]["recover_command"]
    assert {a["result"] for a in plan["plan"]["actions"]} == {None}
    fixable = make_disk(str(tmp_path / "c"))
    with open(fixable.written.index_files[LedgerId(0, 255)], "r+b") as f:
        f.write(bytes(4))
    done = _fsck_doc([fixable.root, "--metadata-dir", fixable.md_dir, "--repair", "-y", "--backup-dir",
                      str(tmp_path / "bk")], 1)["repair"]
    assert {a["result"] for a in done["plan"]["actions"]} == {"done"} and done["backup_dir"]
    assert done["before"]["summary"]["errors"] and done["after"]["summary"]["errors"] == 0


def test_the_fsck_schema_names_every_repair_kind():
    from bkdisk.fsck.problems import REPAIR_KINDS
    from bkdisk.fsck.repair.repairs import BOOKKEEPER_REBUILD, ORDER
    schema = json.loads((SCHEMAS / "fsck.schema.json").read_text())
    kinds = schema["$defs"]["action"]["properties"]["kind"]["enum"]
    # what bkdisk repairs itself, then the BookKeeper command it names for the RocksDB indexes it never writes
    assert kinds == [*REPAIR_KINDS, BOOKKEEPER_REBUILD] and set(kinds) == set(ORDER)


def test_fsck_json_plan_of_a_damaged_db_ledger_storage_copy_matches_the_schema(tmp_path):
    from test_rocksdb_fsck_pass import SRC, flip_data_block_byte
    root = tmp_path / "bk"
    shutil.copytree(SRC, root, symlinks=True)
    flip_data_block_byte(root)
    doc = _fsck_doc([str(root), "--repair", "-n"], 4)
    kinds = {a["kind"] for a in doc["repair"]["plan"]["actions"]}
    assert kinds == {"bookkeeper-rebuild"}


def test_a_schema_rejects_an_unknown_key():
    v = _validator("dump-lastmark.schema.json")
    good = {"kind": "lastmark", "journal_index": 0, "journal_id": 1, "journal_file": "1.txn", "offset": 512,
            "files": ["/x/lastMark"]}
    v.validate(good)
    with pytest.raises(jsonschema.ValidationError):
        v.validate({**good, "surprise": 1})


def test_read_ledger_jsonl_matches_its_schema_with_lost_entries_too():
    cluster = GOLDEN / "cluster-3"
    disks = [str(p) for p in sorted((cluster / "bookies").iterdir())]
    ledgers = [l["ledger_id"] for l in json.loads((cluster / "manifest.json").read_text())["ledgers"]]
    objs = [o for lid in ledgers for o in _lines(read_ledger_command, ["--ledger-id", lid, *disks, "--jsonl"])]
    lost = _lines(read_ledger_command, ["--ledger-id", "16", "--from", "59", "--to", "61", *disks, "--jsonl"], ok=(4,))
    assert [o["lost"] for o in lost] == [False, True, True]
    _validate("read-ledger-entry.schema.json", objs + lost)
