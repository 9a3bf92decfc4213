"""pyarrow without pandas: pyarrow loads pandas (when installed) at its first conversion of Python
values, its first ``to_numpy`` and its first zoned timestamp made a datetime, and the import alone
(a few tenths of a second, 35 MiB) is a good part of a small disk's scan. The disk scans never hand
pyarrow a pandas object, so the processes that run them tell pyarrow there is none."""
from __future__ import annotations

import importlib.abc
import sys

import pyarrow as pa


class _WithoutPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not loaded by this command", name=name)
        return None


def arrow_without_pandas() -> None:
    """Have pyarrow convert without pandas in this process (and the children it forks). pyarrow looks
    for pandas once a process, at its first conversion of Python values (its Python layer, and its C++
    helpers when they infer a type), and remembers what it found: here it finds none. For a command
    that never hands pyarrow a pandas object; an explicit ``to_pandas`` still loads it."""
    if "pandas" in sys.modules:
        return
    finder = _WithoutPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([])   # no type given: the type inferred, so both layers look
    finally:
        sys.meta_path.remove(finder)
