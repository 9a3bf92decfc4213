"""A cached kernel is compiled again when a file it takes code from changes, not only its own: an inline
kernel, an intrinsic or a constant of another of the project's modules (numba alone keys the cache on
the kernel's own file, and would load the old machine code)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from bkdisk.diskio.kernel_sources import source_files
from bkdisk.entrylogs.walk import walk_entry_records

# Three of the project's modules, made from files: a constant's, a helper module's (an inline kernel
# and an intrinsic) and a caller's whose kernel uses all three. Prints the caller's result and whether the
# kernel came from the cache.
RUN = r"""
import importlib.util, sys
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
folder, then = sys.argv[1], sys.argv[2]
load("bkdisk.kstest_consts", folder + "/kstest_consts.py")
load("bkdisk.kstest_helper", folder + "/kstest_helper.py")
caller = load("bkdisk.kstest_caller", folder + "/kstest_caller.py")
import os
if then.startswith("step="):   # the constant's file changed after the import, before the first call
    open(folder + "/kstest_consts.py", "w").write("STEP = " + then[5:] + "\n")
elif then == "delete":
    os.remove(folder + "/kstest_consts.py")
import numpy as np
got = caller.total(np.arange(4, dtype=np.int64))
print(got, caller.total.stats.cache_hits.get(caller.total.signatures[0], 0) > 0 if caller.total.signatures else None)
"""

HELPER = """
from llvmlite import ir
from numba import types
from bkdisk.diskio.config import inline_kernel, intrinsic

@inline_kernel
def scaled(x):
    return x * {scale}

@intrinsic
def plus(typingctx, v):
    sig = types.int64(types.int64)
    def codegen(context, builder, signature, args):
        return builder.add(args[0], ir.Constant(ir.IntType(64), {plus}))
    return sig, codegen
"""

CALLER = """
from bkdisk.diskio.config import kernel
from bkdisk.kstest_consts import STEP
from bkdisk.kstest_helper import plus, scaled

@kernel
def total(xs):
    t = 0
    for x in xs:
        t += plus(scaled(x)) + STEP
    return t
"""


def _write(folder, scale=1, plus=0, step=0) -> None:
    (folder / "kstest_consts.py").write_text(f"STEP = {step}\n")
    (folder / "kstest_helper.py").write_text(textwrap.dedent(HELPER.format(scale=scale, plus=plus)))
    caller = folder / "kstest_caller.py"
    if not caller.exists():
        caller.write_text(CALLER)


def _run(folder, cache, then: str = "") -> tuple[int, bool]:
    """(the caller's result, whether its kernel came from the cache) in a new process; ``cache`` None:
    numba's cache in the source folder (``__pycache__``)."""
    # (-B: no bytecode cache, whose stamp would not see a one-character change within a second)
    env = {"PATH": "/usr/bin:/bin"} | ({"BKDISK_NUMBA_CACHE_DIR": str(cache)} if cache is not None else {})
    out = subprocess.run([sys.executable, "-B", "-c", RUN, str(folder), then], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    value, cached = out.stdout.split()
    return int(value), cached == "True"


def test_a_kernel_is_compiled_again_when_a_helper_in_another_file_changes(tmp_path):
    folder, cache = tmp_path / "src", tmp_path / "cache"
    folder.mkdir()
    _write(folder)
    assert _run(folder, cache) == (6, False)      # compiled: 0+1+2+3
    assert _run(folder, cache) == (6, True)       # the next process loads it
    for change, want in [(dict(scale=10), 60), (dict(scale=10, plus=1), 64), (dict(scale=10, plus=1, step=2), 72)]:
        _write(folder, **change)                  # the caller's file untouched
        assert _run(folder, cache) == (want, False), change
        assert _run(folder, cache) == (want, True), change
    (folder / "kstest_helper.py").touch()        # touched, the same bytes: still the cached code
    assert _run(folder, cache) == (72, True)


def test_code_compiled_from_a_file_changed_since_its_import_is_not_kept_under_the_new_files_stamp(tmp_path):
    folder, cache = tmp_path / "src", tmp_path / "cache"
    folder.mkdir()
    _write(folder)
    assert _run(folder, cache, then="step=5") == (6, False)   # this process runs the code it imported
    assert _run(folder, cache) == (26, False)                 # the next one compiles the new file's
    assert _run(folder, cache) == (26, True)


def test_a_kernel_runs_when_a_file_it_imports_is_gone(tmp_path):
    folder, cache = tmp_path / "src", tmp_path / "cache"
    folder.mkdir()
    _write(folder)
    assert _run(folder, cache, then="delete") == (6, False)


def test_one_source_tree_reached_by_two_paths_shares_its_cache(tmp_path):
    """(An install and a tree of links to the same files, as the benchmarks run a checkout.)"""
    folder = tmp_path / "src"
    folder.mkdir()
    _write(folder)
    (tmp_path / "link").symlink_to(folder)
    assert _run(folder, None) == (6, False)
    assert _run(tmp_path / "link", None) == (6, True)
    assert _run(folder, None) == (6, True)


def test_the_walk_takes_code_from_the_files_it_inlines():
    files = {p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1] for p in source_files(walk_entry_records.py_func)}
    assert {"entrylogs/walk.py", "diskio/kernels.py", "digests/kernels.py", "digests/crc_kernels.py",
            "formats/entry.py", "formats/entrylog.py"} <= files
