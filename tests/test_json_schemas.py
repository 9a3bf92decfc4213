"""Every machine output validates against its JSON Schema in specs/schemas/ (strict: no unknown keys).

Real outputs are taken from the golden disks BookKeeper wrote, through the real commands.
"""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from bkdisk.dump import dump
from bkdisk.inventory import inventory
from conftest import GOLDEN, REPO

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
    assert len(names) >= 7
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


def test_a_schema_rejects_an_unknown_key():
    v = _validator("dump-lastmark.schema.json")
    good = {"kind": "lastmark", "journal_index": 0, "journal_id": 1, "journal_file": "1.txn", "offset": 512,
            "files": ["/x/lastMark"]}
    v.validate(good)
    with pytest.raises(jsonschema.ValidationError):
        v.validate({**good, "surprise": 1})
