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


@pytest.mark.parametrize("extra, code, message", [
    (["--deep-all"], 16, "--deep-interval, --deep-all and --as-of go with --state DIR"),
    (["--deep-max-load", "0.5"], 16, "go with --state DIR, as does --deep-max-load"),
    (["--state", "{st}", "--deep-max-load", "-1"], 16, "--deep-max-load"),
    (["--state", "{st}", "--deep-interval", "7x"], 16, "expected a positive number and a unit"),
    (["--state", "{st}", "--as-of", "yesterday"], 16, "expected an ISO 8601 time"),
    (["--state", "{notstate}"], 8, "notstate: not a bkdisk scrub state (no .bkdisk-scrub-state)"),
])
def test_scrub_options_are_refused_in_one_line_before_spark_starts(extra, code, message, tmp_path):
    (tmp_path / "notstate").mkdir()
    (tmp_path / "notstate" / "logs.parquet").write_text("mine")
    extra = [a.format(st=tmp_path / "st", notstate=tmp_path / "notstate") for a in extra]
    out = tmp_path / "out"
    p = subprocess.run([BKDISK, "audit", str(tmp_path), "--metadata-dir", str(tmp_path), "--out", str(out), *extra],
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
