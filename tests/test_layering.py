"""Data flows one way: no package imports a package above it (formats at the bottom, the commands on top).

The libraries (formats ... fsck, metaservice) sit below the command-line layer (commandline/: exit
codes, the guarded runner, the ledger and memory options, progress) and never import it; the commands
stand on it: the Spark audit and its front end (audit/), then bkdisk's commands (bkdisk/, bookie-fsck's
among them).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# digests/ sits beside diskio/, on its helpers (diskio never imports it), below the file kinds that check with it.
LAYER = {"formats": 0, "diskio": 1, "digests": 1, "journal": 2, "entrylogs": 2, "indexfiles": 2, "rocksdbfiles": 2,
         "bookie": 3, "metaservice": 3, "fsck": 4, "commandline": 4.2, "audit": 4.5, "bkdisk": 5, "bench": 6}
COMMAND_LINE = "commandline"
# The audit's modules that are command lines: the rest of audit/ is the job Spark runs, a library.
AUDIT_FRONT_ENDS = {"audit/cli.py", "audit/spark_app.py"}
# File-kind packages sit side by side and do not use each other.
PEERS_APART = {"journal", "entrylogs", "indexfiles", "rocksdbfiles"}
# formats/ holds declarations only: no file, process or memory-map access.
IO_MODULES = {"mmap", "subprocess", "shutil", "tempfile", "io.open"}


def _imports(path: Path) -> set[str]:
    return _imported(path.read_text(), str(path))


def _imported(source: str, name: str = "<source>") -> set[str]:
    """Every module named by an absolute import in ``source``."""
    tree = ast.parse(source, name)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _layer_of(module: str) -> str | None:
    """The package a module name belongs to: ``bkdisk.fsck.api`` -> ``fsck``; the commands are ``bkdisk``."""
    parts = module.split(".")
    if parts[0] != "bkdisk":
        return parts[0] if parts[0] == "bench" else None
    return parts[1] if len(parts) > 1 and parts[1] in LAYER else "bkdisk"


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
            top = _layer_of(mod)
            if top is None or top == pkg:
                continue
            n += 1
            if LAYER[top] > LAYER[pkg] or (top in PEERS_APART and pkg in PEERS_APART):
                bad.append(f"{p.relative_to(ROOT)} imports {mod}")
    assert n > 50, "the scan found too few cross-package imports to mean anything"
    assert bad == []


def imports_of_digests(source: str) -> list[str]:
    """The digest package's modules ``source`` imports (none, for a diskio module)."""
    return sorted(m for m in _imported(source) if _layer_of(m) == "digests")


def test_digests_sit_beside_diskio_on_its_helpers_below_the_file_kinds():
    assert LAYER["digests"] == LAYER["diskio"] < min(LAYER[p] for p in PEERS_APART)
    bad = [f"{p.relative_to(ROOT)} imports {m}" for pkg, p in _modules() if pkg == "diskio"
           for m in imports_of_digests(p.read_text())]
    assert bad == [], "diskio is beneath the digests: they use its helpers, it does not use them"
    assert imports_of_digests("from bkdisk.digests.plan import DigestPlan\nfrom bkdisk.diskio.mapped import map_file\n"
                              ) == ["bkdisk.digests.plan"]


def test_formats_does_no_io():
    bad = []
    for pkg, p in _modules():
        if pkg != "formats" or p.name == "regenerate.py":   # regenerate.py is a developer tool, not the library
            continue
        bad += [f"{p.relative_to(ROOT)} imports {m}" for m in _imports(p) if m.split(".")[0] in IO_MODULES]
    assert bad == []


def test_the_command_line_layer_sits_above_every_library_and_below_the_commands():
    below = {p for p, n in LAYER.items() if n < LAYER[COMMAND_LINE]}
    assert below == {"formats", "diskio", "digests", "journal", "entrylogs", "indexfiles", "rocksdbfiles", "bookie",
                     "metaservice", "fsck"}
    assert {p for p, n in LAYER.items() if n > LAYER[COMMAND_LINE]} == {"audit", "bkdisk", "bench"}


def test_only_the_audits_front_ends_use_the_command_line_layer():
    bad = []
    for pkg, p in _modules():
        rel = p.relative_to(ROOT).as_posix()
        if pkg == "audit" and rel not in AUDIT_FRONT_ENDS:
            bad += [f"{rel} imports {m}" for m in _imports(p) if _layer_of(m) == COMMAND_LINE]
    assert bad == []


def test_every_front_end_stands_on_the_command_line_layer():
    # bookie-fsck's, bkdisk's and the audit's command lines take their runner and options from it.
    for rel in ("bkdisk/cli.py", "bkdisk/fsck_cli.py", "audit/cli.py", "audit/spark_app.py"):
        assert any(_layer_of(m) == COMMAND_LINE for m in _imports(ROOT / rel)), rel


def top_level_imports(source: str) -> list[str]:
    """Imports of a project package by its folder's name (``formats``) instead of its installed name
    (``bkdisk.formats``): such an import works only with the repository on sys.path."""
    folders = set(LAYER) - {"bkdisk", "bench"}
    return sorted(n for n in _imported(source) if n.split(".")[0] in folders)


def test_every_import_of_a_project_package_goes_through_the_bkdisk_namespace():
    files = [p for _, p in _modules()] + sorted((ROOT / "tests").rglob("*.py"))
    bad = [f"{p.relative_to(ROOT)} imports {n}" for p in files for n in top_level_imports(p.read_text())]
    assert len(files) > 150
    assert bad == []


def test_the_namespace_rule_flags_a_planted_top_level_import():
    assert top_level_imports("import formats.entry\nfrom fsck.api import check_bookie\n") == [
        "formats.entry", "fsck.api"]
    assert top_level_imports("from bkdisk.formats import entry\nimport bkdisk.fsck.api\nimport bench.run_all\n") == []


def test_no_command_module_shares_its_name_with_a_library_module():
    # bkdisk/space.py beside bookie/space.py sent readers to the wrong one: the front ends are *_cli.
    below = {p for p, n in LAYER.items() if n < LAYER[COMMAND_LINE]}
    library = {p.stem for pkg, p in _modules() if pkg in below and p.stem != "__init__"}
    commands = {p.stem for p in (ROOT / "bkdisk").rglob("*.py") if p.stem != "__init__"}
    assert len(library) > 100 and len(commands) > 10
    assert sorted(commands & library) == []
