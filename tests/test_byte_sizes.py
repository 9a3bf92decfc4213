"""One byte-size formatter (formats/byte_sizes.py) for every report: fsck's, `bkdisk space`'s, the audit's."""
from __future__ import annotations

import ast

from bkdisk.formats.byte_sizes import human_bytes
from tests.test_layering import ROOT, _modules


def test_human_units():
    assert [human_bytes(n) for n in (0, 1, 1023, 1024, 1536, 10 * 2**20 + 2**19, 3 * 2**30, 5 * 2**40, 2**52)] == [
        "0 B", "1 B", "1023 B", "1.0 KiB", "1.5 KiB", "10.5 MiB", "3.0 GiB", "5.0 TiB", "4096.0 TiB"]


def test_every_report_uses_the_one_formatter_and_no_module_spells_the_units_again():
    users = {"bkdisk/space_cli.py", "fsck/report.py", "audit/report_text.py"}
    for rel in users:
        tree = ast.parse((ROOT / rel).read_text())
        imports = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "bkdisk.formats.byte_sizes" in imports, rel
    spelled = []
    for _pkg, p in _modules():
        if p.relative_to(ROOT).as_posix() == "formats/byte_sizes.py":
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Constant) and n.value in ("KiB", "TiB"):
                spelled.append(f"{p.relative_to(ROOT)}:{n.lineno}")
    assert spelled == []
