"""``lazy_import``: a module a command names at the top of its file but loads only when it first uses it.

A command's ``--help``, its usage errors and its quick paths (a wrong path, a bad option value) must not
pay for numba, numpy, pyarrow, pyspark or gRPC, which take from a tenth of a second to seconds to import
(tests/test_startup.py checks which modules such a run loads). So the front ends bind those modules
once, at module level::

    pq = lazy_import("pyarrow.parquet")
    inventory = lazy_import("bkdisk.bookie.inventory")

and the import happens at the first attribute read (``pq.ParquetWriter``), once per process.

The stand-in is a module object whose ``__getattr__`` imports the real module and reads the name from it
at every use, so a name the module gains or changes later (a submodule imported afterwards, a test's
monkeypatch) is the one used. Each read costs a Python call: a loop over millions of rows binds what it
uses to a local first. ``importlib.util.LazyLoader`` is not
used: finding a dotted module's spec imports its parent package at once (``pyarrow`` for
``pyarrow.parquet``), which is the cost being avoided.

Only attribute reads load the module: ``from X import Y`` cannot be lazy, so the code using the stand-in
writes ``X.Y``. An import that is optional (an extra that may not be installed) or that a function needs
for another reason stays inside that function, with a comment saying why.
"""
from __future__ import annotations

import importlib
import types
from typing import Any


class LazyModule(types.ModuleType):
    """A stand-in for module ``name``, imported when one of its attributes is first read."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            # Probes such as copy's or pickle's (``__deepcopy__``, ``__reduce_ex__``) and tools listing
            # modules do not load the module.
            raise AttributeError(attr)
        module = self.__dict__.get("_lazy_module")
        if module is None:
            module = self.__dict__["_lazy_module"] = importlib.import_module(self.__name__)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self.__name__!r}>"


def lazy_import(name: str) -> Any:
    """A stand-in for the module ``name`` (absolute, dotted), imported at its first attribute read.

    Typed ``Any``: the stand-in behaves as the module wherever an attribute is read."""
    return LazyModule(name)
