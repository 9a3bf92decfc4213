"""Run-time configuration of the jitted kernels: numba's cache folder, CPU features, the CRC variant.

Everything here is resolved on first use and then kept (``functools.cache``), never at import, so
no module depends on which one is imported first:

* Kernels load from numba's cache without refreshing numba's registries first (``LeanCache``).
* ``BKDISK_NUMBA_CACHE_DIR``, when set, becomes numba's cache folder (``NUMBA_CACHE_DIR``) for
  read-only installs or a cache shared between processes. It is applied by ``kernel`` before the
  first kernel is decorated (numba picks a dispatcher's cache folder when it is decorated), and
  written into numba's parsed config too, so it holds even when numba was imported earlier.
* The CPU features numba compiles for (its ``NUMBA_CPU_FEATURES`` override, else the host's).
* ``crc_variant()``: the fastest CRC implementation the target supports, or a lower one forced by
  ``BKDISK_CRC=table|pclmul|vpclmul``. Callers that want another pass it explicitly
  (``DigestPlan(crc_variant=...)``); nothing reads the environment again.

``cycle_collector_paused`` is the one process-wide setting a scan command makes for itself.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import os
import platform
from typing import Callable

CRC_TABLE, CRC_PCLMUL, CRC_VPCLMUL = 0, 1, 2
CRC_VARIANT_NAMES = {CRC_TABLE: "table", CRC_PCLMUL: "pclmul", CRC_VPCLMUL: "vpclmul"}

# nopython always; nogil so fsck's --jobs threads run kernels in parallel; cached across processes.
JIT_OPTIONS = dict(nogil=True, cache=True, boundscheck=False)


@functools.cache
def numba_cache_dir() -> str | None:
    """Apply ``BKDISK_NUMBA_CACHE_DIR`` (once) and return the cache folder in force, if any."""
    wanted = os.environ.get("BKDISK_NUMBA_CACHE_DIR")
    from numba.core import config as numba_config
    if wanted:
        os.environ["NUMBA_CACHE_DIR"] = wanted
        numba_config.CACHE_DIR = wanted
    return numba_config.CACHE_DIR or None


def kernel(fn: Callable) -> Callable:
    """``numba.njit(**JIT_OPTIONS)``, with the cache folder resolved first and a ``LeanCache``."""
    numba_cache_dir()
    from numba import njit
    dispatcher = njit(**JIT_OPTIONS)(fn)
    dispatcher._cache = lean_cache_class()(dispatcher.py_func)
    return dispatcher


@functools.cache
def lean_cache_class() -> type:
    """numba's per-function cache, loading a cached kernel without the registry refresh.

    numba refreshes its target context before every load from the cache: that imports and installs
    every implementation numba has (linalg, random, typed containers...), 0.2-0.3 s of each command's
    start-up spent on compiler tables that machine code already compiled never uses. A load only
    needs numba's runtime (NRT) symbols, which the compiled code links against; a cache miss goes
    through numba's compiler, which refreshes the contexts itself. (numba is pinned to 0.68.x:
    tests/test_numba_cache.py checks this against it.)
    """
    from numba.core.caching import FunctionCache
    from numba.core.runtime import nrt

    class LeanCache(FunctionCache):
        def load_overload(self, sig, target_context):
            nrt.rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

    return LeanCache


@functools.cache
def target_features() -> frozenset[str]:
    """CPU features numba compiles for (its config override, else the host's); empty off x86-64."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    from numba.core import config as numba_config
    feats = numba_config.CPU_FEATURES
    if feats is None:
        import llvmlite.binding as ll
        feats = ll.get_host_cpu_features().flatten()
    return frozenset(f[1:] for f in feats.split(",") if f.startswith("+"))


def has_pclmul() -> bool:
    return {"pclmul", "sse4.1"} <= target_features()


def has_vpclmul() -> bool:
    return has_pclmul() and {"vpclmulqdq", "avx2"} <= target_features()


def best_crc_variant() -> int:
    return CRC_VPCLMUL if has_vpclmul() else CRC_PCLMUL if has_pclmul() else CRC_TABLE


def supported_crc_variants() -> list[int]:
    return list(range(best_crc_variant() + 1))


@functools.cache
def crc_variant() -> int:
    """The CRC variant digest checks use unless told otherwise: the best supported, or ``BKDISK_CRC``."""
    want = os.environ.get("BKDISK_CRC", "").strip().lower()
    best = best_crc_variant()
    for code, name in CRC_VARIANT_NAMES.items():
        if want == name:
            return min(code, best)
    return best


@contextlib.contextmanager
def cycle_collector_paused():
    """Pause Python's cyclic garbage collector for a scan command's work (also a decorator).

    A scan keeps most of what it makes until it ends (per-ledger tables, findings), beside numba's
    and numpy's many import-time objects, and each of the collector's passes walks them all again:
    9 % of a fsck of 200,000 ledgers (5.55 -> 5.06 s), for about 800 objects left in cycles at the
    end. Reference counting frees the rest as before. Objects that exist on entry are frozen out of
    the collector's sight; both are undone on exit, for callers in a long-lived process (tests, a
    Spark worker).
    """
    enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()
