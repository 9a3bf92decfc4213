"""Run-time configuration of the jitted kernels: numba's cache folder, CPU features, the CRC variant.

Everything here is resolved on first use and then kept (``functools.cache``), never at import, so
no module depends on which one is imported first:

* Kernels load from numba's cache without refreshing numba's registries first (``LeanCache``),
  kept under the stamp of every file their code may come from (diskio.kernel_sources), not their
  own file's alone.
* A kernel allocates no array, assigns no slice and formats no message: each gives its machine code
  an environment naming numba's array and string implementations, which a load from the cache then
  imports (some 30 ms of a command's start); callers pass the arrays a kernel fills
  (tests/test_kernel_environments.py).
* ``BKDISK_NUMBA_CACHE_DIR``, when set, becomes numba's cache folder (``NUMBA_CACHE_DIR``) for
  read-only installs or a cache shared between processes. It is applied by ``kernel`` before the
  first kernel is decorated (numba picks a dispatcher's cache folder when it is decorated), and
  written into numba's parsed config too, so it holds even when numba was imported earlier.
* The CPU features numba compiles for (its ``NUMBA_CPU_FEATURES`` override, else the host's).
* ``crc_variant()``: the fastest CRC implementation the target supports, or a lower one forced by
  ``BKDISK_CRC=table|pclmul|vpclmul|sse42``. Callers that want another pass it explicitly
  (``DigestPlan(crc_variant=...)``); nothing reads the environment again.

``collector_eased`` is the one process-wide setting a scan command makes for itself.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import os
import platform
import threading
from collections.abc import Callable
from typing import Any

CRC_TABLE, CRC_PCLMUL, CRC_VPCLMUL, CRC_SSE42 = 0, 1, 2, 3
CRC_VARIANT_NAMES = {CRC_TABLE: "table", CRC_PCLMUL: "pclmul", CRC_VPCLMUL: "vpclmul", CRC_SSE42: "sse42"}

# nopython always; nogil so fsck's --jobs threads run kernels in parallel. Cached across processes:
# ``kernel`` gives each its cache (a LeanCache) itself.
JIT_OPTIONS: dict[str, Any] = dict(nogil=True, boundscheck=False)


@functools.cache
def numba_cache_dir() -> str | None:
    """Apply ``BKDISK_NUMBA_CACHE_DIR`` (once) and return the cache folder in force, if any. With none
    given, where numba could cache neither beside the sources (a read-only install) nor in the user's
    cache folder (no home): ``<tmp>/bkdisk-numba-<uid>``, when that is this user's own folder."""
    wanted = os.environ.get("BKDISK_NUMBA_CACHE_DIR")
    from numba.core import config as numba_config
    if not wanted and not numba_config.CACHE_DIR and not _numba_folders_writable():   # type: ignore[attr-defined]
        import tempfile
        wanted = private_folder(os.path.join(tempfile.gettempdir(), f"bkdisk-numba-{os.getuid()}"))
    if wanted:
        os.environ["NUMBA_CACHE_DIR"] = wanted
        numba_config.CACHE_DIR = wanted   # type: ignore[attr-defined]
    return numba_config.CACHE_DIR or None   # type: ignore[attr-defined]


def _numba_folders_writable() -> bool:
    """Whether numba's own cache folders can be written: the sources' (its first choice), or the user's."""
    if os.access(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.W_OK):
        return True
    from numba.misc.appdirs import AppDirs
    user = AppDirs(appname="numba", appauthor=False).user_cache_dir
    try:
        os.makedirs(user, exist_ok=True)
    except OSError:
        return False
    return os.access(user, os.W_OK)


def private_folder(path: str) -> str | None:
    """``path`` made (0700) or found as a folder of this user's that no one else can write, else None:
    what is cached there is loaded as code."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    import stat
    mine = stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
    return path if mine else None


def kernel(fn: Callable | None = None, *, any_layout: bool | tuple[str, ...] = False, **options: Any) -> Any:
    """``numba.njit(**JIT_OPTIONS, cache=True)``, with the cache folder resolved first and a
    ``LeanCache`` as the cache (the only one made: ``cache=True`` would make numba's own first).
    Where no cache folder can be written, the kernel compiles in each process (said once, on stderr).
    ``any_layout``: one variant for arrays of any layout (diskio.any_layout), for a kernel given columns
    that are strided in one call and contiguous in another (``@kernel(any_layout=True)``), or for those
    of its arguments named (a tuple of names)."""
    if fn is None:
        return functools.partial(kernel, any_layout=any_layout, **options)
    numba_cache_dir()
    from numba import njit
    dispatcher = njit(**JIT_OPTIONS, **options)(fn)
    if any_layout:
        from bkdisk.diskio.any_layout import any_layout as layout_free
        dispatcher = layout_free(dispatcher, any_layout if isinstance(any_layout, tuple) else None)
    try:
        dispatcher._cache = lean_cache_class()(dispatcher.py_func)
    except RuntimeError as e:   # (numba: no cache locator available)
        _uncached(str(e))
    return dispatcher


_said_uncached: list[bool] = []


def _uncached(why: str) -> None:
    """Say once a process that the kernels are not cached (numba's reason: ``why``)."""
    if _said_uncached:
        return
    _said_uncached.append(True)
    import sys
    print(f"bkdisk: warning: no writable cache folder for numba ({why.split(':')[-1].strip()}); the kernels "
          "compile on every run (set BKDISK_NUMBA_CACHE_DIR to a folder of your own)", file=sys.stderr)


def intrinsic(fn: Callable) -> Any:
    """numba's ``intrinsic``: ``fn(typingctx, *args)`` gives the signature and the code generator of
    ``f(*args)``. Typed ``Any``, as kernels call it without the typing context its definition takes first."""
    from numba.core.extending import intrinsic as numba_intrinsic
    return numba_intrinsic(fn)


def inline_kernel(fn: Callable) -> Callable:
    """A kernel that other kernels call once an entry or more: numba inlines it into each caller
    before compiling, so the call costs nothing and LLVM optimises it with the caller's loop. (Called
    from Python it is a kernel like any other.)"""
    return kernel(fn, inline="always")


@functools.cache
def lean_cache_class() -> type:
    """numba's per-function cache, loading a cached kernel without the registry refresh.

    numba refreshes its target context before every load from the cache: that imports and installs
    every implementation numba has (linalg, random, typed containers...), 0.2-0.3 s of each command's
    start-up spent on compiler tables that machine code already compiled never uses. A load only
    needs numba's runtime (NRT) symbols, which the compiled code links against (their machine code
    cached as well: diskio.nrt_cache), and no kernel's bitcode is parsed (diskio.lazy_link); a cache miss goes
    through numba's compiler, which refreshes the contexts itself. A plain array argument is typed
    without loading ``numpy.ma`` (diskio.array_typeof). (numba is pinned to 0.68.x:
    tests/test_numba_cache.py checks this against it.)
    """
    from numba.core.caching import CompileResultCacheImpl, FunctionCache

    from bkdisk.diskio import array_typeof, lazy_link, nrt_cache
    from bkdisk.diskio.kernel_sources import source_stamp
    _untimed_llvm_calls()
    lazy_link.install()   # (before the first kernel's load)
    array_typeof.install()   # (before the first call)

    class LeanImpl(CompileResultCacheImpl):
        _locator_classes = [_probed_once(c) for c in CompileResultCacheImpl._locator_classes]

    class LeanCache(FunctionCache):
        """(Kept under the stamp of every source file the kernel's code may come from, not its own
        file's alone: diskio.kernel_sources.)"""
        _impl_class = LeanImpl

        def __init__(self, py_func):
            super().__init__(py_func)
            stamp = source_stamp(py_func)
            if stamp is not None:
                self._cache_file._source_stamp = stamp

        def load_overload(self, sig, target_context):
            nrt_cache.initialized(target_context, self._cache_path)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

    return LeanCache


def _untimed_llvm_calls() -> None:
    """Drop numba's timing of LLVM's lock: two Python callbacks around every llvmlite call, for the
    "llvm_lock" figure of its compile reports. Loading a check's kernels makes some 3,000 such calls,
    ~10 ms of every command's start, for a figure nothing here reads."""
    from llvmlite.binding import ffi
    for acquire, release in list(ffi.lib._lock._cblist):
        if getattr(acquire, "__module__", None) == "numba.core.base":
            ffi.unregister_lock_callback(acquire, release)


_probed: dict[str, OSError | None] = {}   # cache folder -> why it cannot be used (None: it can)


def _probed_once(locator: type[Any]) -> type[Any]:
    """numba's cache locator ``locator``, probing a cache folder (made if missing, a file written and
    removed to see that it is writable) once a process instead of once a kernel: the kernels of one
    source folder share a cache folder. A folder that failed the probe fails it again, so numba moves
    to its next locator as it would."""

    class ProbedOnce(locator):
        def ensure_cache_path(self) -> None:
            path = self.get_cache_path()
            if path not in _probed:
                try:
                    super().ensure_cache_path()
                    _probed[path] = None
                except OSError as e:
                    _probed[path] = e
            why = _probed[path]
            if why is not None:
                raise why

    ProbedOnce.__name__ = ProbedOnce.__qualname__ = locator.__name__
    return ProbedOnce


@functools.cache
def target_features() -> frozenset[str]:
    """CPU features numba compiles for (its config override, else the host's); empty off x86-64."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    from numba.core import config as numba_config
    feats = numba_config.CPU_FEATURES   # type: ignore[attr-defined]
    if feats is None:
        import llvmlite.binding as ll
        feats = ll.get_host_cpu_features().flatten()
    return frozenset(f[1:] for f in feats.split(",") if f.startswith("+"))


def has_pclmul() -> bool:
    return {"pclmul", "sse4.1"} <= target_features()


def has_vpclmul() -> bool:
    return has_pclmul() and {"vpclmulqdq", "avx2"} <= target_features()


def has_crc32_instruction() -> bool:
    """SSE4.2's ``crc32`` (CRC32C only), which LLVM names a feature of its own."""
    return {"sse4.2", "crc32"} <= target_features()


def supported_crc_variants() -> list[int]:
    """The CRC variants the target can run, slowest first (``sse42`` folds its longest runs: it needs PCLMUL)."""
    return [CRC_TABLE] + [CRC_PCLMUL] * has_pclmul() + [CRC_VPCLMUL] * has_vpclmul() + \
        [CRC_SSE42] * (has_pclmul() and has_crc32_instruction())


def best_crc_variant() -> int:
    return supported_crc_variants()[-1]


@functools.cache
def crc_variant() -> int:
    """The CRC variant digest checks use unless told otherwise: the best supported, or ``BKDISK_CRC``."""
    want = os.environ.get("BKDISK_CRC", "").strip().lower()
    for code, name in CRC_VARIANT_NAMES.items():
        if want == name:
            return max(v for v in supported_crc_variants() if v <= code)
    return best_crc_variant()


# Allocations between two collections of the young generation while a scan runs (Python's default: 700)
YOUNG_COLLECTION_EVERY = 100_000


class _Pause:
    """Who is inside collector_eased, and the collector as the first of them found it."""
    lock = threading.Lock()
    inside = 0
    threshold: tuple[int, ...] = (700, 10, 10)
    was_frozen = False
    heap_set = False   # large_blocks_returned ran (once a process)
    huge_advice: bool | None = None   # numpy's huge-page advice before arrays_in_small_pages, to give back


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3   # glibc's mallopt parameters
MMAP_THRESHOLD = 8 << 20
TRIM_THRESHOLD = 64 << 20


def large_blocks_returned() -> None:
    """Allocate blocks of 8 MiB and more (numpy's per-file arrays) with mmap, so that freeing one gives
    its memory back. glibc raises its threshold after each large free (up to 32 MiB per thread arena),
    and the arrays a scan frees and makes again then stay in the heaps, raising a check's peak. Setting it
    fixes the threshold. Not lower: the arrays of one window (a few MiB) then come from the heap and are reused
    window after window, where a map of their own is zero-filled page by page every time.

    Setting it would also fix the trim threshold at glibc's default of 128 KiB, so the arrays of a
    window, freed at the top of a heap, would go back to the system after every window and come back
    zero-filled for the next one; so the trim threshold is set too: up to TRIM_THRESHOLD of free
    memory stays with each heap."""
    if _Pause.heap_set:
        return
    _Pause.heap_set = True
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError):
        pass   # not glibc: its own policy stands


def free_heap_returned() -> None:
    """Give the free memory inside malloc's heaps back to the system (glibc's ``malloc_trim``). A
    finished step's blocks below MMAP_THRESHOLD, freed between blocks still in use or within
    TRIM_THRESHOLD of a heap's top, stay resident, and the next step's peak stands on them; fsck
    calls this where one pass's working set gives way to the next's. Elsewhere than glibc: nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        import ctypes
        trim = ctypes.CDLL(None).malloc_trim
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        return trim
    except (OSError, AttributeError, TypeError):   # (TypeError: no C library to open by None)
        return None


@contextlib.contextmanager
def collector_eased():
    """Ease Python's cyclic garbage collector for a scan command's work (also a decorator).

    A scan keeps most of what it makes until it ends (per-ledger tables, findings), beside numba's
    and numpy's many import-time objects, and the collector's passes would walk them all again and
    again. Here the objects alive on entry are frozen out of its sight and the young generation is
    collected every YOUNG_COLLECTION_EVERY allocations instead of 700. Collection still runs, so
    memory stays bounded where parsing leaves a cycle per ledger (construct does, on DbLedgerStorage
    bookies). The last caller out (callers may nest or overlap on threads) gives the collector back
    as the first found it, for a long-lived process (tests, a Spark worker): its thresholds, and
    thawed unless the process had frozen objects itself.
    """
    with _Pause.lock:
        if _Pause.inside == 0:
            large_blocks_returned()
            _Pause.was_frozen, _Pause.threshold = gc.get_freeze_count() > 0, gc.get_threshold()
            gc.freeze()
            gc.set_threshold(YOUNG_COLLECTION_EVERY, *_Pause.threshold[1:])
        _Pause.inside += 1
    try:
        yield
    finally:
        with _Pause.lock:
            _Pause.inside -= 1
            if _Pause.inside == 0:
                gc.set_threshold(*_Pause.threshold)
                if _Pause.huge_advice is not None:
                    _numpy_huge_advice(_Pause.huge_advice)
                    _Pause.huge_advice = None
                if not _Pause.was_frozen:
                    gc.unfreeze()


def freeze_loaded() -> None:
    """Inside collector_eased: freeze what has been made since it froze the objects alive on entry, such as
    the modules a command loads only once its arguments are checked (numba, numpy and the scanners,
    a hundred thousand objects that the next young collection would otherwise walk, on the thread
    every other waits for). Outside it, nothing: a long-lived process's collector is left as it is."""
    with _Pause.lock:
        if _Pause.inside:
            gc.freeze()


def arrays_in_small_pages() -> None:
    """Inside collector_eased: numpy's arrays in the system's small pages, without the huge-page advice
    numpy gives every array of 4 MiB and more (madvise MADV_HUGEPAGE). A scan sizes its columns ahead of
    their rows (a projection of the file, a batch's room, a part's table) and frees them file after
    file; a huge page is zero-filled whole when its first row is written, a small page only where rows
    reach. Measured on a whole check (2 GiB of interleaved ledgers, its lanes on 2 cores): a third less
    system time and a tenth less user time, though the page faults double; with one lane, the same CPU
    (bench/lane_timeline.py). The last caller out of collector_eased gives numpy its advice back;
    outside it, or where numpy has no such setting, nothing."""
    with _Pause.lock:
        if _Pause.inside and _Pause.huge_advice is None:
            _Pause.huge_advice = _numpy_huge_advice(False)


def _numpy_huge_advice(enabled: bool) -> bool | None:
    """Set numpy's huge-page advice (its NUMPY_MADVISE_HUGEPAGE); the setting before, None without one."""
    import numpy as np
    core: Any = getattr(np, "_core", None) or getattr(np, "core", None)
    setter = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    return None if setter is None else bool(setter(enabled))
