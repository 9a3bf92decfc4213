"""Rules the project states about its own code, checked on every module: one declaration per layout,
one place for the golden location, small modules."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

# Product packages. formats/ holds the declarations; diskio/ is the byte-level I/O layer beneath them.
PRODUCT = ("formats", "diskio", "journal", "entrylogs", "indexfiles", "rocksdbfiles", "bookie", "fsck", "bkdisk",
           "audit", "metaservice")
MAY_DECODE = {"formats", "diskio"}
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
    assert hand_decoding("from formats.codec import read_field\nv = read_field(H, 'length', b)\n"
                         "data = entry.to_bytes()\n") == []


def test_no_layout_is_decoded_by_hand_outside_formats_and_diskio():
    bad = []
    n = 0
    for pkg, p in _product_modules():
        if pkg in MAY_DECODE:
            continue
        n += 1
        bad += hand_decoding(p.read_text(), str(p.relative_to(REPO)))
    assert n > 40, "the scan read too few modules to mean anything"
    assert bad == []


def test_every_product_module_is_under_the_size_limit():
    big = [f"{p.relative_to(REPO)}: {n} lines" for _pkg, p in _product_modules()
           if (n := len(p.read_text().splitlines())) >= MAX_MODULE_LINES]
    assert big == []


def test_tests_take_the_golden_location_from_conftest_only():
    pattern = re.compile(r"""shared["']?\s*/\s*["']golden|/work/shared|shared/golden""")
    offenders = [f"{p.name}:{i}" for p in sorted((REPO / "tests").glob("*.py")) if p.name not in ("conftest.py", "test_project_rules.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if pattern.search(line) and not line.lstrip().startswith(("#", '"', "'"))]
    assert offenders == []
    assert pattern.search('GOLDEN = Path(__file__).parents[2] / "shared" / "golden"')


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
    assert numba_decorations("from diskio.config import kernel\n@kernel\ndef f(a): pass\n") == []
    bad = [x for _pkg, p in _product_modules() if p != REPO / "diskio" / "config.py"
           for x in numba_decorations(p.read_text(), str(p.relative_to(REPO)))]
    assert bad == []
