"""128-bit ledger ids, index-file paths and bookie ids behave as specs/ids.md, paths.md and bookie-id.md say."""
from __future__ import annotations

import itertools
import json
import os
import re
import string
import uuid
from pathlib import Path

import pytest
from conftest import GOLDEN
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.formats.bookieid import BookieId, HostPort, is_strict_bp41, legacy_address, validate_bookie_id
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import U64, LedgerId, to_signed64, to_unsigned64
from bkdisk.formats.paths import (
    entry_log_name,
    index_relpath,
    index_relpaths,
    journal_name,
    journal_name_refused,
    parse_entry_log_name,
    parse_index_name,
    parse_journal_name,
)

u64 = st.integers(min_value=0, max_value=U64)
nonzero_u64 = st.integers(min_value=1, max_value=U64)
SETTINGS = settings(max_examples=200, deadline=None)


# --- ledger ids: qualified name ------------------------------------------------------------------

def test_qualified_name_is_32_lowercase_hex_digits_scope_first() -> None:
    assert LedgerId(0x1234, 0x100000000).qualified_name == "00000000000012340000000100000000"
    assert LedgerId(0, 0x1234).qualified_name == "00000000000000000000000000001234"
    assert LedgerId(U64, U64).qualified_name == "f" * 32
    assert LedgerId(0, 0).qualified_name == "0" * 32
    assert LedgerId(0xABCDEF, 0).qualified_name == "0000000000abcdef0000000000000000"


@pytest.mark.parametrize("text, expected", [
    ("00000000000012340000000100000000", LedgerId(0x1234, 0x100000000)),
    ("0x00000000000012340000000100000000", LedgerId(0x1234, 0x100000000)),
    ("0X00000000000012340000000100000000", LedgerId(0x1234, 0x100000000)),
    ("00000000-0000-1234-0000-000100000000", LedgerId(0x1234, 0x100000000)),
    ("0x00000000-0000-1234-0000-000100000000", LedgerId(0x1234, 0x100000000)),
    ("0000000000001234000000010000000A".lower(), LedgerId(0x1234, 0x10000000A)),
    ("0000000000001234000000010000000A", LedgerId(0x1234, 0x10000000A)),
    ("  1234\n", LedgerId(0, 0x1234)),
    ("1234", LedgerId(0, 0x1234)),
    ("0x1", LedgerId(0, 1)),
    ("1" + "0" * 16, LedgerId(1, 0)),
    ("f" * 32, LedgerId(U64, U64)),
    ("0" * 32, LedgerId(0, 0)),
])
def test_qualified_name_parses_prefix_dashes_case_and_short_forms(text: str, expected: LedgerId) -> None:
    got = LedgerId.from_qualified_name(text)
    assert got == expected
    assert type(got) is LedgerId


@pytest.mark.parametrize("text", [
    "", "   ", "0x", "0X", "-", "----", "g", "0xg1", "12 34", "0x0x1", "+1", "1_000", "1.0",
    "f" * 33, "0" * 33, "0x" + "1" * 33, "00000000-0000-1234-0000-0001000000000",
])
def test_qualified_name_rejects_bad_text_with_format_error(text: str) -> None:
    with pytest.raises(FormatError):
        LedgerId.from_qualified_name(text)


@SETTINGS
@given(u64, u64)
def test_qualified_name_round_trips_in_every_accepted_spelling(scope: int, ledger: int) -> None:
    lid = LedgerId(scope, ledger)
    name = lid.qualified_name
    assert re.fullmatch(r"[0-9a-f]{32}", name)
    assert int(name, 16) == lid.value == (scope << 64) | ledger
    assert LedgerId.from_qualified_name(name) == lid
    assert LedgerId.from_qualified_name("0x" + name.upper()) == lid
    assert LedgerId.from_qualified_name(str(uuid.UUID(hex=name))) == lid
    assert LedgerId.from_qualified_name(name.lstrip("0") or "0") == lid


@pytest.mark.parametrize("scope, ledger", [(-1, 0), (0, -1), (1 << 64, 0), (0, 1 << 64)])
def test_ledger_id_of_rejects_values_outside_64_bits(scope: int, ledger: int) -> None:
    with pytest.raises(FormatError):
        LedgerId.of(scope, ledger)


def test_ledger_id_of_accepts_the_full_unsigned_range() -> None:
    assert LedgerId.of(0, 0) == (0, 0)
    assert LedgerId.of(U64, U64) == (U64, U64)


def test_str_is_decimal_for_scope_0_and_the_qualified_name_otherwise() -> None:
    assert str(LedgerId(0, 4294967296)) == "4294967296"
    assert str(LedgerId(0, U64)) == str(U64)
    assert str(LedgerId(1, 0)) == "00000000000000010000000000000000"


def test_signed_and_unsigned_views_of_an_id_convert_both_ways() -> None:
    assert to_signed64(U64) == -1
    assert to_signed64(1 << 63) == -(1 << 63)
    assert to_signed64((1 << 63) - 1) == (1 << 63) - 1
    assert to_unsigned64(-1) == U64
    assert to_unsigned64(-0x1000) == 0xFFFFFFFFFFFFF000


# --- ledger ids: UUID split ----------------------------------------------------------------------

def test_uuid_msb_is_the_scope_and_lsb_the_ledger() -> None:
    lid = LedgerId.from_uuid("01234567-89ab-cdef-fedc-ba9876543210")
    assert lid == LedgerId(0x0123456789ABCDEF, 0xFEDCBA9876543210)
    assert LedgerId.from_uuid(uuid.UUID("01234567-89ab-cdef-fedc-ba9876543210")) == lid


def test_scope_0_uuid_is_the_etcd_ledger_key_form() -> None:
    assert str(LedgerId(0, 0x1234).to_uuid()) == "00000000-0000-0000-0000-000000001234"
    assert LedgerId.from_uuid("00000000-0000-0000-0000-000000001234") == LedgerId(0, 0x1234)


@pytest.mark.parametrize("text", ["", "not-a-uuid", "0123456789abcdef", "01234567-89ab-cdef-fedc-ba987654321g"])
def test_from_uuid_rejects_non_uuid_text_with_format_error(text: str) -> None:
    with pytest.raises(FormatError):
        LedgerId.from_uuid(text)


@SETTINGS
@given(u64, u64)
def test_uuid_split_round_trips(scope: int, ledger: int) -> None:
    lid = LedgerId(scope, ledger)
    u = lid.to_uuid()
    assert u.int >> 64 == scope and u.int & U64 == ledger
    assert LedgerId.from_uuid(u) == lid
    assert LedgerId.from_uuid(str(u)) == lid
    assert u.hex == lid.qualified_name


# --- index paths: BookKeeper's 2-level rule (scope 0) --------------------------------------------

def java_get_ledger_name(ledger_id: int) -> str:
    """IndexPersistenceMgr.getLedgerName evaluated on a Java long, written independently of formats.paths."""
    id_ = to_signed64(ledger_id)                  # the Java long
    d1 = (id_ & 0xFF00) >> 8                      # Integer.toHexString of these two
    d2 = id_ & 0xFF
    long_hex = format(id_ & U64, "x")             # Long.toHexString: two's complement, no padding
    return f"{d1:x}/{d2:x}/{long_hex}.idx"


@pytest.mark.parametrize("ledger, path", [
    (0, "0/0/0.idx"),
    (255, "0/ff/ff.idx"),
    (256, "1/0/100.idx"),
    (0x1234, "12/34/1234.idx"),
    (0x100000000, "0/0/100000000.idx"),
])
def test_scope_0_index_path_matches_the_fact_sheet_examples(ledger: int, path: str) -> None:
    assert index_relpath(LedgerId(0, ledger)) == path
    assert java_get_ledger_name(ledger) == path


@SETTINGS
@given(u64)
def test_scope_0_index_path_is_indexpersistencemgr_rule_for_every_64_bit_id(ledger: int) -> None:
    lid = LedgerId(0, ledger)
    rel = index_relpath(lid)
    assert rel == java_get_ledger_name(ledger)
    assert rel.count("/") == 2
    assert parse_index_name(rel.rsplit("/", 1)[1]) == lid


@SETTINGS
@given(st.lists(st.tuples(st.one_of(st.just(0), u64), u64), max_size=20))
def test_index_relpaths_of_many_ledgers_is_index_relpath_of_each(ids: list[tuple[int, int]]) -> None:
    assert index_relpaths([s for s, _ in ids], [l for _, l in ids]) == [index_relpath(LedgerId(s, l)) for s, l in ids]


def test_golden_idx_files_sit_where_the_2_level_rule_puts_them() -> None:
    found = 0
    for dirpath, _dirs, files in os.walk(GOLDEN):
        for name in files:
            if not name.endswith(".idx"):
                continue
            full = Path(dirpath) / name
            parts = full.parts
            current = len(parts) - 1 - parts[::-1].index("current")
            rel = "/".join(parts[current + 1:])
            lid = parse_index_name(name)
            assert lid is not None and lid.scope == 0, rel
            assert index_relpath(lid) == rel
            found += 1
    assert found >= 20, f"expected the golden .idx files, found {found}"


# --- index paths: bkdisk's 4-level rule (scope != 0) ---------------------------------------------

@pytest.mark.parametrize("scope, ledger, path", [
    (1, 0, "0/1/0/0/00000000000000010000000000000000.idx"),
    (0x1234, 0x100000000, "12/34/0/0/00000000000012340000000100000000.idx"),
    (0x0123456789ABCDEF, 0xFEDCBA9876543210, "cd/ef/32/10/0123456789abcdeffedcba9876543210.idx"),
    (U64, U64, "ff/ff/ff/ff/ffffffffffffffffffffffffffffffff.idx"),
])
def test_scoped_index_path_matches_the_paths_page_examples(scope: int, ledger: int, path: str) -> None:
    assert index_relpath(LedgerId(scope, ledger)) == path


@SETTINGS
@given(nonzero_u64, u64)
def test_scoped_index_path_has_four_one_byte_levels_and_the_qualified_file_name(scope: int, ledger: int) -> None:
    lid = LedgerId(scope, ledger)
    *levels, name = index_relpath(lid).split("/")
    assert len(levels) == 4
    for level in levels:
        assert re.fullmatch(r"[0-9a-f]{1,2}", level)
        assert level == format(int(level, 16), "x")      # lowercase, unpadded
        assert 0 <= int(level, 16) <= 0xFF              # fan-out <= 256 per level
    assert [int(x, 16) for x in levels] == [(scope >> 8) & 0xFF, scope & 0xFF, (ledger >> 8) & 0xFF, ledger & 0xFF]
    assert name == lid.qualified_name + ".idx"
    assert parse_index_name(name) == lid


def test_scoped_index_tree_has_at_most_256_names_per_level() -> None:
    # Scopes and ledgers that differ in every low-16-bit combination reach every directory name.
    seen: list[set[str]] = [set(), set(), set(), set()]
    for v in range(0x10000):
        for i, level in enumerate(index_relpath(LedgerId(v | 0x10000, v * 7)).split("/")[:4]):
            seen[i].add(level)
    assert [len(s) for s in seen] == [256, 256, 256, 256]


@SETTINGS
@given(nonzero_u64, u64, u64)
def test_scoped_and_scope_0_index_files_never_share_a_name_or_a_depth(scope: int, ledger: int, plain: int) -> None:
    scoped = index_relpath(LedgerId(scope, ledger))
    flat = index_relpath(LedgerId(0, plain))
    assert scoped.count("/") == 4 and flat.count("/") == 2
    scoped_name, flat_name = scoped.rsplit("/", 1)[1], flat.rsplit("/", 1)[1]
    assert len(scoped_name) == 32 + 4 and len(flat_name) <= 16 + 4
    assert parse_index_name(scoped_name).scope == scope
    assert parse_index_name(flat_name).scope == 0


@pytest.mark.parametrize("name", [
    "1234", "1234.id", "1234.idx.rloc", "1234.IDX", "0x12.idx", ".idx", "12 3.idx", "-1.idx", "+1.idx",
    "1_0.idx", "g.idx", "١٢.idx",                       # sign, underscore, non-hex, non-ASCII digits
    "1" + "0" * 16 + ".idx",                            # 2^64: past 64 bits
    "1" * 17 + ".idx",                                  # 17 significant digits, not 32: too large
    "1" * 33 + ".idx",
    "0" * 16 + "1" * 17 + ".idx",                       # 33 digits: not a qualified name, value too large
])
def test_parse_index_name_rejects_names_that_are_not_hex_ids_below_2_64(name: str) -> None:
    assert parse_index_name(name) is None


def test_parse_index_name_reads_bookkeeper_names() -> None:
    assert parse_index_name("0.idx") == LedgerId(0, 0)
    assert parse_index_name("ff.idx") == LedgerId(0, 255)
    assert parse_index_name("100000000.idx") == LedgerId(0, 0x100000000)
    assert parse_index_name("7ffffffffffffffe.idx") == LedgerId(0, 0x7FFFFFFFFFFFFFFE)
    assert parse_index_name("ffffffffffffffff.idx") == LedgerId(0, U64)


@pytest.mark.parametrize("name, lid", [
    ("00ff.idx", LedgerId(0, 0xFF)),                    # Long.parseLong("00ff", 16): leading zeros
    ("ABC.idx", LedgerId(0, 0xABC)),                    # upper case
    ("07b.idx", LedgerId(0, 0x7B)),
    ("FFFFFFFFFFFFFFFF.idx", LedgerId(0, U64)),
    ("0" * 20 + "1234.idx", LedgerId(0, 0x1234)),       # 24 digits, 4 significant
    ("0" * 32 + ".idx", LedgerId(0, 0)),                # 32 digits with scope 0: a scope-0 name with zeros
    ("0" * 16 + "0000000000001234.idx", LedgerId(0, 0x1234)),
    ("0" * 40 + "ffffffffffffffff.idx", LedgerId(0, U64)),
    ("0000000000ABCDEF0000000000000001.idx", LedgerId(0xABCDEF, 1)),   # upper-case qualified name
    ("0000000000abcdef0000000000000001.idx", LedgerId(0xABCDEF, 1)),
])
def test_parse_index_name_reads_any_hex_spelling_as_long_parselong_does(name: str, lid: LedgerId) -> None:
    got = parse_index_name(name)
    assert got == lid and type(got) is LedgerId
    if name[:-4] != format(lid.ledger, "x") and lid.scope == 0:
        assert index_relpath(got).rsplit("/", 1)[1] != name   # fsck then reports it as misplaced


# --- journal and entry-log names -----------------------------------------------------------------

def test_journal_and_entry_log_names_are_written_unpadded_lowercase_hex() -> None:
    assert journal_name(0x1A20071929B) == "1a20071929b.txn"
    assert parse_journal_name("1a20071929b.txn") == 0x1A20071929B
    assert entry_log_name(0) == "0.log"
    assert entry_log_name(0xAB) == "ab.log"
    assert parse_entry_log_name("ab.log") == 0xAB
    for bad in ("ab.log.compacting", "0.log.1.compacted", "x.log", ".log", "ab.txn", "0xab.log", "-1.log",
                "+1.log", "a b.log", "1" + "0" * 16 + ".log"):
        assert parse_entry_log_name(bad) is None, bad
    assert parse_journal_name("1a20071929b.log") is None


@pytest.mark.parametrize("name, value", [
    ("01a2.txn", 0x1A2), ("1A2.txn", 0x1A2), ("0000.txn", 0), ("7FFFFFFFFFFFFFFF.txn", (1 << 63) - 1),
    ("0" * 30 + "1a2.txn", 0x1A2),
])
def test_journal_and_entry_log_names_parse_as_long_parselong_reads_them(name: str, value: int) -> None:
    assert parse_journal_name(name) == value and journal_name_refused(name) is None
    log = name[:-4] + ".log"
    assert parse_entry_log_name(log) == value


@pytest.mark.parametrize("name, refused", [
    ("8000000000000000.txn", "past the largest journal id 7fffffffffffffff"),
    ("ffffffffffffffffff.txn", "past the largest"), ("FFFFFFFFFFFFFFFF.txn", "past the largest"),
    ("x.txn", "not a hex number"), (".txn", "not a hex number"), ("-.txn", "not a hex number"),
    ("0x1a.txn", "not a hex number"), ("1_0.txn", "not a hex number"), ("1a2.bak.txn", None),
    ("-1.txn", None), ("+1a.txn", None), ("-8000000000000000.txn", None), ("1a2.txn.bak", None),
])
def test_journal_names_java_refuses_are_named_and_are_no_journal(name: str, refused: str | None) -> None:
    # Long.parseLong(text before the first '.', 16): a sign is allowed, the value is a signed long.
    got = journal_name_refused(name)
    assert (got is None) if refused is None else (refused in got), got
    if refused is not None:
        assert parse_journal_name(name) is None
    assert parse_entry_log_name("00ab.log") == parse_entry_log_name("AB.log") == 0xAB


def test_golden_journal_and_entry_log_names_parse() -> None:
    # Journals and entry logs lie directly in current/; RocksDB's own *.log files lie deeper.
    files = [p for p in GOLDEN.rglob("*") if p.suffix in (".txn", ".log") and p.parent.name == "current"]
    names = [p.name for p in files]
    assert len([n for n in names if n.endswith(".txn")]) >= 9 and len([n for n in names if n.endswith(".log")]) >= 30
    for n in names:
        v = parse_journal_name(n) if n.endswith(".txn") else parse_entry_log_name(n)
        assert v is not None, n
        assert (journal_name(v) if n.endswith(".txn") else entry_log_name(v)) == n


# --- bookie ids ----------------------------------------------------------------------------------

VALID_IDS = ["bookie-1.rack-a", "127.0.0.1:3181", "a;b", "a@b", "x[1]", "a_b", "a\\b", "<=>?^", "Z", "0",
             "readonly1", "xreadonly", "read-only", "a" * 10_000]
INVALID_IDS = ["", "readonly", "ReadOnly", "READONLY", "a b", "a$b", "a/b", "a+b", "a,b", "é", "a\n", "\na",
               "a\tb", "a!b", "a#b", "a%b", "a&b", "a*b", "a(b)", "a{b}", "a|b", "a~b", "a'b", 'a"b', "`",
               "bookie-１"]


@pytest.mark.parametrize("text", VALID_IDS)
def test_bookie_id_accepts_what_javas_regex_accepts(text: str) -> None:
    assert validate_bookie_id(text) == text
    assert BookieId(text) == text


@pytest.mark.parametrize("text", INVALID_IDS)
def test_bookie_id_rejects_what_java_rejects(text: str) -> None:
    with pytest.raises(FormatError):
        validate_bookie_id(text)
    with pytest.raises(FormatError):
        BookieId(text)


def test_bookie_id_alphabet_is_the_java_class_with_the_colon_to_underscore_range() -> None:
    # [a-zA-Z0-9:-_.\-] in Java: letters, digits, '.', '-', and the range ':' (0x3A) .. '_' (0x5F).
    allowed = set(string.ascii_letters + string.digits + ".-") | {chr(c) for c in range(0x3A, 0x60)}
    for code in range(0, 0x300):
        c = chr(code)
        text = f"a{c}b"
        if c in allowed:
            assert validate_bookie_id(text) == text, repr(c)
        else:
            with pytest.raises(FormatError):
                validate_bookie_id(text)


def test_every_letter_case_of_readonly_is_reserved() -> None:
    for letters in itertools.product(*[(ch, ch.upper()) for ch in "readonly"]):
        with pytest.raises(FormatError):
            validate_bookie_id("".join(letters))


def test_validate_bookie_id_rejects_non_strings() -> None:
    for bad in (None, 3181, b"bookie-1"):
        with pytest.raises(FormatError):
            validate_bookie_id(bad)  # type: ignore[arg-type]


def test_strict_bp41_alphabet_is_letters_digits_colon_dash_dot() -> None:
    assert is_strict_bp41("bookie-1.rack-a")
    assert is_strict_bp41("127.0.0.1:3181")
    for text in ("a_b", "a;b", "a@b", "x[1]"):
        assert validate_bookie_id(text) == text
        assert not is_strict_bp41(text)


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:3181", HostPort("127.0.0.1", 3181)),
    ("192.168.100.7:3182", HostPort("192.168.100.7", 3182)),
    ("bookie.example.com:3181", HostPort("bookie.example.com", 3181)),
    ("host:0", HostPort("host", 0)),
    ("host:65535", HostPort("host", 65535)),
    ("bookie-1.rack-a", None),
    ("bk-1.rack-a", None),
    ("host:65536", None),
    ("host:70000", None),
    ("host:", None),
    (":3181", None),
    ("a:1:2", None),
    ("host:port", None),
    ("host:-1", None),
    ("host:+1", None),
    ("host:3181 ", None),
])
def test_legacy_address_parses_only_host_colon_decimal_port(text: str, expected: HostPort | None) -> None:
    assert legacy_address(text) == expected


def test_bookie_id_knows_whether_it_is_legacy() -> None:
    legacy = BookieId("127.0.0.1:3181")
    assert legacy.is_legacy and legacy.address == HostPort("127.0.0.1", 3181)
    custom = BookieId("bookie-1.rack-a")
    assert not custom.is_legacy and custom.address is None
    assert hash(custom) == hash("bookie-1.rack-a") and custom == "bookie-1.rack-a"


def test_legacy_address_returns_none_for_a_port_of_non_decimal_digit_characters() -> None:
    assert legacy_address("host:³") is None
    assert legacy_address("host:٣١٨١") is None


# --- bookie ids in the golden corpora ------------------------------------------------------------

_ID_KEYS = {"bookie_id", "bookies", "write_set", "explicit_lac_sent_to", "fenced_on"}
_ENSEMBLE_TEXT = re.compile(r"\[([^\]]*)\]")
_BOOKIE_HOST = re.compile(r'^bookieHost: "([^"]*)"$', re.M)


def _ids_in(node: object, key: str | None = None) -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("ensemble", "ensembles") and isinstance(v, str):   # Java toString of an ensemble (map)
                for group in _ENSEMBLE_TEXT.findall(v):
                    out += [x.strip() for x in group.split(",") if x.strip()]
            elif k in ("cookie_text", "on_disk_cookie_text") and isinstance(v, str):
                out += _BOOKIE_HOST.findall(v)
            else:
                out += _ids_in(v, k)
    elif isinstance(node, list):
        for v in node:
            out += _ids_in(v, key)
    elif isinstance(node, str) and key in _ID_KEYS:
        out.append(node)
    return out


def golden_bookie_ids() -> dict[str, set[str]]:
    """Every bookie id named in a golden manifest or cookie file, with where it was found."""
    found: dict[str, set[str]] = {}
    for manifest in sorted(GOLDEN.rglob("manifest.json")):
        for bid in _ids_in(json.loads(manifest.read_text(encoding="utf-8"))):
            found.setdefault(bid, set()).add(str(manifest.relative_to(GOLDEN)))
    for cookie in sorted(GOLDEN.rglob("VERSION*")):
        for bid in _BOOKIE_HOST.findall(cookie.read_text(encoding="utf-8")):
            found.setdefault(bid, set()).add(str(cookie.relative_to(GOLDEN)))
    return found


def test_every_bookie_id_in_the_golden_corpora_validates() -> None:
    ids = golden_bookie_ids()
    expected_some = {"127.0.0.1:3181", "192.168.100.7:3182", "bookie-1.rack-a", "bookie-db-1.zone-a",
                     "bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b", "10.0.1.1:3181"}
    assert expected_some <= set(ids), sorted(ids)
    for bid, where in ids.items():
        assert validate_bookie_id(bid) == bid, where


def test_golden_bookie_id_form_matches_legacy_address() -> None:
    checked = 0
    for manifest in sorted(GOLDEN.rglob("manifest.json")):
        m = json.loads(manifest.read_text(encoding="utf-8"))
        if "bookie_id_form" not in m:
            continue
        address = legacy_address(m["bookie_id"])
        if m["bookie_id_form"].startswith("legacy"):
            assert address is not None and f"{address.host}:{address.port}" == m["bookie_id"], manifest
        else:
            assert address is None, manifest
        checked += 1
    assert checked >= 7
