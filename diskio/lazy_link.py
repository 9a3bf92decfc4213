"""Kernels loaded from numba's cache without parsing the LLVM bitcode that only linking needs.

numba caches a kernel as its machine code and, beside it, the bitcode of the module a kernel being
compiled would link it from. Loading one parses that bitcode (LLVM's ParseBitcode: 1-2 ms a kernel,
some 30-40 ms of a check's start, more than the machine code's own load) only to learn the symbols it
defines. A kernel loaded from the cache links nothing: its machine code holds what it calls, but for
numba's runtime, which the engine resolves. A library loaded here keeps the bitcode as bytes until a
kernel being compiled links against it (a cache miss), and finds its entry point, when numba asks
for one, in the machine code the engine loaded.

``install`` makes this numba's library class for just-in-time code, once a process (``kernel``'s
cache does it before the first load: diskio.config.lean_cache_class). A library numba compiles is
made and used as before, and numba's runtime is loaded as numba loads it (diskio.nrt_cache: every
kernel compiled links it, so its bitcode is parsed, and refused, at its load). (numba is pinned to
0.68.x: tests/test_numba_cache.py checks this against it.)
"""
from __future__ import annotations

import functools
from typing import Any


@functools.cache
def install() -> None:
    from numba.core import codegen
    codegen.JITCPUCodegen._library_class = library_class()   # type: ignore[assignment]


@functools.cache
def library_class() -> type:
    import llvmlite.binding as ll
    from numba.core.codegen import JITCodeLibrary

    class LazyLinkLibrary(JITCodeLibrary):
        """numba's JIT library; one unserialized from machine code parses its bitcode when linked."""

        _bitcode: bytes | None = None   # the unparsed module for linking of a library loaded from the cache

        @classmethod
        def _unserialize(cls, codegen: Any, state: tuple) -> Any:
            name, kind, data = state
            if kind != "object":
                return super()._unserialize(codegen, state)
            object_code, bitcode = data
            self = codegen.create_library(name)
            self.enable_object_caching()
            self._set_compiled_object(object_code)
            self._bitcode = bitcode
            self._finalize_final_module()   # the engine loads the machine code
            return self

        def _get_module_for_linking(self) -> Any:
            if self._shared_module is None and self._bitcode is not None:
                self._shared_module = ll.parse_bitcode(self._bitcode)
                self._codegen._engine._load_defined_symbols(self._shared_module)
                self._bitcode = None
            return super()._get_module_for_linking()

        def get_pointer_to_function(self, name: str) -> int:
            self._ensure_finalized()
            engine = self._codegen._engine
            if engine.is_symbol_defined(name) or self._bitcode is None:
                return super().get_pointer_to_function(name)
            # Not parsed: the engine's symbols of the machine code it loaded say (0: none of that name).
            # A name is registered as defined once asked here: numba asks a library only for its own
            # names (entry points, wrappers), never another library for a loaded kernel's.
            address = engine._ee.get_function_address(name)
            if address:
                engine._defined_symbols.add(name)
            return address

    return LazyLinkLibrary
