"""No import cycle between the project's modules, counting every import, not only those at a module's top.

An import inside a function body still makes its module depend on the other one: two modules that import
each other that way form a cycle the layering test (top-level imports only) cannot see. The graph here has
an edge for every import of a project module: module top, function bodies, ``lazy_import("bkdisk....")``
and ``importlib.import_module("bkdisk....")`` strings (and the module names of a dynamic import table: a
module calling ``import_module`` with a computed name depends on every project module its strings name).
Imports under ``if TYPE_CHECKING:`` are for the type checker only and left aside.

``STILL_TO_BREAK`` lists the cycles that sit in code being reworked elsewhere; the list only shrinks: a
cycle not in it fails, and so does a listed cycle that no longer exists.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.test_layering import LAYER, ROOT

STILL_TO_BREAK: list[frozenset[str]] = []


def _module_files() -> dict[str, Path]:
    """Installed module name -> file, by the mapping pyproject.toml declares (``fsck/api.py`` is
    ``bkdisk.fsck.api``; ``bkdisk/cli.py`` is ``bkdisk.cli``)."""
    out = {}
    for pkg in LAYER:
        if pkg == "bench":
            continue
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if p.name.endswith("_pb2.py") or ".venv" in p.parts:
                continue
            parts = list(p.relative_to(ROOT / pkg).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            prefix = ["bkdisk"] if pkg == "bkdisk" else ["bkdisk", pkg]
            out[".".join(prefix + parts)] = p
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` except the bodies of ``if TYPE_CHECKING:`` (their ``else`` is kept)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _walk(other)
            continue
        yield child
        yield from _walk(child)


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def imported_names(source: str, here: str = "") -> set[str]:
    """Every dotted name ``source`` imports or loads by name; ``from X import y`` gives ``X`` and ``X.y``
    (the caller keeps whichever is a module). ``here`` is the importing module, for relative imports."""
    tree = ast.parse(source)
    out: set[str] = set()
    dynamic = False
    strings: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: -node.level]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Call) and _call_name(node) in ("lazy_import", "import_module"):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.add(arg.value)
            elif _call_name(node) == "import_module":
                dynamic = True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("bkdisk."):
            strings.add(node.value)
    return out | strings if dynamic else out


def import_graph(files: dict[str, Path] | None = None,
                 sources: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the project modules it imports (a module also depends on the packages above it)."""
    files = _module_files() if files is None else files
    texts = sources if sources is not None else {m: p.read_text() for m, p in files.items()}
    known = set(texts)
    graph: dict[str, set[str]] = {}
    for mod, text in texts.items():
        here = mod if files.get(mod, Path()).name != "__init__.py" else mod + ".__init__"
        deps = set()
        for name in imported_names(text, here):
            parts = name.split(".")
            for i in range(2, len(parts) + 1):
                if ".".join(parts[:i]) in known:
                    deps.add(".".join(parts[:i]))
        graph[mod] = deps - {mod}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of two or more modules (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.add(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _show(c: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(c)) + "}"


def test_no_import_cycle_but_the_listed_ones_and_every_listed_one_still_exists():
    graph = import_graph()
    assert len(graph) > 150 and sum(map(len, graph.values())) > 300, "the scan found too little to mean anything"
    found = cycles(graph)
    new = [_show(c) for c in found if c not in STILL_TO_BREAK]
    gone = [_show(c) for c in STILL_TO_BREAK if c not in found]
    assert new == [], "import cycles (move what both sides need down a layer): " + "; ".join(new)
    assert gone == [], "cycles broken or changed: take them off STILL_TO_BREAK: " + "; ".join(gone)


def test_the_graph_sees_function_body_lazy_and_dynamic_imports_but_not_type_checking_ones():
    sources = {
        "bkdisk.a": "def f():\n    from bkdisk.b import x\n",
        "bkdisk.b": "from bkdisk.commandline.lazy import lazy_import\nc = lazy_import('bkdisk.c')\n",
        "bkdisk.c": "import importlib\nT = {'a': ('bkdisk.a', 'f')}\ndef g(n):\n    importlib.import_module(T[n][0])\n",
        "bkdisk.d": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import bkdisk.e\n",
        "bkdisk.e": "import bkdisk.d\n",
    }
    graph = import_graph({}, sources)
    assert graph == {"bkdisk.a": {"bkdisk.b"}, "bkdisk.b": {"bkdisk.c"}, "bkdisk.c": {"bkdisk.a"},
                     "bkdisk.d": set(), "bkdisk.e": {"bkdisk.d"}}
    assert cycles(graph) == [frozenset({"bkdisk.a", "bkdisk.b", "bkdisk.c"})]
