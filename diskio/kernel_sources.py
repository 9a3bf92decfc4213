"""The source files a kernel's machine code may come from, and the stamp its cache is kept under.

numba keys a cached kernel on the bytes of the file that defines it, and nothing else: a helper it
inlines from another file (an inline kernel, an intrinsic, a constant it folds in, a constant made from
another module's) can change and the caller's cached code is still loaded, with the helper's old
version in it. A kernel's code can only come from its own file and the project's modules that file
imports, and theirs, however deep; the stamp here is a hash of the bytes of all of them, read from
their own ``import`` lines (modules imported before any kernel of theirs is declared: the same set in
every process, found without importing anything), each file's bytes as this
process first read them, when the kernel was declared (so code compiled from an older file is never
kept under a newer file's stamp). Paths do not count: a checkout imported two ways (an install, a
tree of links to it) shares one cache. A change to any of the files compiles the kernel again; a file
touched but not changed does not.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from collections.abc import Callable

PROJECT = "bkdisk"
# A module's own imports (not those inside its functions, or under ``if TYPE_CHECKING:``): imported
# before any kernel of it is declared, and the only ones its kernels can take code from.
_FROM = re.compile(r"^from[ \t]+(" + PROJECT + r"(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^import[ \t]+(" + PROJECT + r"(?:\.\w+)*)", re.M)


def _module_file(module_name: str) -> str | None:
    """The source file of the project's module ``module_name``, imported; None for any other (nothing is
    imported here: finding a module's file would import its package)."""
    if module_name != PROJECT and not module_name.startswith(PROJECT + "."):
        return None
    path = getattr(sys.modules.get(module_name), "__file__", None)
    return path if path is not None and path.endswith(".py") else None


@functools.cache
def _read(path: str) -> bytes | None:
    """The bytes of ``path`` as this process first read them (None: it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


@functools.cache
def _hash(path: str) -> bytes | None:
    data = _read(path)
    return None if data is None else hashlib.sha256(data).digest()


@functools.cache
def imported_files(path: str) -> frozenset[str]:
    """The source files of the project's modules the file ``path`` imports (a package's ``__init__`` and,
    for ``from package import module``, the module's)."""
    data = _read(path)
    if data is None:
        return frozenset()
    text = data.decode("utf-8", "replace")
    modules = set(_IMPORT.findall(text))
    for m in _FROM.finditer(text):
        modules.add(m.group(1))
        if _is_package(m.group(1)):   # (a name imported from a package may be a module of it)
            names = " ".join(line.split("#")[0] for line in m.group(2).strip("()").splitlines())
            modules.update(f"{m.group(1)}.{part.split()[0]}" for part in names.split(",") if part.split())
    return frozenset(f for f in map(_module_file, modules) if f is not None)


def _is_package(module_name: str) -> bool:
    path = _module_file(module_name)
    return path is not None and os.path.basename(path) == "__init__.py"


@functools.cache
def _closure(path: str) -> frozenset[str]:
    seen, todo = set(), [path]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(imported_files(p))
    return frozenset(seen)


def source_files(py_func: Callable) -> frozenset[str]:
    """The files the machine code of the kernel ``py_func`` may come from: its own, and every one of the
    project's that it imports, however deep (named as its module names them, as the imports' are)."""
    return _closure(py_func.__code__.co_filename)


def source_stamp(py_func: Callable) -> bytes | None:
    """A hash of the distinct bytes of the files of ``source_files(py_func)`` (those that can be read);
    None when the kernel's own file cannot be (a zip install: numba's own stamp then stands)."""
    if _hash(py_func.__code__.co_filename) is None:
        return None
    hashes = sorted({h for h in map(_hash, source_files(py_func)) if h is not None})
    return hashlib.sha256(b"".join(hashes)).digest()
