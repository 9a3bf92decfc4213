"""Rules the project states about its own code, checked on every module: one declaration per layout
(no hand decoding, location arithmetic, bare header or size-prefix sizes or format constants outside
formats/), one place for the golden location, small modules, kernels declared through diskio.config and
the helpers kernels call inlined."""
from __future__ import annotations

import ast
import re

from conftest import REPO

# Product packages. formats/ holds the declarations; diskio/ is the byte-level I/O layer beneath them, digests/
# the digest checks beside it.
PRODUCT = ("formats", "diskio", "digests", "journal", "entrylogs", "indexfiles", "rocksdbfiles", "bookie", "fsck",
           "bkdisk", "audit", "metaservice")
MAY_DECODE = {"formats", "diskio", "digests"}   # digests/: CRC arithmetic over raw entry bytes, as diskio
MAX_MODULE_LINES = 400


def _product_modules():
    for pkg in PRODUCT:
        for p in sorted((REPO / pkg).rglob("*.py")) if (REPO / pkg).is_dir() else []:
            if not re.search(r"_pb2(_grpc)?\.py$", p.name):
                yield pkg, p


def _is_int_codec(call: ast.Call) -> bool:
    """int.from_bytes(...), or x.to_bytes / x.from_bytes given a byte order (not a record's own to_bytes())."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr not in ("from_bytes", "to_bytes"):
        return False
    if isinstance(f.value, ast.Name) and f.value.id == "int":
        return True
    orders = [a for a in call.args if isinstance(a, ast.Constant) and a.value in ("big", "little")]
    return bool(orders) or any(k.arg == "byteorder" for k in call.keywords)


def hand_decoding(source: str, name: str = "<src>") -> list[str]:
    """Places where bytes are decoded or encoded by hand instead of through a formats/ declaration."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import) and any(a.name == "struct" for a in node.names):
            out.append(f"{name}:{node.lineno} imports struct")
        elif isinstance(node, ast.ImportFrom) and node.module == "struct":
            out.append(f"{name}:{node.lineno} imports from struct")
        elif isinstance(node, ast.Call) and _is_int_codec(node):
            out.append(f"{name}:{node.lineno} uses .{node.func.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[>!][iuIUqQhHlL]\d?",
                                                                                              node.value):
            out.append(f"{name}:{node.lineno} spells the big-endian dtype {node.value!r}")
    return out


def test_the_checker_flags_hand_decoding():
    bad = ("import struct\nx = int.from_bytes(b[16:24], 'big')\ny = (5).to_bytes(4, 'big')\n"
           "import numpy as np\nz = np.frombuffer(b, dtype='>i8')\n")
    assert len(hand_decoding(bad)) == 4
    assert hand_decoding("from bkdisk.formats.codec import read_field\nv = read_field(H, 'length', b)\n"
                         "data = entry.to_bytes()\n") == []


def test_no_layout_is_decoded_by_hand_outside_formats_and_diskio():
    assert _outside(MAY_DECODE, hand_decoding) == []


def _int_of(node: ast.AST) -> int | None:
    """The integer a literal spells, also through one wrapping call (``np.uint64(32)``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        return _int_of(node.args[0])
    return None


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node of ``tree`` -> the name of the function that holds it ("" at module level)."""
    out: dict[ast.AST, str] = {}

    def visit(node: ast.AST, fn: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            out[child] = inner
            visit(child, inner)
    visit(tree, "")
    return out


# 32-bit arithmetic that is not a location: (module, function) -> what it computes.
NOT_LOCATIONS = {
    ("bkdisk/dump/java_compat.py", "java_string_hash"): "Java's int overflow in String.hashCode",
    ("bkdisk/dump/shell_format.py", "hexdump"): "the 8-hex-digit offset column of a hex dump",
    ("metaservice/zk_ids.py", "_generate_long"): "a ledger id from ZooKeeper's two 32-bit id nodes",
}


def location_arithmetic(source: str, name: str = "<src>") -> list[str]:
    """Places that split or join a location (entry log id << 32 | position) by hand: a shift by 32 or
    a mask with 0xFFFFFFFF, instead of formats.index's location helpers."""
    tree = ast.parse(source, name)
    fn = _functions(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.RShift, ast.LShift)) and _int_of(node.right) == 32:
            what = "shifts by 32"
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.RShift, ast.LShift)) \
                and _int_of(node.value) == 32:
            what = "shifts by 32"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd) \
                and 0xFFFFFFFF in (_int_of(node.left), _int_of(node.right)):
            what = "masks with 0xFFFFFFFF"
        else:
            continue
        if (name, fn.get(node, "")) not in NOT_LOCATIONS:
            out.append(f"{name}:{node.lineno} {what}")
    return out


# Sizes of a layout that code outside formats/ must name: the 4-byte size prefix of entry-log and
# journal records, the 1024-byte entry-log and index headers, the V1 and V2 entry headers.
LAYOUT_SIZES = {4: "a size prefix", 1024: "a header size", 32: "a V1 entry header size", 41: "a V2 entry header size"}
_OFFSET_NAME = re.compile(r"off|pos|start|body|base|_at\b|\bat\b|loc|\bend\b|size", re.IGNORECASE)


def bare_layout_sizes(source: str, name: str = "<src>") -> list[str]:
    """Offsets and sizes moved by a bare layout size (``off + 4``, ``size + 4``, ``position - 1024``)
    instead of its formats/ name."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))):
            continue
        for lit, other in ((node.right, node.left), (node.left, node.right)):
            v = lit.value if isinstance(lit, ast.Constant) and type(lit.value) is int else None
            if v in LAYOUT_SIZES and _OFFSET_NAME.search(ast.unparse(other)):
                out.append(f"{name}:{node.lineno} moves an offset by {LAYOUT_SIZES[v]} ({ast.unparse(node)})")
    return out


# Names that declare a fact of a file's layout.
_FORMAT_NAME = re.compile(r"MAGIC|ALIGNMENT|PADDING_BYTE|HEADER_SIZE|PREFIX_SIZE|MAX_ENTRY_SIZE|MARKER|_AT$|_OFFSET$")


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, bytes)) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) and _literal(node.right)
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    return isinstance(node, ast.Tuple) and bool(node.elts) and all(_literal(e) for e in node.elts)


def format_constants(source: str, name: str = "<src>") -> list[str]:
    """Module-level constants of a layout (a magic, an alignment, a header size, a field offset) given
    as literals: such a fact is declared in formats/ and imported from there."""
    out = []
    for node in ast.parse(source, name).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [e.id for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])
                 if isinstance(e, ast.Name)]
        if _literal(value) and any(n.isupper() and _FORMAT_NAME.search(n.strip("_")) for n in names):
            out.append(f"{name}:{node.lineno} declares {', '.join(names)}")
    return out


def test_the_checkers_flag_location_arithmetic_bare_layout_sizes_and_format_constants():
    assert len(location_arithmetic("log = loc >> 32\npos = loc & 0xFFFFFFFF\nk = (l << np.uint64(32)) | p\n"
                                   "m = v & np.uint64(0xFFFFFFFF)\nx >>= 32\n")) == 5
    assert location_arithmetic("log, pos = unpack_location(loc)\nk = join_locations(l, p)\nx = y >> 8\n") == []
    assert location_arithmetic("def hexdump(data, offset=0):\n    return offset & 0xFFFFFFFF\n",
                               "bkdisk/dump/shell_format.py") == []
    assert len(location_arithmetic("def f(offset):\n    return offset & 0xFFFFFFFF\n",
                                   "bkdisk/dump/shell_format.py")) == 1
    assert len(bare_layout_sizes("raw = data[r.offset + 4:r.offset + 4 + r.size]\nn = size - 1024\n"
                                 "p = pos + 1024\nb = body + 32\nm = r.size + 4\n")) == 6
    assert bare_layout_sizes("raw = data[r.offset + SIZE_PREFIX_SIZE:]\nn = i + 4\nk = count - 1\n") == []
    assert len(format_constants("DIRECT_ALIGNMENT = 4096\nDIRECT_PADDING_BYTE = 0xF0\nMAGIC = b'BKLO'\n"
                                "MAX_ENTRY_SIZE = 1 << 30\nLEDGER_AT, ENTRY_AT = 0, 8\n")) == 5
    assert format_constants("STREAM_CHUNK = 8 << 20\nALIGN = fe.DIRECT_ALIGNMENT\ndef f():\n    MAGIC_AT = 4\n") == []


def _outside(packages: set[str], check) -> list[str]:
    bad = []
    n = 0
    for pkg, p in _product_modules():
        if pkg in packages:
            continue
        n += 1
        bad += check(p.read_text(), str(p.relative_to(REPO)))
    assert n > 40, "the scan read too few modules to mean anything"
    return bad


def test_locations_are_split_and_joined_by_formats_only():
    assert _outside(MAY_DECODE, location_arithmetic) == []


def test_no_offset_moves_by_a_bare_header_or_size_prefix_size_outside_formats_and_diskio():
    assert _outside(MAY_DECODE, bare_layout_sizes) == []


def test_format_constants_are_declared_in_formats_only():
    assert _outside({"formats"}, format_constants) == []


def plain_unique_calls(source: str, name: str = "<src>") -> list[str]:
    """Calls of ``np.unique`` with no option: numpy 2 finds those values through a hash table (slower
    than a sort on id columns, and its first call loads numpy.ma); diskio.distinct.distinct sorts."""
    return [f"{name}:{node.lineno} calls np.unique without options (diskio.distinct.distinct)"
            for node in ast.walk(ast.parse(source, name))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unique"
            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("np", "numpy")
            and not node.keywords and len(node.args) == 1]


def test_the_checker_flags_a_plain_np_unique():
    assert len(plain_unique_calls("import numpy as np\nu = np.unique(a)\nv = numpy.unique(np.concatenate(b))\n")) == 2
    assert plain_unique_calls("u, i = np.unique(a, return_inverse=True)\nv = distinct(a)\nw = pd.unique(a)\n") == []


def isin_against_columns(source: str, name: str = "<src>") -> list[str]:
    """Calls of ``np.isin`` whose second argument is not a constant (an UPPER_CASE name or a literal
    tuple or list): against a column numpy sorts through ``np.unique`` without options, as above;
    diskio.distinct.members searches the sorted distinct values."""
    def constant(node: ast.AST) -> bool:
        return isinstance(node, (ast.Tuple, ast.List)) or (isinstance(node, ast.Name) and node.id.isupper())
    return [f"{name}:{node.lineno} calls np.isin against a column (diskio.distinct.members)"
            for node in ast.walk(ast.parse(source, name))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "isin"
            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("np", "numpy")
            and not (len(node.args) > 1 and constant(node.args[1]))]


def test_the_checker_flags_np_isin_against_a_column():
    assert len(isin_against_columns("m = np.isin(a, known)\nn = numpy.isin(a, ids[ok])\n")) == 2
    assert isin_against_columns("m = np.isin(a, TYPES)\nn = np.isin(a, (1, 2))\no = members(a, b)\n") == []


def test_distinct_values_come_from_a_sort_not_numpys_hash_table():
    found = [f for _pkg, p in _product_modules() for rule in (plain_unique_calls, isin_against_columns)
             for f in rule(p.read_text(), str(p.relative_to(REPO)))]
    assert found == []


def test_every_product_module_is_under_the_size_limit():
    big = [f"{p.relative_to(REPO)}: {n} lines" for _pkg, p in _product_modules()
           if (n := len(p.read_text().splitlines())) >= MAX_MODULE_LINES]
    assert big == []


def test_tests_take_the_golden_location_from_conftest_only():
    pattern = re.compile(r"""shared["']?\s*/\s*["']golden|/work/shared|shared/golden""")
    skip = ("conftest.py", "test_project_rules.py")
    offenders = [f"{p.name}:{i}" for p in sorted((REPO / "tests").glob("*.py")) if p.name not in skip
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if pattern.search(line) and not line.lstrip().startswith(("#", '"', "'"))]
    assert offenders == []
    assert pattern.search('GOLDEN = Path(__file__).parents[2] / "shared" / "golden"')


def _word_stem(name: str) -> str:
    """A module name with each word's inflection taken off (reader, reading, reads: read)."""
    words = []
    for w in name.split("_"):
        for suffix in ("ing", "er", "s", "ed"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w.removesuffix(suffix)
                break
        words.append(w)
    return "_".join(words)


def twin_names(names: list[str]) -> list[list[str]]:
    """Module names of one package that differ only in inflection (reader.py beside reading.py): the name
    alone cannot say which holds what."""
    by_stem: dict[str, list[str]] = {}
    for n in sorted(names):
        by_stem.setdefault(_word_stem(n), []).append(n)
    return [group for group in by_stem.values() if len(group) > 1]


def test_the_name_rule_flags_two_inflections_of_one_word():
    assert twin_names(["reader", "reading", "scan", "reference_reader"]) == [["reader", "reading"]]
    assert twin_names(["zk_reads", "zk_reading", "writer"]) == [["zk_reading", "zk_reads"]]
    assert twin_names(["reference_reader", "reading", "listing"]) == []


def test_no_package_holds_two_module_names_that_differ_only_in_inflection():
    folders = {p.parent for _pkg, p in _product_modules()} | {REPO / "commandline"}
    twins = [f"{d.relative_to(REPO)}: {group}" for d in sorted(folders)
             if (group_list := twin_names([p.stem for p in d.glob("*.py") if p.stem != "__init__"
                                           and not p.stem.endswith(("_pb2", "_pb2_grpc"))]))
             for group in group_list]
    assert twins == []


def numba_decorations(source: str, name: str = "<src>") -> list[str]:
    """Kernels declared with numba's own decorators instead of ``diskio.config.kernel`` (which resolves
    the cache folder first and loads cached kernels without numba's registry refresh)."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.ImportFrom) and node.module == "numba" and any(
                a.name in ("njit", "jit") for a in node.names):
            out.append(f"{name}:{node.lineno} imports numba's jit")
        elif isinstance(node, ast.Attribute) and node.attr in ("njit", "jit") and isinstance(node.value, ast.Name) \
                and node.value.id in ("numba", "nb"):
            out.append(f"{name}:{node.lineno} uses numba.{node.attr}")
    return out


def test_every_kernel_is_declared_through_diskio_config_kernel():
    assert len(numba_decorations("from numba import njit\n@njit(cache=True)\ndef f(a): pass\n"
                                 "import numba\ng = numba.njit(f)\n")) == 2
    assert numba_decorations("from bkdisk.diskio.config import kernel\n@kernel\ndef f(a): pass\n") == []
    bad = [x for _pkg, p in _product_modules() if p != REPO / "diskio" / "config.py"
           for x in numba_decorations(p.read_text(), str(p.relative_to(REPO)))]
    assert bad == []


def _kernels(tree: ast.AST) -> dict[str, str]:
    """The module's jitted functions by name: ``kernel`` or ``inline_kernel``."""
    return {n.name: d.id for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            for d in n.decorator_list if isinstance(d, ast.Name) and d.id in ("kernel", "inline_kernel")}


def helpers_not_inlined(sources: dict[str, str]) -> list[str]:
    """Kernels called from another kernel but declared ``kernel``, not ``inline_kernel``: each such call
    costs an atomic count up and down of every array it passes (``sources``: module name -> source).
    A call names its kernel bare (``from m import k``) or through its module (``import m as M``, ``M.k``)."""
    trees = {m: ast.parse(s, m) for m, s in sources.items()}
    declared = {m: _kernels(t) for m, t in trees.items()}
    out = []
    for m, tree in trees.items():
        visible = dict(declared[m])
        modules: dict[str, str] = {}   # a local name -> the module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in declared:
                visible.update({a.asname or a.name: declared[node.module][a.name] for a in node.names
                                if a.name in declared[node.module]})
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                                if f"{node.module}.{a.name}" in declared})
            elif isinstance(node, ast.Import):
                modules.update({a.asname: a.name for a in node.names if a.asname and a.name in declared})

        def kind(f: ast.expr, visible=visible, modules=modules) -> str | None:
            if isinstance(f, ast.Name):
                return visible.get(f.id)
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
                return declared[modules[f.value.id]].get(f.attr)
            return None

        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name in declared[m]:
                out += [f"{m}.{fn.name} calls {ast.unparse(c.func)}" for c in ast.walk(fn)
                        if isinstance(c, ast.Call) and not (isinstance(c.func, ast.Name) and c.func.id == fn.name)
                        and kind(c.func) == "kernel"]
    return sorted(set(out))


def test_every_kernel_another_kernel_calls_is_inlined():
    planted = {"bkdisk.a": "@kernel\ndef h(b): return b[0]\n",
               "bkdisk.b": "from bkdisk.a import h\n@kernel\ndef k(b):\n    return h(b)\n"}
    assert helpers_not_inlined(planted) == ["bkdisk.b.k calls h"]
    planted["bkdisk.c"] = "from bkdisk import a as A\n@kernel\ndef k(b):\n    return A.h(b)\n"
    planted["bkdisk.d"] = "import bkdisk.a as A\n@kernel\ndef k(b):\n    return A.h(b)\n"
    assert helpers_not_inlined(planted) == ["bkdisk.b.k calls h", "bkdisk.c.k calls A.h", "bkdisk.d.k calls A.h"]
    planted["bkdisk.a"] = "@inline_kernel\ndef h(b): return b[0]\n"
    assert helpers_not_inlined(planted) == []
    sources = {}
    for pkg, p in _product_modules():
        parts = p.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts) if pkg == "bkdisk" else "bkdisk." + ".".join(parts)
        sources[name.removesuffix(".__init__")] = p.read_text()
    assert len([m for m, s in sources.items() if "@inline_kernel" in s]) > 5
    assert helpers_not_inlined(sources) == []
