"""One import path per name: a digest name (``DigestPlan``, ``DIGEST_BAD``, ``verify_entry_digests``, ...)
is imported from the module of ``bkdisk.digests`` that defines it, never through a module that only
imports it in turn (``bkdisk.entrylogs.scan``, another digest module), so that a reader finds it where
it is written and a move breaks its importers loudly. The same holds for the ledger metadata value
(``LedgerMetadata`` and its bounds, declared in ``bkdisk.formats.ledger_metadata``, not
``bkdisk.formats.metadata`` which parses into it) and the byte-size formatter (``bkdisk.formats.byte_sizes``,
not a report that prints with it)."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_cycles import _module_files
from tests.test_layering import ROOT

PACKAGE = "bkdisk.digests"
# Modules whose names every importer takes from them, wherever they are also imported.
DECLARING = ("bkdisk.formats.ledger_metadata", "bkdisk.formats.byte_sizes")
# Second-hand imports in audit/, which is being reworked on its own branch: (file, name) pairs, to go there.
AUDIT_STILL: set[tuple[str, str]] = set()


def defined_names(source: str) -> set[str]:
    """The names a module's top level binds itself: functions, classes and assignments (not imports)."""
    out: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def second_hand_imports(source: str, owners: dict[str, str], modules: set[str], name: str = "<src>") -> list[str]:
    """``from M import n`` where ``n`` is a name ``owners`` places in another module than ``M``."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            for a in node.names:
                home = owners.get(a.name)
                if home is not None and home != node.module and f"{node.module}.{a.name}" not in modules:
                    bad.append(f"{name}:{node.lineno} imports {a.name} from {node.module}, not {home}")
    return bad


def _owners(files: dict[str, Path], declaring: tuple[str, ...] = ()) -> dict[str, str]:
    owners: dict[str, str] = {}
    for mod, p in files.items():
        if mod.startswith(PACKAGE + ".") or mod in declaring:
            for n in defined_names(p.read_text()):
                owners.setdefault(n, mod)
    return owners


def test_every_digest_name_is_imported_from_the_module_that_defines_it():
    files = _module_files()
    owners = _owners(files)
    assert {"DigestPlan", "DIGEST_BAD", "verify_entry_digests", "crc_update", "PayloadHashes"} <= set(owners)
    sources = list(files.values()) + sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "bench").rglob("*.py"))
    bad = [b for p in sources for b in second_hand_imports(p.read_text(), owners, set(files), str(p.relative_to(ROOT)))]
    assert bad == []


def _audit_pair(finding: str) -> tuple[str, str]:
    path, rest = finding.split(":", 1)
    return path, rest.split(" imports ", 1)[1].split(" from ", 1)[0]


def test_the_metadata_value_and_the_byte_formatter_are_imported_from_where_they_are_declared():
    files = _module_files()
    owners = {n: m for n, m in _owners(files, DECLARING).items() if m in DECLARING}
    assert {"LedgerMetadata", "INT32", "unfit", "human_bytes"} <= set(owners)
    sources = list(files.values()) + sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "bench").rglob("*.py"))
    bad = [b for p in sources for b in second_hand_imports(p.read_text(), owners, set(files), str(p.relative_to(ROOT)))]
    assert [b for b in bad if _audit_pair(b) not in AUDIT_STILL] == []


def test_the_rule_flags_a_name_imported_through_another_module():
    owners = {"DigestPlan": "bkdisk.digests.plan"}
    modules = {"bkdisk.digests.plan", "bkdisk.entrylogs.scan", "bkdisk.digests"}
    assert second_hand_imports("from bkdisk.entrylogs.scan import DigestPlan\n", owners, modules) == [
        "<src>:1 imports DigestPlan from bkdisk.entrylogs.scan, not bkdisk.digests.plan"]
    assert second_hand_imports("from bkdisk.digests.plan import DigestPlan\nfrom bkdisk.digests import plan\n",
                               owners, modules) == []
    owners = {"LedgerMetadata": "bkdisk.formats.ledger_metadata"}
    modules = {"bkdisk.formats.ledger_metadata", "bkdisk.formats.metadata"}
    assert second_hand_imports("from bkdisk.formats.metadata import LedgerMetadata, parse_metadata\n", owners,
                               modules, "x.py") == ["x.py:1 imports LedgerMetadata from bkdisk.formats.metadata, "
                                                    "not bkdisk.formats.ledger_metadata"]
