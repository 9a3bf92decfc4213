"""``bookie-fsck --json`` writes a report's findings one at a time: the bytes are those of the whole
document encoded at once, for reports with findings of every kind (caused findings, extra facts, none)."""
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
