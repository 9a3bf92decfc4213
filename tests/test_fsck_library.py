"""fsck as a library: check, plan, apply with a confirm callback, re-check; finding
codes from the one problem table; repair payloads as typed fields."""
from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.api import check_bookie, recheck
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck.findings import Finding
from bkdisk.fsck.problems import PROBLEMS, REPAIR_KINDS
from bkdisk.fsck.repair.repairs import apply_repairs, plan_repairs, repair_bookie
from tests.fsck_helpers import errors, make_disk
from tests.test_import_cycles import imported_names

FSCK = Path(__file__).resolve().parents[1] / "fsck"


def _code_strings_in(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal given as a Finding's code, positionally or by keyword,
    and of every upper-case string compared with or assigned to a name called ``code``."""
    out = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
            args = node.args[:1] + [k.value for k in node.keywords if k.arg == "code"]
            for a in args:
                for c in ast.walk(a):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        out.append((c.lineno, c.value))
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "code":
            for c in node.comparators:
                for k in ast.walk(c):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        out.append((k.lineno, k.value))
    return out


def test_every_code_string_a_pass_or_repair_uses_is_in_the_problem_table():
    used = [(p.name, line, code) for p in sorted(FSCK.rglob("*.py")) for line, code in _code_strings_in(p)]
    assert used or list(FSCK.rglob("*.py")), "nothing scanned"
    unknown = [(f, line, code) for f, line, code in used if code not in PROBLEMS]
    assert unknown == []


CODE_SHAPE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")


def test_no_pass_or_repair_spells_a_code_as_a_string():
    """Codes are named as members of fsck.codes.Code; a code-shaped string literal elsewhere is a bypass."""
    spelt = []
    for p in sorted(FSCK.rglob("*.py")):
        if p.name in ("problems.py", "codes.py"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE_SHAPE.match(node.value):
                spelt.append(f"{p.relative_to(FSCK)}:{node.lineno} {node.value}")
    assert spelt == []


def test_the_code_scan_catches_a_misspelt_code(tmp_path):
    bad = tmp_path / "p9.py"
    bad.write_text('def run(ctx):\n    yield Finding("INDEX_MISPLACD", path="x")\n')
    assert [c for _, c in _code_strings_in(bad) if c not in PROBLEMS] == ["INDEX_MISPLACD"]


def test_a_misspelt_code_fails_when_named_and_at_construction():
    from bkdisk.fsck.codes import Code
    misspelt = "INDEX_MISPLACD"
    with pytest.raises(AttributeError):
        getattr(Code, misspelt)
    with pytest.raises(ValueError, match="INDEX_MISPLACD"):
        Finding("INDEX_MISPLACD")


def test_the_code_enum_is_what_the_problem_table_generates():
    from bkdisk.fsck.codes import Code
    from bkdisk.fsck.problems import codes_module
    assert (FSCK / "codes.py").read_text() == codes_module()
    assert [c.value for c in Code] == list(PROBLEMS)
    assert all(isinstance(c, str) and str(c) == f"{c}" == c.name for c in Code)


def test_a_finding_holds_its_code_as_the_enum_member_and_reports_the_code_text():
    from bkdisk.fsck.codes import Code
    f = Finding("INDEX_MISPLACED", path="x")
    assert f.code is Code.INDEX_MISPLACED
    assert f.to_json()["code"] == "INDEX_MISPLACED" and json.dumps(f.to_json()["code"]) == '"INDEX_MISPLACED"'
    assert f.line().split()[1] == "INDEX_MISPLACED"


def test_repairability_is_read_from_the_table_only():
    assert {p.repair for p in PROBLEMS.values()} - {None} == set(REPAIR_KINDS)
    for module in sorted((FSCK / "repair").glob("*.py")):
        src = module.read_text()
        for code, p in PROBLEMS.items():
            if p.repairable:
                assert f'"{code}"' not in src, f"repair/{module.name} repeats the code {code}"


def test_library_check_plan_apply_with_a_confirm_callback_and_recheck(tmp_path):
    d = make_disk(str(tmp_path))
    idx1 = d.written.index_files[LedgerId(0, 1)]
    idx255 = d.written.index_files[LedgerId(0, 255)]
    for p in (idx1, idx255):
        with open(p, "r+b") as f:
            f.write(bytes(4))
    opts = CheckOptions(metadata_dir=d.md_dir)
    before = check_bookie(d.dirs, opts)
    plan = plan_repairs(before)
    assert sorted(a.path for a in plan.todo) == sorted([idx1, idx255])
    asked = []

    def confirm(action):
        asked.append(action.path)
        return action.path == idx1          # decline the other
    run = apply_repairs(before, plan, confirm=confirm, backup_dir=str(tmp_path / "bk"))
    assert sorted(asked) == sorted([idx1, idx255])
    assert [a.path for a in run.done] == [idx1]
    assert {a.path: a.result for a in plan.actions}[idx255] == "declined"
    assert run.after is not None and run.exit_code == 4
    assert [f.path for f in errors(run.after) if f.code == "INDEX_HEADER_BAD"] == [idx255]
    assert [os.path.basename(p).split(".")[0] for p in run.backups] == ["1"]
    again = repair_bookie(d.dirs, opts, backup_dir=str(tmp_path / "bk"))
    assert again.exit_code == 1 and errors(again.after) == []
    assert errors(recheck(again.after)) == []


def test_move_and_cut_payloads_are_typed_fields():
    names = Finding.__dataclass_fields__
    assert names["move_to"].type in ("str | None",) and names["cut_at"].type in ("int | None",)


def _pass_modules(folder: Path) -> list[str]:
    """The modules in ``folder``: its ``*.py`` files and its packages (a pass with helpers of its own is one
    package, ``p5_crosscheck/``, the pass in its ``checks`` module)."""
    return sorted([p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
                  + [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()])


def _passes_shape(folder: Path) -> list[str]:
    """What breaks 'one module per numbered pass, named for it': modules in ``folder`` that are not
    ``p<N>_<name>`` for a pass of the table, and passes with no module or with more than one."""
    from bkdisk.fsck.problems import PASS_NAMES
    problems = []
    by_number: dict[int, list[str]] = {}
    for stem in _pass_modules(folder):
        m = re.fullmatch(r"p(\d+)_[a-z0-9_]+", stem)
        if m is None or int(m.group(1)) not in PASS_NAMES:
            problems.append(f"{stem}: not a numbered pass")
            continue
        by_number.setdefault(int(m.group(1)), []).append(stem)
    for n in PASS_NAMES:
        if len(by_number.get(n, [])) != 1:
            problems.append(f"pass {n}: modules {by_number.get(n, [])}")
    return problems


def test_each_numbered_pass_is_one_module_run_in_order():
    import bkdisk.fsck.api as api
    assert _passes_shape(FSCK / "passes") == []
    assert [(n, run.__module__) for n, run in api.PASSES] == [
        (n, f"bkdisk.fsck.passes.{m}" + (".checks" if (FSCK / "passes" / m).is_dir() else ""))
        for n, m in enumerate(_pass_modules(FSCK / "passes"), start=1)]


def reaches_into_a_pass(source: str) -> list[str]:
    """The pass modules ``source`` imports (at its top or in a function)."""
    return sorted(n for n in imported_names(source) if n.startswith("bkdisk.fsck.passes."))


def test_only_the_driver_imports_the_passes_repair_and_the_rest_of_fsck_stand_beside_them():
    # what a pass and a repair share (same_inode, ...) sits in fsck's own modules, beneath both
    outside = [p for p in sorted(FSCK.rglob("*.py")) if "passes" not in p.relative_to(FSCK).parts]
    assert any(p.parent.name == "repair" for p in outside)
    bad = [f"{p.relative_to(FSCK)} imports {n}" for p in outside if p.name != "api.py"
           for n in reaches_into_a_pass(p.read_text())]
    assert bad == []
    assert reaches_into_a_pass("def f():\n    from bkdisk.fsck.passes.p2_hierarchy import same_inode\n") == [
        "bkdisk.fsck.passes.p2_hierarchy", "bkdisk.fsck.passes.p2_hierarchy.same_inode"]


def pass_special_cases(source: str) -> list[str]:
    """Comparisons of a pass's number in ``source``: the driver treats every pass alike."""
    import ast
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(x, ast.Name) and x.id == "number"
                                                 for x in (node.left, *node.comparators)):
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
    return out


def test_the_driver_special_cases_no_pass():
    assert pass_special_cases((FSCK / "api.py").read_text()) == []
    assert pass_special_cases("if number == 7 and opts.metadata is None:\n    pass\n") == [
        "line 1: number == 7"]


def test_the_pass_shape_rule_catches_a_second_module_for_a_pass(tmp_path):
    for p in (FSCK / "passes").glob("*.py"):
        (tmp_path / p.name).write_text("")
    for p in (FSCK / "passes").glob("*/__init__.py"):
        (tmp_path / p.parent.name).mkdir()
        (tmp_path / p.parent.name / p.name).write_text("")
    (tmp_path / "p2_leftovers.py").write_text("")
    (tmp_path / "dbindex_join.py").write_text("")
    (tmp_path / "p5_more").mkdir()
    (tmp_path / "p5_more" / "__init__.py").write_text("")
    (tmp_path / "__pycache__").mkdir()   # a folder that is no package is no module
    assert _passes_shape(tmp_path) == ["dbindex_join: not a numbered pass",
                                       "pass 2: modules ['p2_hierarchy', 'p2_leftovers']",
                                       "pass 5: modules ['p5_crosscheck', 'p5_more']"]
