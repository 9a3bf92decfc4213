"""bkdisk installed as a user installs it: ``pip install .`` (not editable) into a fresh venv.

Everything lands under the one ``bkdisk`` namespace (``bkdisk.formats``, ``bkdisk.fsck``, ...): no
generic top-level name (``formats``, ``journal``, ``audit``) in site-packages, and ``bench`` not at all.
The commands, the spark-submit application file and numba's cache work from that copy.

The fresh venv holds only bkdisk; its third-party dependencies (numba, pyarrow, pyspark ...) are read
from the test run's own environment through a path entry, so that the module does not download or
build 500 MB of wheels on every run. That path entry is a plain folder on sys.path: the editable
install of the checkout (a .pth hook) is not loaded from it, which the tests check.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import GOLDEN

REPO = Path(__file__).resolve().parents[1]
HEALTHY = "interleaved-v6-hostport"


def _run(cmd, venv: Path, cwd: Path, timeout=600, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NUMBA_CACHE_DIR",
                                                            "BKDISK_NUMBA_CACHE_DIR")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env.update(env_extra or {})
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with bkdisk installed from a wheel built from the checkout; returns the venv."""
    base = tmp_path_factory.mktemp("install")
    # Built from a copy of the checkout (what git tracks or would), so that the build writes nothing into the checkout.
    src = base / "src"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout
    for rel in filter(None, tracked.decode().split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    wheels = base / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "bkdisk-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("bkdisk-*.whl"))
    # This environment's pip installs into the fresh venv (which has none of its own).
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q",
                           str(wheel)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def test_only_the_bkdisk_namespace_is_installed(installed, tmp_path):
    top = sorted(p.name for p in _site(installed).iterdir()
                 if not p.name.endswith((".dist-info", ".pth")) and p.name != "__pycache__")
    assert top == ["bkdisk"]
    for name in ("formats", "journal", "fsck", "audit", "bench", "bookie"):
        r = _run([str(installed / "bin" / "python"), "-c", f"import {name}"], installed, tmp_path)
        assert r.returncode == 1 and "ModuleNotFoundError" in r.stderr, (name, r.stderr[-500:])


def test_every_product_module_is_installed_and_imports(installed, tmp_path):
    """The installed tree holds the same modules as the checkout's product folders (a package left
    out of pyproject.toml's list would be missing here), and each of them imports."""
    script = r"""
import json, pkgutil, importlib, bkdisk
names = sorted(m.name for m in pkgutil.walk_packages(bkdisk.__path__, "bkdisk."))
for n in names:
    importlib.import_module(n)
print(json.dumps({"file": bkdisk.__file__, "names": names}))
"""
    r = _run([str(installed / "bin" / "python"), "-c", script], installed, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got["file"].startswith(str(_site(installed))), "bkdisk came from the checkout, not the install"
    import tomllib
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    want = set()
    for name, folder in mapping.items():
        for p in (REPO / folder).rglob("*.py"):
            rel = p.relative_to(REPO / folder).with_suffix("")
            if "__pycache__" in rel.parts:
                continue
            if rel.parts[-1] == "__init__":
                rel = rel.parent
            want.add(".".join([name, *rel.parts]))
    want.discard("bkdisk")
    assert want - set(got["names"]) == set()
    assert set(got["names"]) - want == set()


def test_the_commands_run_from_the_install_and_match_the_checkout(installed, tmp_path):
    disk = GOLDEN / HEALTHY
    mine = _run([str(installed / "bin" / "bookie-fsck"), str(disk), "--json", "--no-progress"], installed, tmp_path)
    ref = subprocess.run([str(Path(sys.executable).parent / "bookie-fsck"), str(disk), "--json", "--no-progress"],
                         capture_output=True, text=True, timeout=600)
    assert mine.returncode == ref.returncode == 0, mine.stderr[-2000:]
    def without_timing(out: str) -> dict:
        d = json.loads(out)
        d["stats"].pop("seconds")
        for p in d["passes"]:
            p.pop("seconds")
        return d
    assert without_timing(mine.stdout) == without_timing(ref.stdout)
    r = _run([str(installed / "bin" / "bkdisk"), "dump", "journal", str(next(disk.glob("journal/current/*.txn")))],
             installed, tmp_path)
    assert r.returncode == 0 and r.stdout, r.stderr[-2000:]


def test_numba_compiles_once_into_the_installed_tree(installed, tmp_path):
    """The kernels' cache goes beside the installed modules (site-packages is the user's), and a
    second process loads every kernel from it instead of compiling."""
    probe = r"""
import json, sys, numba
from pathlib import Path
import bkdisk.entrylogs.scan as E, bkdisk.entrylogs.walk as EW
import bkdisk.digests.plan as P
g = Path(sys.argv[1])
for log in sorted(g.glob("ledgers*/current/*.log")):
    E.scan_entry_log(log, window=4096, digests=P.DigestPlan())
st = EW.walk_entry_records.stats
print(json.dumps({"hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values())}))
"""
    py = str(installed / "bin" / "python")
    first = _run([py, "-c", probe, str(GOLDEN / HEALTHY)], installed, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    caches = list((_site(installed) / "bkdisk").rglob("__pycache__/*.nbi"))
    assert caches, "no numba index file was written beside the installed modules"
    second = _run([py, "-c", probe, str(GOLDEN / HEALTHY)], installed, tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    stats = json.loads(second.stdout)
    assert stats["hits"] >= 1 and stats["misses"] == 0, stats


@pytest.mark.slow
def test_the_spark_submit_application_file_runs_from_the_install(installed, tmp_path):
    root = GOLDEN / "cluster-3"
    app = _site(installed) / "bkdisk" / "audit" / "spark_app.py"
    assert app.is_file()
    out = tmp_path / "audit"
    py = str(installed / "bin" / "python")
    r = _run([str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--conf",
              "spark.sql.shuffle.partitions=4", str(app), *map(str, sorted((root / "bookies").iterdir())),
              "--metadata-dir", str(root / "metadata"), "--out", str(out), "--run-id", "installed"],
             installed, tmp_path, timeout=900,
             env_extra={"PYSPARK_PYTHON": py, "PYSPARK_DRIVER_PYTHON": py, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "report.html").is_file()
    from bkdisk.audit.job import read_tables
    replicas = read_tables(str(out))["replicas"]
    assert set(replicas["run_id"].to_pylist()) == {"installed"}
    assert len(set(replicas["bookie_id"].to_pylist())) == 3
