"""bookie-fsck's command line as e2fsck and BookieShell users expect it: --version, -y only
with --repair, the same option labels as inventory and dump, --help with examples and what ROOT is,
-q, the BP-35 ledger options, and a progress display that shows every pass."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from bkdisk.formats.ids import LedgerId
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions
from bkdisk.fsck_cli import fsck_command
from tests.fsck_helpers import Disk, make_disk, snapshot


def _cli(*args):
    return CliRunner().invoke(fsck_command, [*args, "--no-progress"], prog_name="bookie-fsck",
                              catch_exceptions=False)


def _main(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> Disk:
    """Two ledgers with a zeroed index signature (ledger 1 and ledger ff)."""
    d = make_disk(str(tmp_path_factory.mktemp("conv")))
    for lid in (LedgerId(0, 1), LedgerId(0, 255)):
        with open(d.written.index_files[lid], "r+b") as f:
            f.write(bytes(4))
    return d


def test_version_prints_the_program_and_exits_0():
    p = _main("--version")
    assert p.returncode == 0 and p.stdout.startswith("bookie-fsck, version "), p.stdout + p.stderr


def test_yes_without_repair_is_a_usage_error_that_says_what_to_use_and_writes_nothing(damaged):
    before = snapshot(damaged.root)
    p = _main(damaged.root, "--metadata-dir", damaged.md_dir, "-y")
    assert p.returncode == 16 and "--repair -y" in p.stderr, p.stderr
    assert [l for l in p.stderr.splitlines() if l.startswith("Error")] == [p.stderr.strip().splitlines()[-1]]
    assert "Traceback" not in p.stderr
    r = _cli(damaged.root, "--metadata-dir", damaged.md_dir, "-n", "-y")       # a dry run may take -y
    assert r.exit_code == 4 and "Repair plan:" in r.output
    assert snapshot(damaged.root) == before


def test_help_says_what_root_is_and_gives_examples():
    out = _cli("--help").output
    assert "ROOT is a folder holding one bookie's dirs" in out
    examples = out.split("Examples:")[1].split("Exit codes")[0]
    assert [l.split()[0] for l in examples.strip().splitlines()] == ["bookie-fsck"] * 7
    assert "--repair -y" in examples and "--conf" in examples and "--json" in examples


def _params(cmd) -> dict[str, object]:
    return {o: p for p in cmd.params for o in p.opts}


def test_options_shared_with_inventory_and_dump_have_the_same_names_and_labels():
    from bkdisk.dump.command import dump
    from bkdisk.inventory_cli import inventory
    fsck, inv = _params(fsck_command), _params(inventory)
    ledger = ["--ledger-id", "--ledger-scope-id", "--ledger-qualified-name"]
    for name in ["--conf", "--metadata-dir", *ledger]:
        assert name in fsck and name in inv, name
        assert fsck[name].metavar == inv[name].metavar, name
        assert fsck[name].help.split(".")[0] in inv[name].help or name in ledger[:1], name
    for sub in ("entrylog", "index", "journal"):
        d = _params(dump.commands[sub])
        assert all(n in d and d[n].metavar == fsck[n].metavar for n in ledger), sub
    assert "--json" in _params(dump.commands["journal"]) and "--json" in fsck


def test_quiet_prints_only_errors_and_the_count(damaged):
    r = _cli(damaged.root, "--metadata-dir", damaged.md_dir, "-q")
    assert r.exit_code == 4
    lines = r.output.rstrip().splitlines()
    assert lines[-1] == "4 errors, 0 warnings." and len(lines) == 5, r.output
    assert sorted(l.split()[1].rstrip(":") for l in lines[:-1]) == ["ENTRIES_MISSING"] * 2 + ["INDEX_HEADER_BAD"] * 2
    assert all(l.startswith("  ERROR ") for l in lines[:-1])
    full = _cli(damaged.root, "--metadata-dir", damaged.md_dir).output
    assert "Pass 1" in full and "Pass 1" not in r.output
    assert _main(damaged.root, "-q", "-v").returncode == 16


@pytest.mark.parametrize("how", [["--ledger-id", "255"], ["--ledger-id", "0xff", "--ledger-scope-id", "0"],
                                 ["--ledger-qualified-name", LedgerId(0, 255).qualified_name]])
def test_a_ledger_option_limits_the_report_to_that_ledger(damaged, how):
    doc = json.loads(_cli(damaged.root, "--metadata-dir", damaged.md_dir, "--json", *how).stdout)
    assert {f["ledger"] for f in doc["findings"]} <= {255, None}
    assert sorted(f["code"] for f in doc["findings"] if f["severity"] == "error") == ["ENTRIES_MISSING",
                                                                                      "INDEX_HEADER_BAD"]
    assert doc["summary"]["errors"] == 2 == sum(p["counts"].get("error", 0) for p in doc["passes"])
    everything = json.loads(_cli(damaged.root, "--metadata-dir", damaged.md_dir, "--json").stdout)
    assert {f["ledger"] for f in everything["findings"]} >= {1, 255}


@pytest.mark.parametrize("args", [["--ledger-id", "1", "--repair"], ["--ledger-id", "1", "-n"],
                                  ["--ledger-qualified-name", "xyz"], ["--ledger-scope-id", "1"],
                                  ["--ledger-qualified-name", "00" * 16, "--ledger-id", "1"]])
def test_ledger_option_misuse_is_a_one_line_usage_error(damaged, args):
    p = _main(damaged.root, *args)
    assert p.returncode == 16 and "Traceback" not in p.stderr, p.stderr


def test_progress_shows_every_pass_as_it_runs(damaged):
    seen: list[tuple[str, int, int]] = []
    check_bookie(damaged.dirs, CheckOptions(metadata_dir=damaged.md_dir, progress=lambda *a: seen.append(a)))
    passes = [(w, d) for w, d, _t in seen if w.startswith("pass ")]
    started = [w for w, d in passes if d == 0]
    assert [w.split(":")[0] for w in started] == [f"pass {n}" for n in range(1, 8)]
    assert [w for w, d in passes if d == 1] == started          # each one also reported done
    assert any(w == "entry logs" for w, _d, _t in seen)
    first_log = next(i for i, a in enumerate(seen) if a[0] == "entry logs")
    assert seen.index(("pass 1: layout and cookies", 1, 1)) < first_log   # shown while it runs, not after


@pytest.mark.parametrize("command", ["fsck", "inventory"])
@pytest.mark.parametrize("bad", ["missing root", "root is a file", "conf is a folder", "metadata dir is a file",
                                 "metadata dir missing"])
def test_one_exit_code_for_a_bad_path_one_line_naming_it(damaged, tmp_path, command, bad):
    a_file = tmp_path / "plain"
    a_file.write_text("x")
    args, named = {"missing root": ([str(tmp_path / "nope")], str(tmp_path / "nope")),
                   "root is a file": ([str(a_file)], str(a_file)),
                   "conf is a folder": (["--conf", str(tmp_path)], str(tmp_path)),
                   "metadata dir is a file": ([damaged.root, "--metadata-dir", str(a_file)], str(a_file)),
                   "metadata dir missing": ([damaged.root, "--metadata-dir", str(tmp_path / "nope")],
                                            str(tmp_path / "nope"))}[bad]
    p = subprocess.run([sys.executable, "-c", "from bkdisk.cli import main; main()", command, *args],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 8, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and named in p.stderr, p.stderr


@pytest.mark.parametrize("corpus", ["interleaved-v6-hostport", "dbstorage-v6-bookieid"])
def test_a_ledger_neither_on_the_bookie_nor_in_the_metadata_is_said_so(corpus, tmp_path):
    """10000 is not 0x10000 nor 0x1234: a check limited to it says the bookie has nothing of it (exit 0,
    one line on stderr) instead of a clean report that reads as "that ledger is fine here"."""
    import shutil

    from conftest import GOLDEN
    root, md = str(GOLDEN / corpus), str(GOLDEN / corpus / "metadata")
    p = _main(root, "--metadata-dir", md, "--ledger-id", "10000", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == ("bookie-fsck: ledger 10000 is neither on this bookie nor in the ledger metadata: "
                                "nothing to check")
    p = _main(root, "--ledger-id", "10000", "--json", "--no-progress")
    assert p.returncode == 0 and json.loads(p.stdout)["summary"]["errors"] == 0
    assert p.stderr.strip() == ("bookie-fsck: ledger 10000 is not on this bookie (and no ledger metadata was "
                                "given): nothing to check")
    for present in ("0", "0x1234"):   # on the bookie
        p = _main(root, "--metadata-dir", md, "--ledger-id", present, "--no-progress")
        assert p.returncode == 0 and "nothing to check" not in p.stderr, p.stderr
    # in the metadata only: pass 7 says what this bookie misses of it
    only_md = tmp_path / "metadata"
    shutil.copytree(md, only_md)
    shutil.copy(only_md / "0.bin", only_md / "2710.bin")   # (closed: its entries are expected here)
    p = _main(root, "--metadata-dir", str(only_md), "--ledger-id", "10000", "--no-progress")
    assert "nothing to check" not in p.stderr and "ledger 10000" in p.stdout, p.stdout + p.stderr


def test_an_unverified_digest_says_what_is_missing_metadata_or_the_ledger_in_it(tmp_path):
    import shutil

    from conftest import GOLDEN
    root = GOLDEN / "interleaved-v6-hostport"          # ledger 255 is HMAC: its password is in its metadata
    md = tmp_path / "metadata"
    shutil.copytree(root / "metadata", md)
    for f in md.glob("ff.*"):
        f.unlink()

    def detail(*args: str) -> str:
        doc = json.loads(_main(str(root), "--json", "--no-progress", *args).stdout)
        return next(f["message"] for f in doc["findings"] if f["code"] == "DIGEST_NOT_VERIFIED" and f["ledger"] == 255)

    assert detail().endswith("; give --metadata-dir")
    given = detail("--metadata-dir", str(md))
    assert given.endswith("; the ledger metadata given does not hold this ledger"), given
    assert "give --metadata-dir" not in given


@pytest.mark.parametrize("args", [["--rebuild-dropping-lost-entries"], ["-y", "--rebuild-dropping-lost-entries"]])
def test_rebuild_dropping_lost_entries_without_repair_is_refused(damaged, args):
    before = snapshot(damaged.root)
    p = _main(damaged.root, "--metadata-dir", damaged.md_dir, *args)
    assert p.returncode == 16 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("Error: "), p.stderr
    assert "--rebuild-dropping-lost-entries" in p.stderr or "-y" in p.stderr
    assert snapshot(damaged.root) == before
    r = _cli(damaged.root, "--metadata-dir", damaged.md_dir, "-n", "--rebuild-dropping-lost-entries")
    assert r.exit_code == 4 and "Repair plan:" in r.output    # with a dry run it is the plan's
