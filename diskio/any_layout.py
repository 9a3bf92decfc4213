"""Kernels compiled once for arrays of any layout, whatever mix of strided and contiguous arrays a call gives.

numba compiles a kernel once per argument types, and an array's type holds its layout: 'C' where numpy
flags the array contiguous, 'A' otherwise. A column of a table of records is strided ('A'), but the same
column of a one-row part is contiguous (numpy flags any array of one element so), as is a part read back
from a spill or an array a pass builds; each mix of the two across a kernel's arguments is a variant of
its own, compiled (seconds) on the first run that meets it. No warm-up meets every mix, so a kernel given
such columns is made ``any_layout``: those arguments (or all) are typed 'A', the layout that reads through
the strides, as a strided column is read anyway, and every mix runs the one variant, loaded from the
cache or compiled once. The arguments a kernel only indexes at random or makes itself keep the layout a
call gives (a contiguous one lets LLVM drop the stride).

The arguments' exact types are then registered as another name of that variant in numba's table of
overloads (what ``Dispatcher.add_overload`` registers for a compiled one), so later calls of that mix are
found by numba's own dispatch and do not come back here. (numba is pinned to 0.68.x: tests/test_numba_cache.py.)
"""
from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import Any

from numba.core import sigutils, types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import CPUDispatcher


def any_layout(dispatcher: Any, names: Collection[str] | None = None) -> Any:
    """``dispatcher`` (a kernel made by ``njit``), compiling one variant for arrays of any layout: its array
    arguments named in ``names`` (every one when None; the others keep the layout a call gives)."""
    dispatcher.__class__ = AnyLayoutDispatcher
    params = list(inspect.signature(dispatcher.py_func).parameters)
    dispatcher._general_at = frozenset(range(len(params)) if names is None else map(params.index, names))
    return dispatcher


def _general(t: Any) -> Any:
    return t.copy(layout="A") if isinstance(t, types.Array) and t.layout != "A" else t


class AnyLayoutDispatcher(CPUDispatcher):
    _general_at: frozenset[int] = frozenset()

    def compile(self, sig: Any) -> Any:
        args, return_type = sigutils.normalize_signature(sig)
        wide = tuple(_general(a) if i in self._general_at else a for i, a in enumerate(args))
        if wide == args:
            return super().compile(sig)
        with global_compiler_lock:
            entry = super().compile(wide if return_type is None else return_type(*wide))
            named = self.__dict__.setdefault("_layout_aliases", set())
            if args not in named:
                named.add(args)
                self._insert([a._code for a in args], entry, False)   # type: ignore[attr-defined]
            return entry

    # Pickled (to another process) with the arguments it types 'A' (numba's ReduceMixin protocol).
    def _reduce_states(self) -> dict:
        return {**super()._reduce_states(), "general_at": sorted(self._general_at)}   # type: ignore[misc]

    @classmethod
    def _rebuild(cls, general_at: list[int], **states: Any) -> Any:
        self = super()._rebuild(**states)   # type: ignore[misc]
        self._general_at = frozenset(general_at)
        return self
