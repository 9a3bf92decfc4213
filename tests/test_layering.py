"""Data flows one way: no package imports a package above it (formats at the bottom, the CLI on top)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYER = {"formats": 0, "diskio": 1, "journal": 2, "entrylogs": 2, "indexfiles": 2, "rocksdbfiles": 2, "bookie": 3,
         "metaservice": 3, "fsck": 4, "audit": 4.5, "bkdisk": 5, "bench": 6}
# File-kind packages sit side by side and do not use each other.
PEERS_APART = {"journal", "entrylogs", "indexfiles", "rocksdbfiles"}
# formats/ holds declarations only: no file, process or memory-map access.
IO_MODULES = {"mmap", "subprocess", "shutil", "tempfile", "io.open"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _modules():
    for pkg in LAYER:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if not p.name.endswith("_pb2.py"):
                yield pkg, p


def test_no_package_imports_a_higher_layer_or_a_peer_file_kind():
    bad = []
    n = 0
    for pkg, p in _modules():
        for mod in _imports(p):
            top = mod.split(".")[0]
            if top not in LAYER or top == pkg:
                continue
            n += 1
            if LAYER[top] > LAYER[pkg] or (top in PEERS_APART and pkg in PEERS_APART):
                bad.append(f"{p.relative_to(ROOT)} imports {mod}")
    assert n > 50, "the scan found too few cross-package imports to mean anything"
    assert bad == []


def test_formats_does_no_io():
    bad = []
    for pkg, p in _modules():
        if pkg != "formats" or p.name == "regenerate.py":   # regenerate.py is a developer tool, not the library
            continue
        bad += [f"{p.relative_to(ROOT)} imports {m}" for m in _imports(p) if m.split(".")[0] in IO_MODULES]
    assert bad == []
