"""The jitted kernels are compiled once and then loaded from numba's cache by later processes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import GOLDEN

import bkdisk.digests.plan as P
import bkdisk.diskio.config
import bkdisk.diskio.kernels
import bkdisk.entrylogs.scan
import bkdisk.entrylogs.scan as E
import bkdisk.indexfiles.scan
import bkdisk.journal.scan

REPO = Path(__file__).resolve().parents[1]

# Uses every kernel once (entry-log walk, digests, sniffing, journal walk, index listing and reads),
# then prints each dispatcher's cache statistics.
SCRIPT = r"""
import json, sys
from pathlib import Path
import numba
import numba.core.runtime.nrtdynmod as nrt_module
nrt_made = []   # numba's runtime compiled in this process (not loaded from the cache)
_make = nrt_module.create_nrt_module
nrt_module.create_nrt_module = lambda ctx: nrt_made.append(1) or _make(ctx)
import llvmlite.binding as llb
parsed = []   # LLVM bitcode parsed in this process (a library linked into a kernel being compiled)
_parse = llb.parse_bitcode
llb.parse_bitcode = lambda data, *a, **kw: parsed.append(len(data)) or _parse(data, *a, **kw)
import bkdisk.diskio.kernels as K, bkdisk.digests.kernels as DK
import bkdisk.entrylogs.scan as E, bkdisk.entrylogs.walk as EW, bkdisk.journal.scan as J, bkdisk.journal.walk as JW
import bkdisk.digests.plan as P
import bkdisk.indexfiles.scan as I, bkdisk.indexfiles.decode as ID
import hashlib, numpy as np
from bkdisk.diskio.config import lean_cache_class
g = Path(sys.argv[1]) / "interleaved-v6-hostport"
results = hashlib.sha256()
def feed(o, depth=0):   # every array and plain value a scan returns, in order
    if isinstance(o, np.ndarray):
        results.update(np.ascontiguousarray(o).tobytes())
    elif isinstance(o, (int, float, str, bytes, bool, type(None), np.generic)):
        results.update(repr(o).encode())
    elif depth < 4 and isinstance(o, (list, tuple)):
        for x in o:
            feed(x, depth + 1)
    elif depth < 4 and hasattr(o, "__dict__"):
        for _k, v in sorted(vars(o).items()):
            feed(v, depth + 1)
for log in sorted(g.glob("ledgers*/current/*.log")):
    feed(E.scan_entry_log(log, window=4096, digests=P.DigestPlan(), payload_hash="sha256"))
data = bytearray(sorted(g.glob("ledgers*/current/*.log"))[0].read_bytes())
data[2000:9000] = bytes(7000)  # damage: resync, zero-tail test, probes
feed(E.scan_entry_log("0.log", data=bytes(data), window=4096))
for txn in sorted(g.glob("journal/current/*.txn")):
    feed(J.scan_journal(txn, window=4096))
feed(I.walk_index_dirs([str(g / "ledgers0"), str(g / "ledgers1")]))
feed(I.read_index_locations(next(g.glob("ledgers*/current/*/*/*.idx"))))
# Modules only numba's registry refresh imports (its compiler needs them, loading from the cache not).
refreshed = sorted(m for m in ("numba.np.linalg", "numba.np.random.generator_methods", "numba.typed.dictimpl")
                   if m in sys.modules)
stats = {"results": results.hexdigest(), "refreshed": refreshed, "nrt_compiled": len(nrt_made),
         "bitcode_parsed": len(parsed), "numpy_ma": "numpy.ma" in sys.modules}
for mod in (K, DK, EW, JW, ID):
    for name, obj in sorted(vars(mod).items()):
        if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.__module__ == mod.__name__:
            s = obj.stats
            stats[f"{mod.__name__}.{name}"] = [sum(s.cache_hits.values()), sum(s.cache_misses.values()), s.cache_path,
                                               isinstance(obj._cache, lean_cache_class())]
print(json.dumps(stats))
"""


def _run(env_extra: dict[str, str]) -> dict[str, list]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(GOLDEN)], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _used(stats: dict[str, list]) -> dict[str, list]:
    return {k: v for k, v in stats.items() if isinstance(v, list) and k != "refreshed" and v[0] + v[1] > 0}


def _runtime_files(cache: str) -> list[Path]:
    return sorted(Path(cache).rglob("bkdisk-nrt-*.npz"))


# The kernels the script enters by; the first run compiles the small ones (the walks, minutes to compile,
# are loaded from the warmed cache: the second run's loads are what is tested of them).
ENTRY_POINTS = {"bkdisk.entrylogs.walk.walk_entry_records", "bkdisk.digests.kernels.check_digests",
                "bkdisk.digests.kernels.sniff_crc", "bkdisk.journal.walk.walk_journal_records",
                "bkdisk.indexfiles.decode.decode_files", "bkdisk.diskio.kernels.last_nonzero"}
COMPILED_FIRST = ENTRY_POINTS - {"bkdisk.entrylogs.walk.walk_entry_records", "bkdisk.journal.walk.walk_journal_records"}


@pytest.fixture(scope="module")
def compiled(warmed_cache):
    """(a cache folder, the statistics of the process that filled it): the run's warmed cache without
    some of the entry points' kernels and numba's runtime, which the first run compiles (compiling every kernel
    again would take minutes), for the tests of this module to load from."""
    assert (GOLDEN / "interleaved-v6-hostport").is_dir(), f"golden corpus missing under {GOLDEN}"
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "cache")
        shutil.copytree(warmed_cache, cache)
        for name in COMPILED_FIRST:
            module, _, fn = name.rpartition(".")
            stem = f"{module.rpartition('.')[2]}.{fn}-"
            for f in Path(cache).rglob(f"{stem}*"):   # (those warm-up does not meet are not there)
                if f.suffix in (".nbi", ".nbc"):
                    f.unlink()
        for f in _runtime_files(cache):
            f.unlink()
        yield cache, _run({"NUMBA_CACHE_DIR": cache})


def test_a_second_process_loads_every_kernel_from_the_cache_without_compiling(compiled):
    cache, first_run = compiled
    second_run = _run({"NUMBA_CACHE_DIR": cache})
    first, second = _used(first_run), _used(second_run)
    entry_points = ENTRY_POINTS
    assert entry_points <= set(first), sorted(entry_points - set(first))
    assert all(first[k][1] > 0 for k in COMPILED_FIRST)  # compiled on first use
    assert set(second) >= entry_points
    for name, (hits, misses, path, lean) in second.items():
        assert misses == 0, f"{name} was compiled again in the second process"
        assert hits > 0
        assert path.startswith(cache), path
        assert lean, f"{name} is not declared through bkdisk.diskio.config.kernel"
    assert any(Path(cache).rglob("*.nbi")) and any(Path(cache).rglob("*.nbc"))
    # Compiling refreshes numba's registries; loading from the cache does not (bkdisk.diskio.config.LeanCache),
    # and the kernels loaded that way compute exactly what the freshly compiled ones did.
    assert first_run["refreshed"], "the compiling process should have refreshed numba's registries"
    assert second_run["refreshed"] == []
    assert second_run["results"] == first_run["results"]
    # numba's runtime too: compiled once, then loaded (diskio.nrt_cache)
    assert first_run["nrt_compiled"] == 1 and second_run["nrt_compiled"] == 0
    # Loading links nothing: no kernel's bitcode is parsed (diskio.lazy_link), the runtime's alone
    # (every kernel compiled links it: diskio.nrt_cache)
    assert second_run["bitcode_parsed"] == 1
    # Typing the kernels' array arguments loads no numpy.ma (diskio.array_typeof)
    assert second_run["numpy_ma"] is False
    assert _runtime_files(cache)


def _cut_short(f: Path) -> None:
    """A byte of the file changed: refused before LLVM sees it."""
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))


def _bad_bitcode(f: Path) -> None:
    """Whole (its digest right) but with bitcode LLVM cannot read: every kernel compiled links the
    runtime, so the file is refused at load, not met by the next compile."""
    import numpy as np

    from bkdisk.diskio import nrt_cache
    with np.load(f) as z:
        parts = [z[k].tobytes() for k in nrt_cache._PARTS]
    parts[2] = b"BC\xc0\xde" + bytes(64)   # bitcode's magic, then nothing LLVM can read
    nrt_cache._write(str(f), parts)


@pytest.mark.parametrize("damage", [_cut_short, _bad_bitcode], ids=["not whole", "bitcode that does not parse"])
def test_a_runtime_file_that_cannot_be_used_is_compiled_again_and_rewritten(compiled, tmp_path, damage):
    import shutil
    cache = str(tmp_path / "cache")
    shutil.copytree(compiled[0], cache)
    files = _runtime_files(cache)
    assert files
    for f in files:
        damage(f)
    damaged = {f: f.read_bytes() for f in files}
    run = _run({"NUMBA_CACHE_DIR": cache})
    assert run["nrt_compiled"] == 1 and run["results"] == compiled[1]["results"]
    assert any(f.read_bytes() != damaged[f] for f in files)   # written whole again
    assert _run({"NUMBA_CACHE_DIR": cache})["nrt_compiled"] == 0


# A process that loads one kernel from the cache (no registry refresh) and then compiles another
# (a cache miss, and a new signature of the loaded one): numba's compiler refreshes what it needs.
COMPILE_AFTER_LOAD = r"""
import sys
from pathlib import Path
import numpy as np
import bkdisk.entrylogs.scan as E
import bkdisk.digests.plan as P
from bkdisk.diskio.config import kernel
log = sorted((Path(sys.argv[1]) / "interleaved-v6-hostport").glob("ledgers*/current/*.log"))[0]
res = E.scan_entry_log(log, window=4096, digests=P.DigestPlan())
assert "numba.np.linalg" not in sys.modules, "loading from the cache refreshed numba's registries"
print(len(res.entries))
@kernel
def total(a):
    s = 0
    for x in a:
        s += x
    return s
print(total(np.arange(10, dtype=np.int64)), total(np.arange(4, dtype=np.float64)))
"""


def test_a_kernel_compiles_in_a_process_that_loaded_others_from_the_cache(compiled, tmp_path):
    cache = compiled[0]
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env.update(NUMBA_CACHE_DIR=cache, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    script = tmp_path / "compile_after_load.py"   # a file: numba caches only functions that have one
    script.write_text(COMPILE_AFTER_LOAD)
    r = subprocess.run([sys.executable, str(script), str(GOLDEN)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    entries = len(E.scan_entry_log(sorted((GOLDEN / "interleaved-v6-hostport").glob("ledgers*/current/*.log"))[0],
                                   window=4096, digests=P.DigestPlan()).entries)
    assert entries > 0
    assert r.stdout.split() == [str(entries), "45", "6.0"]


def test_bkdisk_numba_cache_dir_sets_the_cache_folder_for_read_only_installs(compiled):
    # every kernel loaded from the folder it names, none compiled: NUMBA_CACHE_DIR is not the one used
    cache = compiled[0]
    stats = _used(_run({"BKDISK_NUMBA_CACHE_DIR": cache, "NUMBA_CACHE_DIR": "/nonexistent/ignored"}))
    assert stats and all(path.startswith(cache) and hits > 0 and misses == 0
                         for hits, misses, path, _ in stats.values()), stats


def test_cache_configuration_is_documented_in_the_scanner_modules():
    for mod in (bkdisk.diskio.kernels, bkdisk.entrylogs.scan, bkdisk.journal.scan, bkdisk.indexfiles.scan):
        assert "NUMBA_CACHE_DIR" in mod.__doc__
    assert "BKDISK_NUMBA_CACHE_DIR" in bkdisk.diskio.config.__doc__


# Declares every kernel of the check, counting the writable-folder probes numba's cache locators make.
PROBES = r"""
import json, tempfile
probes = []
real = tempfile.TemporaryFile
tempfile.TemporaryFile = lambda *a, **kw: probes.append(kw.get("dir")) or real(*a, **kw)
import numba
import bkdisk.fsck.api, bkdisk.fsck.context
import bkdisk.diskio.config as C
kernels = [o for m in list(__import__("sys").modules.values()) if (m.__name__ or "").startswith("bkdisk.")
           for o in vars(m).values() if isinstance(o, numba.core.registry.CPUDispatcher)]
print(json.dumps({"probes": probes, "kernels": len({id(k) for k in kernels}),
                  "folders": sorted({k._cache._cache_path for k in kernels}),
                  "lean": all(isinstance(k._cache, C.lean_cache_class()) for k in kernels)}))
"""


def test_each_cache_folder_is_probed_once_a_process_not_once_a_kernel():
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
        env.update(NUMBA_CACHE_DIR=cache, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, "-c", PROBES], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["kernels"] > 20 and got["lean"]
    assert sorted(got["probes"]) == got["folders"]   # one probe a folder, in the folder the kernels use


def test_a_folder_that_failed_its_probe_fails_it_again_without_probing():
    """numba then moves to its next locator for every kernel of that folder, as it does for the first."""
    from bkdisk.diskio.config import _probed_once

    class ReadOnly:
        probes = 0

        def get_cache_path(self):
            return "/read-only/__pycache__ (probe test)"

        def ensure_cache_path(self):
            ReadOnly.probes += 1
            raise PermissionError(13, "read-only file system")

    for _ in range(3):
        with pytest.raises(PermissionError):
            _probed_once(ReadOnly)().ensure_cache_path()
    assert ReadOnly.probes == 1


LLVM_LOCK_EVENTS = r"""
import json
from llvmlite import binding as ll
from numba.core import event
seen = []
class Count(event.Listener):
    def on_start(self, e):
        seen.append(e.kind)
    def on_end(self, e):
        pass
event.register("numba:llvm_lock", Count())
ll.get_process_triple()
before = len(seen)
from bkdisk.diskio.config import lean_cache_class
lean_cache_class()
ll.get_process_triple()
ll.get_host_cpu_name()
print(json.dumps({"before": before, "after": len(seen) - before}))
"""


def test_llvm_calls_run_untimed_once_kernels_are_declared():
    """numba times LLVM's lock with a Python callback around every llvmlite call (thousands when a
    command loads its kernels); once a kernel is declared, none runs."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", LLVM_LOCK_EVENTS], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["before"] > 0 and got["after"] == 0, got   # timed before, untimed after


# A kernel loaded from the cache, then linked into one compiled in the same process (never cached):
# its bitcode, left unparsed by the load (diskio.lazy_link), is parsed for the link.
LINK_AFTER_LOAD = r"""
import numba
import numpy as np
import llvmlite.binding as llb
from bkdisk.diskio.config import kernel
parsed = []
_parse = llb.parse_bitcode
llb.parse_bitcode = lambda data, *a, **kw: parsed.append(1) or _parse(data, *a, **kw)
@kernel
def last_set(buf):
    i = buf.size - 1
    while i >= 0 and buf[i] == 0:
        i -= 1
    return i
buf = np.zeros(64, np.uint8)
buf[9] = 1
loaded = last_set(buf) == 9 and sum(last_set.stats.cache_hits.values()) == 1
before = len(parsed)
@numba.njit(nogil=True)
def calls_loaded(buf, k):
    buf[k] = 1
    return last_set(buf)
print(loaded, before, calls_loaded(buf, 40), len(parsed) > before)
"""


def test_a_kernel_loaded_from_the_cache_links_into_one_compiled_after_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "BKDISK_NUMBA_CACHE_DIR")}
    env.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    script = tmp_path / "link_after_load.py"   # a file: numba caches only functions that have one
    script.write_text(LINK_AFTER_LOAD)
    runs = [subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split()[0] == "False"   # compiled, and cached, by the first process
    # the second loads it (no bitcode parsed but the runtime's), then parses it to link it into the
    # kernel it compiles
    assert runs[1].stdout.split() == ["True", "1", "40", "True"]


def test_where_numba_cannot_cache_the_kernels_cache_in_a_private_tmp_folder(monkeypatch, tmp_path):
    """A read-only install run by a user without a home: ``<tmp>/bkdisk-numba-<uid>``, made 0700; a
    folder of that name that others can write (or a link) is not used, as what is there loads as code."""
    from numba.core import config as numba_config
    config = bkdisk.diskio.config
    for name in ("BKDISK_NUMBA_CACHE_DIR", "NUMBA_CACHE_DIR"):
        monkeypatch.setenv(name, "")
    monkeypatch.setattr(numba_config, "CACHE_DIR", "")
    monkeypatch.setattr(config, "_numba_folders_writable", lambda: False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = tmp_path / f"bkdisk-numba-{os.getuid()}"
    assert config.numba_cache_dir.__wrapped__() == str(folder) == os.environ["NUMBA_CACHE_DIR"]
    assert folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o777)
    monkeypatch.setattr(numba_config, "CACHE_DIR", "")
    assert config.numba_cache_dir.__wrapped__() is None
    folder.rmdir()
    folder.symlink_to(tmp_path)
    assert config.numba_cache_dir.__wrapped__() is None
    monkeypatch.setattr(config, "_numba_folders_writable", lambda: True)   # (numba's own folders are used)
    assert config.numba_cache_dir.__wrapped__() is None


def test_a_kernel_without_a_cache_folder_compiles_and_says_so_once(monkeypatch, capsys):
    config = bkdisk.diskio.config

    def no_locator(_py_func):
        raise RuntimeError("cannot cache function 'f': no locator available for file 'x.py'")
    monkeypatch.setattr(config, "lean_cache_class", lambda: no_locator)
    monkeypatch.setattr(config, "_said_uncached", [])
    f = config.kernel(lambda a: a + 1)
    g = config.kernel(lambda a: a * 2)
    assert f(2) == 3 and g(2) == 4
    err = capsys.readouterr().err
    assert err.count("no writable cache folder for numba") == 1 and "BKDISK_NUMBA_CACHE_DIR" in err
