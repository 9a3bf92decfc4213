"""Root causes are linked by the facts findings carry (``Finding.extra``, ledger, entry), never by reading
their ``detail`` text: the detail is for people and may say anything."""
from __future__ import annotations

import ast

from conftest import REPO

from bkdisk.fsck.codes import Code
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.root_causes import missing_log_causes

LIBRARY = ("formats", "diskio", "digests", "journal", "entrylogs", "indexfiles", "rocksdbfiles", "bookie", "fsck",
           "bkdisk", "audit", "metaservice", "commandline")
# str methods that take text apart
_PARSING = {"split", "rsplit", "partition", "rpartition", "startswith", "endswith", "find", "rfind", "index",
            "rindex", "count", "removeprefix", "removesuffix", "splitlines"}


def _is_detail(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "detail"


def detail_parsing(source: str, name: str = "<src>") -> list[str]:
    """Places that read a ``.detail`` as data: a str method that takes it apart, a pattern matched on it,
    a slice or index of it, or ``in`` it."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _PARSING and _is_detail(f.value):
                out.append(f"{name}:{node.lineno} .detail.{f.attr}()")
            elif any(_is_detail(a) for a in node.args) and isinstance(f, ast.Attribute) and f.attr in (
                    "match", "search", "fullmatch", "findall", "finditer", "split", "sub"):
                out.append(f"{name}:{node.lineno} matches a pattern on .detail")
        elif isinstance(node, ast.Subscript) and _is_detail(node.value):
            out.append(f"{name}:{node.lineno} indexes .detail")
        elif isinstance(node, ast.Compare) and any(isinstance(o, ast.In | ast.NotIn) for o in node.ops) and any(
                _is_detail(c) for c in node.comparators):
            out.append(f"{name}:{node.lineno} looks for text in .detail")
    return out


def test_no_library_code_reads_a_detail_as_data():
    files = [p for pkg in LIBRARY for p in sorted((REPO / pkg).rglob("*.py")) if not p.name.endswith("_pb2.py")]
    assert len(files) > 150
    bad = [x for p in files for x in detail_parsing(p.read_text(), str(p.relative_to(REPO)))]
    assert bad == []


def test_the_rule_flags_a_detail_taken_apart():
    planted = ("import re\nm = re.match(r'^([0-9a-f]+)', f.detail)\nname = f.detail.split(',')[0]\n"
               "x = f.detail[:4]\nif 'log' in f.detail:\n    pass\n")
    assert len(detail_parsing(planted)) == 4
    assert detail_parsing("d = f'{name}: {p.detail}'\nFinding(code, detail=detail)\nt = p.detail + '; more'\n") == []


def _located(log_id: int, ledger: int, entry: int, detail: str) -> Finding:
    return Finding(Code.INDEX_LOCATION_MISSING_LOG, path=f"/d/current/0/{ledger}.idx", scope=0, ledger=ledger,
                   entry=entry, detail=detail, extra={"log_id": log_id})


def test_locations_into_a_missing_log_are_grouped_by_the_log_id_they_carry_whatever_their_detail_says():
    # details that do not begin with the log's name (the old link read it from there)
    a, b = _located(0x1F, 3, 0, "index slot 0"), _located(0x1F, 4, 7, "points into a log nowhere")
    c = _located(0x2, 3, 1, "")
    gone = Finding(Code.ENTRY_MISSING, scope=0, ledger=4, entry=7, detail="1f.log")
    other = Finding(Code.ENTRY_MISSING, scope=0, ledger=4, entry=8, detail="1f.log")
    causes = missing_log_causes([a, b, c, gone, other])
    assert [x.extra for x in causes] == [{"log": "2.log", "entries": 1}, {"log": "1f.log", "entries": 2}]
    assert causes[1].detail.startswith("1f.log, which the index points into (2 entries of 2 ledgers)")
    assert (a.caused_by, b.caused_by, c.caused_by) == (causes[1], causes[1], causes[0])
    assert gone.caused_by is causes[1] and other.caused_by is None
