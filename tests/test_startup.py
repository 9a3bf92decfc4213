"""A command pays at start-up only for what it runs: help and usage errors import no heavy library."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = Path(__file__).resolve().parents[1] / "bkdisk"   # the command layer: bkdisk/*.py, bkdisk/dump/
HEAVY = {"numpy", "numba", "llvmlite", "pyspark", "pyarrow", "grpc", "kazoo", "construct", "google", "rich"}

PROBE = """
import json, sys
from {module} import main
try:
    main({argv!r})
except SystemExit as e:
    code = e.code
print(json.dumps({{"code": code, "heavy": sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))}}))
"""


def _probe(module: str, argv: list[str]) -> dict:
    src = PROBE.format(module=module, argv=argv, heavy=sorted(HEAVY))
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["--version"], 0), (["no-such-command"], 16)])
def test_bkdisk_help_and_usage_errors_import_no_heavy_library(argv, code):
    assert _probe("bkdisk.cli", argv) == {"code": code, "heavy": []}


def test_a_subcommand_help_imports_its_declarations_but_no_compiler_or_cluster_library():
    # dump's options come from formats/ (construct, protobuf); the scanners and Spark stay unloaded.
    r = _probe("bkdisk.cli", ["dump", "--help"])
    assert r["code"] == 0
    assert set(r["heavy"]) & {"numba", "llvmlite", "pyspark", "grpc", "kazoo"} == set()


@pytest.mark.parametrize("command", ["audit", "bookies", "demo", "dump", "fsck", "inventory", "metadata",
                                     "read-ledger", "salvage", "scan-disk", "space", "warm-up"])
def test_every_subcommands_help_loads_no_compiler_service_or_cluster_library(command):
    r = _probe("bkdisk.cli", [command, "--help"])
    assert r["code"] == 0
    assert set(r["heavy"]) & {"numba", "llvmlite", "pyspark", "grpc", "kazoo"} == set()


def test_the_subcommand_table_is_the_one_probed():
    from bkdisk.cli import COMMANDS
    assert sorted(COMMANDS) == ["audit", "bookies", "demo", "dump", "fsck", "inventory", "metadata", "read-ledger",
                                "salvage",
                                "scan-disk", "space", "warm-up"]


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["--version"], 0), (["-y", "/nowhere"], 16),
                                        (["--no-such-option"], 16), (["/a", "--conf", "/b.conf"], 16)])
def test_bookie_fsck_help_version_and_usage_errors_load_no_checker(argv, code):
    # The checker (numpy, numba's scanners) loads only when a check runs.
    assert _probe("bkdisk.fsck_cli", argv) == {"code": code, "heavy": []}


def test_bkdisk_fsck_help_loads_no_checker():
    assert _probe("bkdisk.cli", ["fsck", "--help"]) == {"code": 0, "heavy": []}


def test_bkdisk_help_lists_every_command_of_the_table():
    from bkdisk.cli import COMMANDS
    out = subprocess.run([sys.executable, "-c", "from bkdisk.cli import main; main(['--help'])"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    listed = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.startswith("  ") and
              not line.startswith("    ")]
    assert listed == sorted(COMMANDS)


@pytest.mark.parametrize("module, argv", [("bkdisk.fsck_cli", ["/no/such/bookie"]),
                                          ("bkdisk.cli", ["fsck", "/no/such/bookie"]),
                                          ("bkdisk.cli", ["inventory", "/no/such/bookie", "--jsonl"])])
def test_a_missing_bookie_is_reported_before_the_scanners_load(module, argv):
    r = _probe(module, argv)
    assert r["code"] == 8
    assert set(r["heavy"]) & {"numpy", "numba", "llvmlite", "pyarrow"} == set()


# After the command, at the interpreter's exit: were the command's objects frozen (commandline.runner.
# console_command), so the last collections skip them? Printed by the process that did the work.
EXIT_PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0, flush=True))
sys.argv = [{prog!r}] + {argv!r}
from {module} import console
console()
"""


def test_a_command_leaves_its_objects_out_of_the_last_collections_at_exit():
    out = subprocess.run([sys.executable, "-c", EXIT_PROBE.format(module="bkdisk.cli", prog="bkdisk",
                                                                  argv=["--version"])],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "frozen at exit: True", out.stdout[-500:]


# A guarded command (one that reads bookie files) ends once its output is out: the functions given to
# atexit run (the spill folders' removal), then the process that did the work leaves with os._exit,
# without the interpreter's teardown. Each line printed says which process printed it.
TEARDOWN_PROBE = """
import atexit, os, sys
leave = os._exit
def _exit(code):
    print("os._exit", os.getpid(), code, flush=True)
    leave(code)
os._exit = _exit
atexit.register(lambda: print("atexit", os.getpid(), flush=True))
sys.argv = [{prog!r}] + {argv!r}
from {module} import console
console()
"""


@pytest.mark.parametrize("module, prog, argv, code", [
    ("bkdisk.fsck_cli", "bookie-fsck", ["{root}", "--json"], 0),
    ("bkdisk.fsck_cli", "bookie-fsck", ["/no/such/bookie"], 8),
    ("bkdisk.fsck_cli", "bookie-fsck", ["{root}", "--no-such-option"], 16),
    ("bkdisk.cli", "bkdisk", ["inventory", "{root}", "--jsonl"], 0)])
def test_a_guarded_command_ends_without_the_interpreters_teardown(module, prog, argv, code):
    from conftest import GOLDEN
    argv = [a.format(root=GOLDEN / "interleaved-v6-hostport") for a in argv]
    out = subprocess.run([sys.executable, "-c", TEARDOWN_PROBE.format(module=module, prog=prog, argv=argv)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == code, out.stderr[-500:]
    said = [line.split() for line in out.stdout.splitlines() if line.startswith(("atexit ", "os._exit "))]
    assert len([w for w in said if w[0] == "atexit"]) == 1, said   # (in the process that did the work)
    worker = next(w[1] for w in said if w[0] == "atexit")
    assert said[said.index(["atexit", worker]) + 1] == ["os._exit", worker, str(code)], said


BLAS_PROBE = """
import os
from bkdisk.commandline.runner import console_command
console_command(lambda: print(os.environ.get("OPENBLAS_NUM_THREADS")))
"""


@pytest.mark.parametrize("given, want", [(None, "1"), ("3", "3")])
def test_a_command_holds_numpy_blas_to_one_thread_unless_told(given, want):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want


# The command's heavy module (``real``, bound as ``front.lazy``) looked at when its work (``fn``) begins:
# are numba's kernels still in the collector's sight?
LOADED_PROBE = """
import gc, importlib
from bkdisk import {front}

class Watched:
    def __getattr__(self, name):
        real = importlib.import_module({real!r})
        if name != {fn!r}:
            return getattr(real, name)
        def work(*args, **kwargs):
            print("kernels left to the collector:",
                  any(type(o).__name__ == "CPUDispatcher" for o in gc.get_objects()), flush=True)
            return getattr(real, name)(*args, **kwargs)
        return work

{front}.{lazy} = Watched()
try:
    {run}
except SystemExit:
    pass
"""


def _kernels_left(front: str, lazy: str, real: str, fn: str, run: str) -> str:
    from conftest import GOLDEN
    env = {**os.environ, "BKDISK_NO_FORK": "1"}
    src = LOADED_PROBE.format(front=front, lazy=lazy, real=real, fn=fn,
                              run=run.format(root=str(GOLDEN / "interleaved-v6-hostport")))
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120, env=env)
    return out.stdout + out.stderr[-500:]


def test_the_checker_loaded_after_the_arguments_is_frozen_out_of_the_collectors_sight():
    """numba's and the scanners' objects, loaded once the dirs are found, are not walked again by the
    young collections of the check (they would be, on the thread every other waits for)."""
    out = _kernels_left("fsck_cli", "fsck_api", "bkdisk.fsck.api", "check_bookie",
                        "fsck_cli.main([{root!r}, '--no-progress'])")
    assert "kernels left to the collector: False" in out, out[-1000:]


def test_the_inventory_frozen_its_scanners_out_of_the_collectors_sight():
    """As fsck's checker: the scanners, loaded once the arguments are checked, are not walked again
    by the young collections of the scan."""
    out = _kernels_left("inventory_cli", "bookie_inventory", "bkdisk.bookie.inventory", "scan_bookie",
                        "inventory_cli.inventory.main([{root!r}], standalone_mode=False)")
    assert "kernels left to the collector: False" in out, out[-1000:]


@pytest.mark.parametrize("unbuffered", [False, True])
@pytest.mark.parametrize("argv", [["{root}", "--json"], ["{root}"]])
def test_a_reader_gone_before_the_output_ends_nothing_but_the_checks_exit_code(argv, unbuffered):
    """stdout a pipe whose reader has gone (``| head``): no traceback, no 'Exception ignored', no error
    line, and the check's own exit code (the golden bookie is clean: 0), whether the report meets the
    closed pipe as it is written (unbuffered) or at the last flush."""
    from conftest import GOLDEN
    argv = [a.format(root=GOLDEN / "interleaved-v6-hostport") for a in argv]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([sys.executable, "-c", "from bkdisk.fsck_cli import console; console()", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()   # before the check writes a byte
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""


def test_a_reader_gone_before_the_rows_end_is_141_as_sigpipe_and_a_full_disk_one_line():
    """Rows whose reader went away (``| head``) before their end: exit 141, as a filter killed by SIGPIPE
    (never 0, which said every row was read and hid the exit 4 of lost entries), nothing on stderr;
    an output that cannot be written (a full disk): one line, exit 8, no traceback."""
    from conftest import GOLDEN
    argv = ["read-ledger", "--ledger-id", "255", str(GOLDEN / "interleaved-v6-hostport"), "--jsonl"]
    proc = subprocess.Popen([sys.executable, "-c", "from bkdisk.cli import main; main()", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()   # (13 rows of ~20 KB: more than a pipe holds)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err
    for cmd in (argv, ["inventory", str(GOLDEN / "interleaved-v6-hostport"), "--jsonl"]):
        with open("/dev/full", "w") as full:
            out = subprocess.run([sys.executable, "-c", "from bkdisk.cli import main; main()", *cmd], stdout=full,
                                 stderr=subprocess.PIPE, text=True, timeout=120)
        assert out.returncode == 8 and out.stderr == "bkdisk: the output: cannot write or read (No space left on " \
                                                     "device)\n", out.stderr


def function_level_imports(source: str, name: str = "<src>") -> list[str]:
    """Imports inside a function or method (``TYPE_CHECKING`` blocks are at module level, so not these)."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            out += [f"{name}:{n.lineno} imports inside {getattr(node, 'name', 'a lambda')}()"
                    for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
    return sorted(set(out))


def test_the_rule_flags_an_import_inside_a_function_but_not_a_lazy_or_type_checking_one():
    src = ("from typing import TYPE_CHECKING\nfrom bkdisk.commandline.lazy import lazy_import\n"
           "if TYPE_CHECKING:\n    from bkdisk.fsck.api import Report\nscan = lazy_import('bkdisk.journal.scan')\n"
           "def run():\n    from bkdisk.fsck.api import check\n    import numpy as np\n    return scan.walk()\n")
    assert function_level_imports(src) == ["<src>:7 imports inside run()", "<src>:8 imports inside run()"]


def test_command_modules_import_at_their_top_only_heavy_modules_through_lazy_import():
    files = sorted(COMMANDS.glob("*.py")) + sorted((COMMANDS / "dump").glob("*.py"))
    assert len(files) > 10
    assert [f for p in files for f in function_level_imports(p.read_text(), str(p.relative_to(COMMANDS.parent)))] == []
