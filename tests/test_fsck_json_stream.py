"""``bookie-fsck --json`` writes a report's findings one at a time: the bytes are those of the whole
document encoded at once, for reports with findings of every kind (caused findings, extra facts, none);
findings (slotted, sharing one empty ``extra``) copy and pickle as any dataclass."""
from __future__ import annotations

import io
import json

import pytest
from conftest import GOLDEN

from bkdisk.bookie.layout import discover
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.report import render_json


@pytest.mark.parametrize("name", ["interleaved-v6-hostport", "dbstorage-v6-bookieid", "cluster-3/bookies/bk-1.rack-a"])
@pytest.mark.parametrize("metadata", [None, "cluster-3/metadata"])
def test_streamed_json_is_the_whole_document(name, metadata, tmp_path):
    md = None if metadata is None else str(GOLDEN / metadata)
    report = check_bookie(discover(str(GOLDEN / name)), CheckOptions(metadata_dir=md))
    try:
        out = io.StringIO()
        render_json(report, out)
        assert report.findings
        assert out.getvalue() == json.dumps(report.to_json(), indent=None, separators=(",", ":")) + "\n"
        json.loads(out.getvalue())
    finally:
        report.close()


def test_a_report_without_findings_is_a_whole_document_too():
    report = check_bookie(discover(str(GOLDEN / "interleaved-v6-hostport")), CheckOptions())
    try:
        report.findings = []
        out = io.StringIO()
        render_json(report, out)
        assert json.loads(out.getvalue())["findings"] == []
        assert out.getvalue() == json.dumps(report.to_json(), indent=None, separators=(",", ":")) + "\n"
    finally:
        report.close()


def test_findings_pickle_and_copy_with_and_without_extra_facts():
    import copy
    import dataclasses
    import pickle

    from bkdisk.fsck.findings import Finding
    plain = Finding("ORPHAN_LEDGER", ledger=2**64 - 1, detail="3 entries")
    facts = Finding("ENTRIES_MISSING", scope=1, ledger=7, extra={"entries": [1, 2, 3]}, caused_by=plain)
    for f in (plain, facts):
        for again in (pickle.loads(pickle.dumps(f)), copy.deepcopy(f), copy.copy(f)):
            assert again == f and again.to_json() == f.to_json() and dict(again.extra) == dict(f.extra)
    assert dataclasses.asdict(plain)["extra"] == {} and plain.extra == {} and len(plain.extra) == 0
    assert pickle.loads(pickle.dumps(plain)).extra is plain.extra   # (the one shared object)
