"""The audit's scrub options on the command line: each refused in one line before Spark starts, and
their values (a duration, an ISO 8601 time) parsed as the spec says."""
from __future__ import annotations

import datetime
import os
import subprocess
import sys

import click
import pytest

from bkdisk.audit.scrub_options import Duration, Instant

BKDISK = os.path.join(os.path.dirname(sys.executable), "bkdisk")


def _state_checked_at(path: str, when: datetime.datetime) -> None:
    """A state whose one log was deep-checked at ``when``."""
    from bkdisk.audit.scrub_schedule import DiskIdentity, LogState
    from bkdisk.audit.scrub_state import DiskState, state_batches, write_state
    from bkdisk.entrylogs.identity import LogIdentity
    log = LogState(LogIdentity(1, 2, 3, b"h" * 16), when, when + datetime.timedelta(days=7), "ok", when)
    write_state(path, state_batches({"/data1": DiskState(DiskIdentity("bk1:3181", "i", b"c"), {0: log})}))


@pytest.mark.parametrize("extra, code, message", [
    (["--deep-all"], 16, "--deep-interval, --deep-all and --as-of go with --state DIR"),
    (["--deep-max-load", "0.5"], 16, "go with --state DIR, as does --deep-max-load"),
    (["--state", "{st}", "--deep-max-load", "-1"], 16, "--deep-max-load"),
    (["--state", "{st}", "--deep-interval", "7x"], 16, "expected a positive number and a unit"),
    (["--state", "{st}", "--as-of", "yesterday"], 16, "expected an ISO 8601 time"),
    (["--state", "{notstate}"], 8, "notstate: not a bkdisk scrub state (no .bkdisk-scrub-state)"),
    (["--state", "{st}", "--deep-interval", "999999w"], 16, "expected at most 3650d"),
    (["--state", "{st}", "--as-of", "9999-12-31T00:00:00Z"], 16, "expected a time from 1970 to 9000"),
    (["--state", "{notstate}/logs.parquet/st"], 8, "logs.parquet is not a folder)"),
    (["--state", "{future}", "--as-of", "2026-11-02T02:00:00Z"], 8, "a run cannot go back before the state's last"),
])
def test_scrub_options_are_refused_in_one_line_before_spark_starts(extra, code, message, tmp_path):
    (tmp_path / "notstate").mkdir()
    (tmp_path / "notstate" / "logs.parquet").write_text("mine")
    _state_checked_at(str(tmp_path / "future"), datetime.datetime(2027, 11, 1, 2, tzinfo=datetime.UTC))
    extra = [a.format(st=tmp_path / "st", notstate=tmp_path / "notstate", future=tmp_path / "future") for a in extra]
    out = tmp_path / "out"
    (tmp_path / "disk").mkdir()       # (not the folder holding --out: an output inside a disk read is refused)
    p = subprocess.run([BKDISK, "audit", str(tmp_path / "disk"), "--metadata-dir", str(tmp_path), "--out", str(out),
                        *extra],
                       capture_output=True, text=True, check=False, timeout=120)
    assert p.returncode == code, p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr and not out.exists()
    assert (tmp_path / "notstate" / "logs.parquet").read_text() == "mine"


def test_durations_and_times_parse_as_the_spec_says():
    assert Duration().convert("7d", None, None) == datetime.timedelta(days=7)
    assert Duration().convert("36h", None, None) == datetime.timedelta(hours=36)
    assert Duration().convert("2w", None, None) == datetime.timedelta(days=14)
    two = datetime.datetime(2026, 12, 1, 2, tzinfo=datetime.UTC)
    assert Instant().convert("2026-12-01T02:00:00", None, None) == two
    assert Instant().convert("2026-12-01T04:00:00+02:00", None, None) == two
    with pytest.raises(click.BadParameter):
        Duration().convert("0d", None, None)


def test_a_state_probed_before_the_run_is_left_as_it_was_and_a_link_is_refused(tmp_path):
    """The probe makes nothing a refused run leaves behind, and a state behind a symbolic link is
    refused (the run's end would replace the link, not the folder it leads to)."""
    from bkdisk.audit.scrub_state import StateError, probe_writable, read_state
    _state_checked_at(str(tmp_path / "real"), datetime.datetime(2026, 11, 1, 2, tzinfo=datetime.UTC))
    before = read_state(str(tmp_path / "real"))
    probe_writable(str(tmp_path / "real"))
    assert read_state(str(tmp_path / "real")) == before and sorted(os.listdir(tmp_path)) == ["real"]
    probe_writable(str(tmp_path / "a" / "b" / "state"))
    assert sorted(os.listdir(tmp_path)) == ["real"]          # nothing made for a state not yet there
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(StateError, match="link: a symbolic link; give the folder it leads to"):
        probe_writable(str(tmp_path / "link"))
