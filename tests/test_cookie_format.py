"""Bookie cookies (current/VERSION): golden byte-exact round trips, manifest agreement, fuzzing."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.formats.cookie import Cookie, decode_dirs, encode_dirs, parse_cookie, serialize_cookie
from bkdisk.formats.errors import FormatError
from bkdisk.formats.proto import CookieFormat

MISSING = GOLDEN / "<golden folder missing>"


def _golden_cookie_files() -> list[Path]:
    files = sorted(set(GOLDEN.glob("**/current/VERSION")) | set(GOLDEN.glob("**/cookies/VERSION.*")))
    return files or [MISSING]


COOKIE_FILES = _golden_cookie_files()
IDS = [str(p.relative_to(GOLDEN)) if p != MISSING else "missing" for p in COOKIE_FILES]


def _bookie_roots() -> list[Path]:
    """Every single-bookie tree: the four corpora and the three cluster-3 bookies."""
    roots = sorted(p.parent for p in GOLDEN.glob("*/manifest.json") if (p.parent / "journal").is_dir())
    roots += sorted(p.parent for p in GOLDEN.glob("cluster-3/bookies/*/manifest.json"))
    return roots or [MISSING]


BOOKIE_ROOTS = _bookie_roots()
ROOT_IDS = [str(p.relative_to(GOLDEN)) if p != MISSING else "missing" for p in BOOKIE_ROOTS]


def test_golden_folder_has_cookies_of_every_bookie_tree():
    assert GOLDEN.is_dir(), f"golden corpus folder missing: {GOLDEN}"
    assert len(BOOKIE_ROOTS) == 7
    for root in BOOKIE_ROOTS:
        assert (root / "journal" / "current" / "VERSION").is_file()
        assert (root / "cookies" / "VERSION.legacy-hostport").is_file()
        assert (root / "cookies" / "VERSION.custom-bookieid").is_file()
    assert len(COOKIE_FILES) == 31


@pytest.mark.parametrize("path", COOKIE_FILES, ids=IDS)
def test_golden_cookie_reserializes_byte_for_byte(path: Path):
    assert path.is_file(), f"golden file missing: {path}"
    data = path.read_bytes()
    cookie = parse_cookie(data, str(path))
    assert serialize_cookie(cookie) == data
    assert parse_cookie(serialize_cookie(cookie)) == cookie
    assert cookie.layout_version == 5
    assert cookie.index_dirs is None and cookie.instance_id


@pytest.mark.parametrize("root", BOOKIE_ROOTS, ids=ROOT_IDS)
def test_on_disk_cookies_agree_with_manifest(root: Path):
    assert root.is_dir(), f"golden bookie tree missing: {root}"
    doc = json.loads((root / "manifest.json").read_text())
    run_prefix = "out/" + str(root.relative_to(GOLDEN))
    expected = Cookie(
        layout_version=5,
        bookie_id=doc["bookie_id"],
        journal_dirs=tuple(f"{run_prefix}/{d}" for d in doc["journal_dirs"]),
        ledger_dirs=tuple(f"{run_prefix}/{d}" for d in doc["ledger_dirs"]),
        instance_id=parse_cookie((root / "journal" / "current" / "VERSION").read_bytes()).instance_id,
    )
    on_disk = [root / "journal" / "current" / "VERSION"]
    on_disk += [root / d / "current" / "VERSION" for d in doc["ledger_dirs"]]
    for path in on_disk:
        data = path.read_bytes()
        assert parse_cookie(data, str(path)) == expected
        if doc.get("cookies"):
            assert data.decode("utf-8") == doc["cookies"]["on_disk_cookie_text"]
    assert serialize_cookie(expected) == on_disk[0].read_bytes()
    if "cluster_manifest" in doc:
        cluster = json.loads((root / doc["cluster_manifest"]).read_text())
        assert expected.instance_id == cluster["cluster_instance_id"]
        entry = next(b for b in cluster["bookies"] if b["bookie_id"] == doc["bookie_id"])
        assert serialize_cookie(expected).decode("utf-8") == entry["cookie_text"]
        assert expected.ledger_dirs == tuple(f"out/cluster-3/{d}" for d in entry["ledger_dirs"])


@pytest.mark.parametrize("root", BOOKIE_ROOTS, ids=ROOT_IDS)
def test_generated_cookies_differ_only_in_bookie_id_form(root: Path):
    assert root.is_dir(), f"golden bookie tree missing: {root}"
    on_disk = parse_cookie((root / "journal" / "current" / "VERSION").read_bytes())
    legacy = parse_cookie((root / "cookies" / "VERSION.legacy-hostport").read_bytes())
    custom = parse_cookie((root / "cookies" / "VERSION.custom-bookieid").read_bytes())
    assert re.fullmatch(r"[0-9.]+:[0-9]+", legacy.bookie_id)
    assert not re.fullmatch(r"[0-9.]+:[0-9]+", custom.bookie_id)
    for c in (legacy, custom):
        assert (c.journal_dirs, c.ledger_dirs, c.layout_version) == (
            on_disk.journal_dirs, on_disk.ledger_dirs, on_disk.layout_version)
    assert replace(legacy, bookie_id="x") == replace(custom, bookie_id="x")


def test_fact_sheet_layout5_example_serializes_exactly():
    cookie = Cookie(5, "10.0.0.5:3181", ("/bk/journal",), ("/bk/ledgers",), "<uuid>")
    text = ('5\nbookieHost: "10.0.0.5:3181"\njournalDir: "/bk/journal"\nledgerDirs: "1\\t/bk/ledgers"\n'
            'instanceId: "<uuid>"\n')
    assert serialize_cookie(cookie) == text.encode()
    assert parse_cookie(text.encode()) == cookie


def test_layout3_is_four_plain_lines_with_real_tabs():
    cookie = Cookie(3, "bk:3181", ("/j1", "/j2"), ("/l1", "/l2"))
    data = b"3\nbk:3181\n/j1,/j2\n2\t/l1\t/l2\n"
    assert serialize_cookie(cookie) == data
    assert parse_cookie(data) == cookie


def test_layout4_without_instance_id_and_layout5_with_index_dirs():
    v4 = b'4\nbookieHost: "h:1"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\n'
    assert parse_cookie(v4) == Cookie(4, "h:1", ("/j",), ("/l",))
    assert serialize_cookie(parse_cookie(v4)) == v4
    v5 = v4.replace(b"4", b"5", 1) + b'instanceId: ""\nindexDirs: "2\\t/i1\\t/i2"\n'
    cookie = parse_cookie(v5)
    assert cookie == Cookie(5, "h:1", ("/j",), ("/l",), "", ("/i1", "/i2"))
    assert cookie.effective_instance_id is None            # BookKeeper reads "" as absent
    assert cookie.effective_index_dirs == ("/i1", "/i2")
    assert replace(cookie, index_dirs=None).effective_index_dirs == ("/l",)
    assert serialize_cookie(cookie) == v5


def test_dir_lists_encode_count_then_tab_separated_dirs():
    assert encode_dirs(("a", "b c")) == "2\ta\tb c"
    assert encode_dirs(()) == "0"
    assert decode_dirs("3\ta\t\tc") == ("a", "", "c")
    for bad in ("", "x\ta", "2\ta", "01\ta", "1"):
        with pytest.raises(FormatError):
            decode_dirs(bad)


def test_proto_declares_cookie_fields_like_bookkeeper():
    d = CookieFormat.DESCRIPTOR
    got = {f.number: (f.name, f.is_required, f.type) for f in d.fields}
    string = d.fields_by_name["bookieHost"].TYPE_STRING
    assert got == {1: ("bookieHost", True, string), 2: ("journalDir", True, string),
                   3: ("ledgerDirs", True, string), 4: ("instanceId", False, string),
                   5: ("indexDirs", False, string)}


def test_to_json_lists_dirs():
    cookie = parse_cookie(COOKIE_FILES[0].read_bytes())
    doc = json.loads(json.dumps(cookie.to_json()))
    assert doc["layout_version"] == 5 and doc["ledger_dirs"] == list(cookie.ledger_dirs)
    assert doc["index_dirs"] is None


# --- precise rejections ----------------------------------------------------------------------

GOOD = b'5\nbookieHost: "h:1"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\n'


@pytest.mark.parametrize("data,offset", [
    (b"", 0),
    (b"5", 0),
    (b"2\n", 0),
    (b"6\n" + GOOD[2:], 0),
    (b" 5\n" + GOOD[2:], 0),
    (b"05\n" + GOOD[2:], 0),
    (GOOD.replace(b'"1\\t/l"', b'"2\\t/l"'), 2),               # count disagrees
    (GOOD.replace(b'"1\\t/l"', b'"/l"'), 2),                   # no count
    (GOOD.replace(b'journalDir: "/j"\n', b""), 2),             # required field missing
    (GOOD + b"noSuchField: 1\n", 2 + len(GOOD[2:])),
    (GOOD + b'instanceId: "a"\ninstanceId: "b"\n', None),     # repeated optional field
    (GOOD + b'instanceId: "\\377"\n', None),                   # not UTF-8 inside the string
    (GOOD + b"\xff", 2 + len(GOOD[2:])),                      # not UTF-8
    (GOOD + b'instanceId: "\\e"\n', 2),     # an escape protobuf-java rejects
    (b"3\nh\n/j\n1\t/l\n\n", None),                            # layout 3 with an extra line
    (b"3\nh\n/j\n1\t/l", None),                                # layout 3 without its last LF
    (b"3\nh\r\n/j\n1\t/l\n", 3),                               # CR
    (b"3\nh\n/j\n2\t/l\n", 7),                                 # layout 3 count disagrees
])
def test_malformed_cookie_raises_format_error(data: bytes, offset: int | None):
    with pytest.raises(FormatError) as exc:
        parse_cookie(data, "VERSION")
    assert exc.value.path == "VERSION"
    if offset is not None:
        assert exc.value.offset == offset


@pytest.mark.parametrize("cookie", [
    Cookie(3, "h", ("/j",), ("/l",), instance_id="x"),
    Cookie(3, "h", ("/j",), ("/l",), index_dirs=("/i",)),
    Cookie(3, "h\nx", ("/j",), ("/l",)),
    Cookie(5, "h", ("/j,k",), ("/l",)),
    Cookie(5, "h", (), ("/l",)),
    Cookie(5, "h", ("/j",), ("/l\tm",)),
    Cookie(5, "h", ("/j",), ("/l",), index_dirs=("a\tb",)),
    Cookie(6, "h", ("/j",), ("/l",)),
    Cookie(5, "h\ud800", ("/j",), ("/l",)),
    Cookie(5, "h", ["/j"], ("/l",)),  # type: ignore[arg-type]
])
def test_serialize_rejects_cookie_its_layout_cannot_carry(cookie: Cookie):
    with pytest.raises(FormatError):
        serialize_cookie(cookie)


# --- hypothesis ------------------------------------------------------------------------------

def _texts(exclude: str, **kw):
    return st.text(st.characters(exclude_characters=exclude, exclude_categories=("Cs",)), **kw)


@st.composite
def cookies(draw) -> Cookie:
    version = draw(st.sampled_from((3, 4, 5)))
    lines = "\n\r" if version == 3 else ""
    dirs = st.lists(_texts("\t" + lines, max_size=12), max_size=4).map(tuple)
    return Cookie(
        layout_version=version,
        bookie_id=draw(_texts(lines, max_size=20)),
        journal_dirs=draw(st.lists(_texts("," + lines, max_size=12), min_size=1, max_size=3).map(tuple)),
        ledger_dirs=draw(dirs),
        instance_id=None if version == 3 else draw(st.none() | _texts("", max_size=36)),
        index_dirs=None if version == 3 else draw(st.none() | dirs),
    )


@settings(max_examples=200)
@given(cookies())
def test_cookie_build_parse_identity(cookie: Cookie):
    data = serialize_cookie(cookie)
    assert data.startswith(b"%d\n" % cookie.layout_version)
    if cookie.layout_version > 3:
        assert data.isascii()
    assert parse_cookie(data) == cookie


def _parse_or_format_error(data: bytes) -> None:
    try:
        cookie = parse_cookie(data, "fuzz")
    except FormatError as exc:
        assert exc.path == "fuzz"
        assert exc.offset is None or 0 <= exc.offset <= len(data)
        return
    assert isinstance(cookie, Cookie)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_format_error(data: bytes):
    _parse_or_format_error(data)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([b"3\n", b"4\n", b"5\n"]), st.binary(max_size=200))
def test_arbitrary_body_after_layout_line_raises_only_format_error(head: bytes, body: bytes):
    _parse_or_format_error(head + body)


GOLDEN_BYTES = sorted({p.read_bytes() for p in COOKIE_FILES if p.is_file()})


def test_every_truncation_of_golden_cookies_raises_only_format_error():
    assert GOLDEN_BYTES, "no golden cookie files"
    for data in GOLDEN_BYTES:
        for n in range(len(data)):
            _parse_or_format_error(data[:n])


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_golden_cookies_raise_only_format_error(data):
    assert GOLDEN_BYTES, "no golden cookie files"
    mutated = bytearray(data.draw(st.sampled_from(GOLDEN_BYTES)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(mutated) - 1))
        mutated[pos] = data.draw(st.integers(0, 255))
    _parse_or_format_error(bytes(mutated))


def test_spec_field_table_matches_the_proto_declaration():
    spec = Path(__file__).resolve().parents[1] / "specs" / "cookie.md"
    rows = {}
    in_table = False
    for line in spec.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells[:4] == ["#", "Name", "Type", "Label"]:
            in_table = True
        elif in_table and cells and cells[0].isdigit():
            rows[int(cells[0])] = (cells[1], cells[2], cells[3])
        elif not cells:
            in_table = False
    declared = {f.number: (f.name, "string" if f.type == f.TYPE_STRING else str(f.type),
                           "required" if f.is_required else "optional") for f in CookieFormat.DESCRIPTOR.fields}
    assert rows == declared
