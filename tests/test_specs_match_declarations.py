"""The byte tables in specs/*.md agree with the construct declarations in formats/.

A table is machine-checked when the line before it (blank lines aside) is
``<!-- layout: formats.<module>.<NAME>[.<field>] [key=int ...] -->`` and its header is
``| Offset | Size | Field | Type | Meaning |``. specs/README.md states the convention; this file
enforces it, so a page cannot drift from the declaration it mirrors.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import construct as cs
import pytest

from bkdisk.formats.codec import field_layout

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
FORMATS = ROOT / "formats"

TABLE_HEADER = ["Offset", "Size", "Field", "Type", "Meaning"]
PADDING_ROW = "(padding)"  # the one row name that is not a construct field: a Padded's zero fill

# Declarations each spec must mirror by name; every other declaration a spec cites is covered by the "all" test below.
REQUIRED = [
    "formats.entry.ENTRY_V1_HEADER",
    "formats.entry.ENTRY_V2_HEADER",
    "formats.journal.JOURNAL_VERSION_HEADER",
    "formats.journal.PADDING_RECORD",
    "formats.journal.LEDGER_KEY_BODY",
    "formats.journal.FENCE_BODY",
    "formats.journal.EXPLICIT_LAC_BODY",
    "formats.journal.LAC_BODY",
    "formats.journal.SCOPED_PREFIX",
    "formats.entrylog.ENTRY_LOG_HEADER_FIELDS",
    "formats.entrylog.LEDGERS_MAP_BATCH",
    "formats.entrylog.SCOPED_LEDGERS_MAP_BATCH",
    "formats.index.INDEX_HEADER_FIELDS",
    "formats.lastmark.LAST_MARK",
]

_COMMENT = re.compile(r"^<!--\s*layout:\s*(?P<target>[A-Za-z_][\w.]*)"
                      r"(?P<ctx>(?:\s+\w+=-?(?:0x[0-9a-fA-F]+|\d+))*)\s*-->\s*$")
_INT = re.compile(r"^-?\d+$")
_PATH_LAST = re.compile(r"\['(\w+)'\]\s*$")
_INT_TYPES = {"B": "u1", "b": "s1", "H": "u2", "h": "s2", "I": "u4", "i": "s4", "L": "u4", "l": "s4",
              "Q": "u8", "q": "s8"}


# --- reading the pages -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    offset: str
    size: str
    field: str
    type: str
    line: int


@dataclass(frozen=True)
class LayoutTable:
    page: str
    line: int          # 1-based line of the layout comment
    target: str        # dotted name of the declaration
    context: dict[str, int]
    rows: tuple[Row, ...] | None  # None: no table follows the comment
    problem: str | None = None

    @property
    def id(self) -> str:
        ctx = "".join(f" {k}={v}" for k, v in self.context.items())
        return f"{self.page}:{self.line}:{self.target}{ctx}"


def split_cells(line: str) -> list[str]:
    """Cells of a Markdown table line; ``\\|`` is a literal bar inside a cell."""
    s = line.strip()
    if not (s.startswith("|") and s.endswith("|")):
        raise ValueError(f"not a table line: {line!r}")
    cells, cur, i = [], [], 1
    while i < len(s) - 1:
        if s[i] == "\\" and s[i + 1] == "|":
            cur.append("|")
            i += 2
            continue
        if s[i] == "|":
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(s[i])
        i += 1
    cells.append("".join(cur).strip())
    return cells


def _plain(cell: str) -> str:
    return cell.strip().strip("`").strip()


def _outside_code_fences(lines: list[str]) -> list[str]:
    """The page's lines with those inside ``` fences blanked, so examples of the convention are inert."""
    out, fenced = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def parse_page(path: Path) -> tuple[list[LayoutTable], list[str]]:
    """The layout tables of one page, and convention violations found outside them."""
    lines = _outside_code_fences(path.read_text(encoding="utf-8").splitlines())
    tables: list[LayoutTable] = []
    problems: list[str] = []
    claimed_headers: set[int] = set()
    for i, line in enumerate(lines):
        if "<!--" in line and "layout" in line:
            m = _COMMENT.match(line.strip())
            if m is None:
                problems.append(f"{path.name}:{i + 1}: malformed layout comment {line.strip()!r}")
                continue
            ctx = {k: int(v, 0) for k, v in (kv.split("=") for kv in m["ctx"].split())}
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j >= len(lines) or not lines[j].lstrip().startswith("|"):
                tables.append(LayoutTable(path.name, i + 1, m["target"], ctx, None, "no table after the comment"))
                continue
            header = split_cells(lines[j])
            if header != TABLE_HEADER:
                tables.append(LayoutTable(path.name, i + 1, m["target"], ctx, None,
                                          f"table header {header} is not {TABLE_HEADER}"))
                continue
            claimed_headers.add(j)
            sep = split_cells(lines[j + 1]) if j + 1 < len(lines) and lines[j + 1].lstrip().startswith("|") else []
            if len(sep) != 5 or not all(re.fullmatch(r":?-{3,}:?", c) for c in sep):
                tables.append(LayoutTable(path.name, i + 1, m["target"], ctx, None, "no |---| separator line"))
                continue
            rows = []
            k = j + 2
            while k < len(lines) and lines[k].lstrip().startswith("|"):
                cells = split_cells(lines[k])
                if len(cells) != 5:
                    problems.append(f"{path.name}:{k + 1}: a layout row needs 5 cells, has {len(cells)}")
                else:
                    rows.append(Row(_plain(cells[0]), _plain(cells[1]), _plain(cells[2]), cells[3], k + 1))
                k += 1
            tables.append(LayoutTable(path.name, i + 1, m["target"], ctx, tuple(rows)))
    for j, line in enumerate(lines):
        if line.lstrip().startswith("|") and j not in claimed_headers:
            try:
                if split_cells(line) == TABLE_HEADER:
                    problems.append(f"{path.name}:{j + 1}: a table with the layout header has no layout comment")
            except ValueError:
                pass
    return tables, problems


def spec_pages() -> list[Path]:
    return sorted(SPECS.glob("*.md"))


def all_tables() -> list[LayoutTable]:
    out: list[LayoutTable] = []
    for p in spec_pages():
        out.extend(parse_page(p)[0])
    return out


TABLES = all_tables()


# --- reading the declarations ----------------------------------------------------------------------

def resolve(target: str) -> Any:
    """Import ``formats.<module>.<NAME>[.<field>...]``; a field is a Struct member, unwrapped to a Struct."""
    parts = target.split(".")
    if parts[0] != "formats" or len(parts) < 3:
        raise LookupError(f"{target!r} is not formats.<module>.<NAME>")
    module = importlib.import_module("bkdisk." + ".".join(parts[:2]))   # installed as bkdisk.formats
    obj: Any = module
    for name in parts[2:]:
        if isinstance(obj, cs.Construct):
            obj = _unwrap_to_struct(obj)
            if not isinstance(obj, cs.Struct) or name not in obj._subcons:
                raise LookupError(f"{target!r}: no field {name!r}")
            obj = obj._subcons[name]
        else:
            if not hasattr(obj, name):
                raise LookupError(f"{target!r}: {obj.__name__} has no {name!r}")
            obj = getattr(obj, name)
    if not isinstance(obj, cs.Construct):
        raise LookupError(f"{target!r} is a {type(obj).__name__}, not a construct declaration")
    return _unwrap_to_struct(obj)


def _unwrap_to_struct(obj: cs.Construct) -> cs.Construct:
    while isinstance(obj, (cs.Renamed, cs.Array)):
        obj = obj.subcon
    return obj


def _type_token(sc: cs.Construct) -> str:
    while isinstance(sc, (cs.Renamed, cs.Const)):
        sc = sc.subcon
    if isinstance(sc, cs.FormatField):
        return _INT_TYPES[sc.fmtstr[-1]]
    if isinstance(sc, cs.Bytes) or sc is cs.GreedyBytes:
        return "bytes"
    if isinstance(sc, (type(cs.VarInt), type(cs.ZigZag))):   # LEB128 (RocksDB): its size depends on the value
        return "varint"
    if isinstance(sc, cs.Array):
        return "array"
    if isinstance(sc, cs.Struct):
        return "struct"
    raise NotImplementedError(f"no Type token for {sc!r}; teach tests/test_specs_match_declarations.py")


def _length_ref(sc: cs.Construct) -> str | None:
    """The context field a data-dependent Bytes/Array takes its length from, when it names one."""
    while isinstance(sc, (cs.Renamed, cs.Const)):
        sc = sc.subcon
    expr = getattr(sc, "length", None) if isinstance(sc, cs.Bytes) else getattr(sc, "count", None)
    if expr is None or not isinstance(expr, cs.expr.ExprMixin):
        return None
    m = _PATH_LAST.search(str(expr))
    return m.group(1) if m else None


@dataclass(frozen=True)
class Field:
    name: str
    offset: int | None   # None once an earlier field's size depends on the data
    size: int | None     # None when this field's size depends on the data
    type: str
    length_ref: str | None


def _present(sc: cs.Construct, context: dict[str, int]) -> cs.Construct | None:
    """The subcon that is on disk under ``context``: an If's then-branch, or None when it is absent."""
    inner = sc.subcon if isinstance(sc, cs.Renamed) else sc
    if isinstance(inner, cs.IfThenElse):
        ctx = cs.Container(**context)
        ctx._params = cs.Container(**context)
        try:
            cond = cs.core.evaluate(inner.condfunc, ctx)
        except (KeyError, AttributeError) as e:
            raise LookupError(f"field {sc.name!r} is conditional; give its context in the layout comment "
                              f"(missing {e})") from None
        branch = inner.thensubcon if cond else inner.elsesubcon
        return None if isinstance(branch, type(cs.Pass)) else branch
    return inner


def _size(sc: cs.Construct, context: dict[str, int]) -> int | None:
    try:
        return sc.sizeof(**context)
    except cs.SizeofError:
        return None


def declared_fields(obj: cs.Construct, context: dict[str, int]) -> list[Field]:
    """Every on-disk field of a Struct (or a Padded Struct) under ``context``, in order.

    Offsets come from formats.codec.field_layout for the fixed prefix (up to and including the first
    data-dependent field); this function adds what field_layout leaves out: the names, types and own
    sizes of the fields after that point, If branches that are absent, and a Padded's zero fill.
    """
    padded_to = None
    if isinstance(obj, cs.Padded):
        padded_to, obj = obj.length, obj.subcon
    if not isinstance(obj, cs.Struct):
        raise LookupError(f"{obj!r} is not a Struct or a Padded Struct")

    prefix = field_layout(obj, **context)
    fields: list[Field] = []
    pos: int | None = 0
    for sc in obj.subcons:
        if sc.name is None:
            if not isinstance(sc, cs.Check):
                raise NotImplementedError(f"unnamed {sc!r} in a declaration; teach the spec checker")
            continue
        present = _present(sc, context)
        if present is None:
            continue
        size = _size(present, context)
        fields.append(Field(sc.name, pos, size, _type_token(present), _length_ref(present)))
        pos = None if (pos is None or size is None) else pos + size

    # Cross-check against formats.codec.field_layout: it must agree on the fixed prefix.
    expect = [(f.name, f.offset, -1 if f.size is None else f.size) for f in fields][:len(prefix)]
    got = [row for row in prefix if not (row[2] == 0 and row[0] not in {f.name for f in fields})]
    assert got == expect[:len(got)], f"field_layout {prefix} disagrees with the walk {expect}"

    if padded_to is not None:
        fill = None if pos is None else padded_to - pos
        fields.append(Field(PADDING_ROW, pos, fill, "bytes", None))
    return fields


# --- the checks ------------------------------------------------------------------------------------

def check_table(table: LayoutTable) -> list[str]:
    """Differences between one page table and its declaration (empty when they agree)."""
    where = table.id
    if table.problem:
        return [f"{where}: {table.problem}"]
    obj = resolve(table.target)
    fields = declared_fields(obj, table.context)
    rows = list(table.rows or ())
    errors: list[str] = []
    if not rows:
        return [f"{where}: the table has no rows"]
    names_page = [r.field for r in rows]
    names_decl = [f.name for f in fields]
    if names_page != names_decl:
        return [f"{where}: fields {names_page} != declaration {names_decl}"]
    fixed = True  # offsets are absolute until the first data-dependent field has been passed
    for r, f in zip(rows, fields):
        at = f"{where}: line {r.line} {r.field}"
        if fixed:
            if not _INT.match(r.offset) or int(r.offset) != f.offset:
                errors.append(f"{at}: offset {r.offset!r} != {f.offset}")
        if f.size is not None:
            if not _INT.match(r.size) or int(r.size) != f.size:
                errors.append(f"{at}: size {r.size!r} != {f.size}")
        else:
            if _INT.match(r.size):
                errors.append(f"{at}: size {r.size!r} is a number, but the field's size depends on the data")
            if f.length_ref and not re.search(rf"\b{re.escape(f.length_ref)}\b", r.size):
                errors.append(f"{at}: size {r.size!r} does not name its length field {f.length_ref!r}")
            fixed = False
        token = _plain(r.type.split()[0]) if r.type.split() else ""
        if token != f.type:
            errors.append(f"{at}: type {r.type!r} should start with `{f.type}`")
    return errors


def test_specs_have_layout_tables() -> None:
    assert spec_pages(), "no specs/*.md pages"
    assert len(TABLES) >= len(REQUIRED), f"only {len(TABLES)} layout tables in specs/"


@pytest.mark.parametrize("table", TABLES, ids=[t.id for t in TABLES])
def test_layout_table_matches_declaration(table: LayoutTable) -> None:
    assert check_table(table) == []


@pytest.mark.parametrize("page", spec_pages(), ids=[p.name for p in spec_pages()])
def test_page_follows_the_table_convention(page: Path) -> None:
    assert parse_page(page)[1] == []


@pytest.mark.parametrize("target", REQUIRED)
def test_required_declaration_has_a_layout_table(target: str) -> None:
    assert any(t.target == target for t in TABLES), f"no specs page mirrors {target}"


def _top_level_declarations() -> dict[str, cs.Construct]:
    out: dict[str, cs.Construct] = {}
    for path in sorted(FORMATS.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        module = importlib.import_module(f"bkdisk.formats.{path.stem}")
        for name, obj in vars(module).items():
            if name.isupper() and isinstance(obj, (cs.Struct, cs.Padded)):
                out[f"formats.{path.stem}.{name}"] = obj
    return out


def test_every_module_with_a_struct_declaration_is_referenced_by_a_page() -> None:
    modules = {name.rsplit(".", 1)[0] for name in _top_level_declarations()}
    referenced = {".".join(t.target.split(".")[:2]) for t in TABLES}
    assert modules, "found no construct declarations in formats/"
    assert sorted(modules - referenced) == []


def test_every_struct_declaration_is_mirrored_by_a_table() -> None:
    """Each top-level Struct has a table; a Padded counts when its inner Struct (or itself) has one."""
    decls = _top_level_declarations()
    mirrored = {id(resolve(t.target)) for t in TABLES if t.problem is None}
    missing = []
    for name, obj in decls.items():
        inner = obj.subcon if isinstance(obj, cs.Padded) else obj
        if id(obj) not in mirrored and id(inner) not in mirrored:
            missing.append(name)
    assert missing == []


# --- the checker itself must be able to fail -------------------------------------------------------

def _check_text(tmp_path: Path, text: str) -> list[str]:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    tables, problems = parse_page(page)
    errors = list(problems)
    for t in tables:
        try:
            errors += check_table(t)
        except (LookupError, ImportError) as e:
            errors.append(str(e))
    return errors


_GOOD = """<!-- layout: formats.lastmark.LAST_MARK -->
| Offset | Size | Field | Type | Meaning |
|---|---|---|---|---|
| 0 | 8 | `log_id` | `s8` | journal id |
| 8 | 8 | `offset` | `s8` | byte offset |
"""


def test_checker_accepts_a_correct_table(tmp_path: Path) -> None:
    assert _check_text(tmp_path, _GOOD) == []


@pytest.mark.parametrize("broken, why", [
    (_GOOD.replace("| 8 | 8 | `offset`", "| 9 | 8 | `offset`"), "offset"),
    (_GOOD.replace("| 0 | 8 | `log_id`", "| 0 | 4 | `log_id`"), "size"),
    (_GOOD.replace("`log_id`", "`journal_id`"), "fields"),
    (_GOOD.replace("| 0 | 8 | `log_id` | `s8`", "| 0 | 8 | `log_id` | `u8`"), "type"),
    (_GOOD.replace("| 8 | 8 | `offset` | `s8` | byte offset |\n", ""), "fields"),
    (_GOOD.replace("LAST_MARK", "NO_SUCH_DECLARATION"), "no"),
    (_GOOD.replace("formats.lastmark", "formats.no_such_module"), "No module"),
    (_GOOD.split("| Offset")[0] + "\nText, not a table.\n", "no table"),
    (_GOOD.replace("| Offset | Size |", "| Off | Size |"), "header"),
    ("<!-- layout: formats.index.INDEX_HEADER_FIELDS -->\n"
     "| Offset | Size | Field | Type | Meaning |\n|---|---|---|---|---|\n"
     "| 0 | 4 | magic | bytes | |\n", "context"),
    (_GOOD.replace("<!-- layout: formats.lastmark.LAST_MARK -->\n", ""), "no layout comment"),
    (_GOOD.replace("layout: formats", "layout formats"), "malformed"),
])
def test_checker_rejects_a_wrong_table(tmp_path: Path, broken: str, why: str) -> None:
    errors = _check_text(tmp_path, broken)
    assert errors, f"the checker accepted a table with a wrong {why}"
    assert any(why.lower() in e.lower() for e in errors), errors


def test_checker_checks_rows_after_a_data_dependent_field(tmp_path: Path) -> None:
    head = ("<!-- layout: formats.index.INDEX_HEADER_FIELDS version=1 -->\n"
            "| Offset | Size | Field | Type | Meaning |\n|---|---|---|---|---|\n"
            "| 0 | 4 | magic | bytes | |\n| 4 | 4 | version | s4 | |\n| 8 | 4 | master_key_length | s4 | |\n")
    good = head + ("| 12 | master_key_length | master_key | bytes | |\n| 12+L | 4 | state_bits | u4 | |\n"
                   "| 16+L | 4 | explicit_lac_length | s4 | |\n"
                   "| 20+L | explicit_lac_length | explicit_lac | bytes | |\n")
    assert _check_text(tmp_path, good) == []
    assert _check_text(tmp_path, good.replace("| 12 | master_key_length |", "| 12 | 20 |"))
    assert _check_text(tmp_path, good.replace("| 12 | master_key_length |", "| 12 | L |"))
    assert _check_text(tmp_path, good.replace("| 12+L | 4 | state_bits", "| 12+L | 8 | state_bits"))
    swapped = good.replace("explicit_lac_length | s4", "XX").replace("state_bits | u4", "explicit_lac_length | s4")
    assert _check_text(tmp_path, swapped.replace("XX", "state_bits | u4"))
    v0 = good.replace("version=1", "version=0")
    assert _check_text(tmp_path, v0), "a V0 table must not list the V1-only fields"


# --- the constants the jitted kernels read are the spec tables' offsets and sizes ------------------
def _table_offsets(target: str) -> dict[str, int]:
    """Field -> offset of the (first) spec table mirroring ``target``, for rows at a plain offset."""
    table = next(t for t in TABLES if t.target == target and t.rows)
    return {r.field: int(r.offset) for r in table.rows if _INT.match(r.offset)}


def _table_sizes(target: str) -> dict[str, int]:
    table = next(t for t in TABLES if t.target == target and t.rows)
    return {r.field: int(r.size) for r in table.rows if _INT.match(r.size)}


def test_entry_log_constants_are_the_values_the_spec_states() -> None:
    from bkdisk.formats import entrylog as fel
    rows = dict(re.findall(r"^\| `(\w+)` \| (0x[0-9A-Fa-f]+|\d+)\b", (SPECS / "entrylog.md").read_text(), re.M))
    for name in ("MAX_ENTRY_SIZE", "DIRECT_ALIGNMENT", "DIRECT_PADDING_BYTE", "MIN_SANE_ENTRY_SIZE"):
        assert int(rows[name], 0) == getattr(fel, name), name


def test_kernel_constants_are_the_offsets_of_the_spec_tables() -> None:
    from bkdisk.digests import kernels as digest_kernels
    from bkdisk.entrylogs import walk as entry_walk
    from bkdisk.formats import entry as fen
    from bkdisk.formats import entrylog as fel
    from bkdisk.formats import journal as fj
    from bkdisk.journal import search as journal_search
    from bkdisk.journal import walk as journal_walk

    v1, v2 = _table_offsets("formats.entry.ENTRY_V1_HEADER"), _table_offsets("formats.entry.ENTRY_V2_HEADER")
    assert (fen.V1_LEDGER_AT, fen.V1_ENTRY_AT, fen.V1_LAC_AT, fen.V1_LENGTH_AT) == \
        (v1["ledger_id"], v1["entry_id"], v1["last_add_confirmed"], v1["length"])
    assert (fen.V2_FLAGS_AT, fen.V2_SCOPE_AT, fen.V2_PREFIX_SIZE) == (v2["flags"], v2["scope_id"], v2["ledger_id"])
    # a V2 header is its prefix, then the V1 fields at the same relative offsets
    assert all(v2[k] - fen.V2_PREFIX_SIZE == v1[k] for k in v1)
    assert entry_walk.HEADER_LOOKAHEAD == fel.SIZE_PREFIX_SIZE + fen.ENTRY_V2_HEADER_SIZE
    assert digest_kernels.DIGEST_LENGTH_BY_CODE.tolist()[1:] == [
        fen.DIGEST_LENGTH[fen.DigestType(c)] for c in range(1, 5)]

    batch = _table_offsets("formats.entrylog.LEDGERS_MAP_BATCH")
    assert fel.SIZE_PREFIX_SIZE == batch["ledger_id"] == _table_sizes("formats.entrylog.LEDGERS_MAP_BATCH")["size"]
    assert fel.LEDGERS_MAP_BATCH_HEAD_SIZE == batch["ledgers"]

    key, lac = _table_offsets("formats.journal.LEDGER_KEY_BODY"), _table_offsets("formats.journal.EXPLICIT_LAC_BODY")
    fence = _table_offsets("formats.journal.FENCE_BODY")
    assert (fj.META_LEDGER_AT, fj.META_ENTRY_AT) == (fence["ledger_id"], fence["entry_id"])
    assert (fj.KEY_LENGTH_AT, fj.KEY_AT) == (key["key_length"], key["master_key"])
    assert (fj.LAC_BODY_LENGTH_AT, fj.LAC_BODY_AT) == (lac["lac_body_length"], lac["lac_body"])
    pad = _table_sizes("formats.journal.PADDING_RECORD")
    assert fj.PADDING_HEAD_SIZE == pad["marker"] + pad["padding_length"] == journal_walk.LOOKAHEAD
    assert fj.SCOPE_AT == _table_offsets("formats.journal.SCOPED_PREFIX")["scope_id"]
    assert journal_search.HEAD == fj.RECORD_LENGTH_SIZE + fence["entry_id"] + _table_sizes(
        "formats.journal.FENCE_BODY")["entry_id"]


def test_journal_body_limits_are_the_edges_the_declarations_check() -> None:
    from bkdisk.formats import journal as fj
    fj.LEDGER_KEY_BODY.build(dict(ledger_id=1, key_length=fj.MAX_KEY_LENGTH, master_key=bytes(fj.MAX_KEY_LENGTH)))
    with pytest.raises(cs.ConstructError):
        fj.LEDGER_KEY_BODY.build(dict(ledger_id=1, key_length=fj.MAX_KEY_LENGTH + 1,
                                      master_key=bytes(fj.MAX_KEY_LENGTH + 1)))
    for good in (fj.MIN_LAC_BODY_LENGTH, fj.MAX_LAC_BODY_LENGTH):
        fj.EXPLICIT_LAC_BODY.build(dict(ledger_id=1, lac_body_length=good, lac_body=bytes(good)))
    for bad in (fj.MIN_LAC_BODY_LENGTH - 1, fj.MAX_LAC_BODY_LENGTH + 1):
        with pytest.raises(cs.ConstructError):
            fj.EXPLICIT_LAC_BODY.build(dict(ledger_id=1, lac_body_length=bad, lac_body=bytes(bad)))


def test_index_kernel_constants_are_the_offsets_of_the_spec_tables() -> None:
    from bkdisk.formats import index as fi
    from bkdisk.indexfiles import decode

    tables = [t for t in TABLES if t.target == "formats.index.INDEX_HEADER_FIELDS" and t.rows]
    assert len(tables) == 2, "specs/index.md has a V0 and a V1 header table"
    v0, v1 = sorted(tables, key=lambda t: len(t.rows))
    at = {r.field: r.offset for r in v1.rows}
    size = {r.field: r.size for r in v1.rows}
    assert (decode.VERSION_AT, decode.KEY_LENGTH_AT, decode.KEY_AT) == (
        int(at["version"]), int(at["master_key_length"]), int(at["master_key"]))
    assert decode.MAGIC == int.from_bytes(fi.INDEX_MAGIC, "big") and int(size["magic"]) == len(fi.INDEX_MAGIC)
    # The fixed part of each header version: the table's last plain field ends there once the key (L) is removed.
    assert decode.V0_FIXED == int(v0.rows[-1].offset.replace("+L", "")) + int(v0.rows[-1].size)
    assert decode.V1_FIXED == int(at["explicit_lac_length"].replace("+L", "")) + int(size["explicit_lac_length"])
    assert fi.SLOT_SIZE == fi.SLOT_DTYPE.itemsize == 8 and fi.slot_offset(1) - fi.slot_offset(0) == fi.SLOT_SIZE
    assert fi.slot_offset(0) == fi.HEADER_SIZE
