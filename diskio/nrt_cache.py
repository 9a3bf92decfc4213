"""numba's runtime (NRT) made ready for kernels loaded from the cache, its machine code cached too.

A kernel's machine code calls numba's runtime functions (reference counts, an array's data), which
numba compiles from LLVM IR in every process before the first kernel runs: some 18 ms of each
command's start, for a few dozen instructions that never change. The first process compiles them as
numba does (``nrtdynmod.create_nrt_module``), keeping the object code, and writes it beside the
kernels' cache, under a name that carries numba's, llvmlite's and Python's versions and the compile
target (numba's ``magic_tuple``: triple, CPU name and features); later processes load it (~3 ms), as
numba loads a kernel's, its bitcode parsed (every kernel compiled later links it). A file that cannot
be read, is not whole (its SHA-256 is checked before LLVM sees a byte of it) or does not parse is not
used: the runtime is compiled as numba compiles it. The file is numpy's ``.npz`` of the library's
name, object code and bitcode and their SHA-256, read without pickle.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from typing import Any

import numpy as np

_PARTS = ("name", "object_code", "bitcode")


def initialized(target_context: Any, folder: str | None) -> None:
    """numba's runtime ready (once a process): loaded from ``folder`` (a kernel's cache folder) when a
    whole file for this numba and target is there, else compiled, and written there for later processes."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import nrt
    if nrt.rtsys._init:
        return
    with global_compiler_lock:
        if nrt.rtsys._init:
            return
        _register_helpers()
        codegen = target_context.codegen()
        path = None if folder is None else os.path.join(folder, f"bkdisk-nrt-{_key(codegen)}.npz")
        library = None if path is None else _load(codegen, path)
        if library is None:
            library = _compile(target_context, path)
        nrt.rtsys._library = library
        nrt.rtsys._init = True


def _register_helpers() -> None:
    """The runtime's C functions under the names the compiled code calls (as numba's initialize does)."""
    from llvmlite import binding as ll
    from numba.core import config
    from numba.core.runtime import _nrt_python  # type: ignore[attr-defined]
    if config.NRT_STATS:  # type: ignore[attr-defined]
        _nrt_python.memsys_enable_stats()
    for py_name, address in _nrt_python.c_helpers.items():
        ll.add_symbol(py_name if py_name.startswith("_") else "NRT_" + py_name, address)


def _key(codegen: Any) -> str:
    import llvmlite
    import numba
    what = repr((numba.__version__, llvmlite.__version__, sys.version, codegen.magic_tuple()))
    return hashlib.sha256(what.encode()).hexdigest()[:20]


def _digest(parts: list[bytes]) -> bytes:
    h = hashlib.sha256()
    for part in parts:   # (each behind its length: the parts cannot shift into one another)
        h.update(b"%d:" % len(part))
        h.update(part)
    return h.digest()


def _load(codegen: Any, path: str) -> Any | None:
    try:
        with np.load(path, allow_pickle=False) as f:
            parts = [f[k].tobytes() for k in _PARTS]
            digest = f["sha256"].tobytes()
    except Exception:   # noqa: BLE001 - missing, cut short, not numpy's: compiled instead
        return None
    if digest != _digest(parts):
        return None
    name, object_code, bitcode = parts
    from numba.core.codegen import JITCodeLibrary
    try:
        # numba's own load, the bitcode parsed before the machine code is added (not diskio.lazy_link's):
        # every kernel compiled links the runtime, so bitcode that does not parse must fail here.
        return JITCodeLibrary._unserialize(codegen, (name.decode(), "object", (object_code, bitcode)))
    except Exception:   # noqa: BLE001 - a file LLVM refuses: compiled instead
        return None


def _compile(target_context: Any, path: str | None) -> Any:
    from numba.core.runtime import nrtdynmod
    ir_module, library = nrtdynmod.create_nrt_module(target_context)
    library.enable_object_caching()
    library.add_ir_module(ir_module)
    library.finalize()
    if path is not None:
        name, _kind, (object_code, bitcode) = library.serialize_using_object_code()
        _write(path, [name.encode(), bytes(object_code), bytes(bitcode)])
    return library


def _write(path: str, parts: list[bytes]) -> None:
    """``parts`` (_PARTS) and their digest as the ``.npz`` ``path``, whole or not at all; a folder that
    cannot take it is left as it is."""
    name, object_code, bitcode = (np.frombuffer(p, np.uint8) for p in parts)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".bkdisk-nrt-", dir=os.path.dirname(path))
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, name=name, object_code=object_code, bitcode=bitcode,
                     sha256=np.frombuffer(_digest(parts), np.uint8))
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
