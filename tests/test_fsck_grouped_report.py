"""The human report says each root cause once, with the ledgers and entry ranges it takes; per-entry
findings are listed only with -v (and in --json); -q prints a subset of the default."""
from __future__ import annotations

import json
import os

from click.testing import CliRunner

from bkdisk.fsck_cli import fsck_command
from tests.conftest import golden_copy
from tests.fsck_helpers import make_disk


def _out(*args) -> tuple[int, str]:
    r = CliRunner().invoke(fsck_command, [str(a) for a in args])
    return r.exit_code, r.stdout


def _findings_lines(text: str) -> list[str]:
    return [l for l in text.splitlines() if l.startswith("  ") and l.strip()]


def test_a_lost_db_entry_log_is_one_line_naming_its_ledgers_and_entry_ranges(tmp_path):
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    os.chmod(root / "ledgers0" / "current", 0o755)
    (root / "ledgers0" / "current" / "0.log").unlink()
    md = root / "metadata"
    code, default = _out(root, "--metadata-dir", md)
    assert code == 4
    heads = [l for l in _findings_lines(default) if not l.lstrip().startswith("->")]
    (cause,) = [l for l in heads if "LOG_MISSING" in l]
    assert "0.log" in cause and "ledger 0 entries 0-32" in cause and "ledger 4660 entries 0-11" in cause
    # no line per entry: the consequences are summed up under the cause
    assert not any("entry 7," in l or "entry 7 " in l for l in _findings_lines(default)), default
    assert len(_findings_lines(default)) < 15, default
    _code, verbose = _out(root, "--metadata-dir", md, "-v")
    assert "expected ledger 4660 entry 7 on this bookie" in verbose
    _code, quiet = _out(root, "--metadata-dir", md, "-q")
    quiet_lines, default_lines = quiet.splitlines(), default.splitlines()
    assert set(quiet_lines[:-1]) <= set(default_lines) and len(quiet_lines) < len(default_lines)
    doc = json.loads(_out(root, "--metadata-dir", md, "--json")[1])
    located = sum(f["code"] == "DBINDEX_LOCATION_MISSING_LOG" for f in doc["findings"])
    assert located > 20 and sum("DBINDEX_LOCATION_MISSING_LOG" in l for l in verbose.splitlines()) == located
    missing = [f for f in doc["findings"] if f["code"] == "ENTRY_MISSING"]
    assert missing and all(f["caused_by"]["code"] == "LOG_MISSING" for f in missing)


def test_quiet_never_prints_more_than_the_default(tmp_path):
    disk = make_disk(str(tmp_path))
    for log in disk.written.entry_log_files[:3]:
        os.remove(log)
    for name in sorted(disk.written.index_files)[:2]:
        os.truncate(disk.written.index_files[name], 1000)
    for extra in ([], ["--metadata-dir", disk.md_dir]):
        _c, default = _out(disk.root, *extra)
        _c, quiet = _out(disk.root, *extra, "-q")
        assert len(quiet.splitlines()) < len(default.splitlines()), (quiet, default)
        assert set(quiet.splitlines()[:-1]) <= set(default.splitlines())
