"""The audit's scrub options (``--state``, ``--deep-interval``, ``--deep-all``, ``--deep-max-load``,
``--as-of``), shared by ``bkdisk audit`` and ``bkdisk scan-disk``: their value types and the ScrubRun
they make (audit/scrub_run.py)."""
from __future__ import annotations

import datetime
import re

import click

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# Bounds that keep every time a schedule computes (a run's time plus an interval) a datetime's.
LONGEST = datetime.timedelta(days=3650)
EARLIEST = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
LATEST = datetime.datetime(9000, 1, 1, tzinfo=datetime.UTC)


class Duration(click.ParamType):
    """``7d``, ``36h``, ``2w``: a whole number and a unit (s, m, h, d, w)."""
    name = "DURATION"

    def convert(self, value, param, ctx) -> datetime.timedelta:
        if isinstance(value, datetime.timedelta):
            return value
        m = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", str(value))
        if m is None or int(m.group(1)) == 0:
            self.fail(f"expected a positive number and a unit (s, m, h, d, w), e.g. 7d; found {value!r}", param, ctx)
        seconds = int(m.group(1)) * UNITS[m.group(2)]
        if seconds > LONGEST.total_seconds():
            self.fail(f"expected at most {LONGEST.days}d, found {value!r}", param, ctx)
        return datetime.timedelta(seconds=seconds)


class Instant(click.ParamType):
    """An ISO 8601 time (``2026-12-01T02:00:00Z``); without a zone, UTC."""
    name = "ISO8601"

    def convert(self, value, param, ctx) -> datetime.datetime:
        if isinstance(value, datetime.datetime):
            return value
        try:
            t = datetime.datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"expected an ISO 8601 time such as 2026-12-01T02:00:00Z, found {value!r}", param, ctx)
        t = t.replace(tzinfo=datetime.UTC) if t.tzinfo is None else t.astimezone(datetime.UTC)
        if not EARLIEST <= t <= LATEST:
            self.fail(f"expected a time from {EARLIEST.year} to {LATEST.year}, found {value!r}", param, ctx)
        return t


def scrub_run(state: str | None, interval: datetime.timedelta | None, deep_all: bool,
              as_of: datetime.datetime | None, max_load: float | None = None):
    """The run's ScrubRun, None without ``--state`` (the audit reads every byte, as always)."""
    if state is None:
        if interval is not None or deep_all or as_of is not None or max_load is not None:
            raise click.UsageError("--deep-interval, --deep-all and --as-of go with --state DIR, "
                                   "as does --deep-max-load")
        return None
    from bkdisk.audit.scrub_run import ScrubRun
    from bkdisk.audit.scrub_schedule import DEFAULT_INTERVAL, Schedule
    now = as_of or datetime.datetime.now(datetime.UTC)
    return ScrubRun.open(state, Schedule(interval=interval or DEFAULT_INTERVAL), now, deep_all, max_load)


def scrub_options(f):
    """The scrub options of ``bkdisk audit`` and ``bkdisk scan-disk``."""
    for opt in reversed([
        click.option("--state", default=None, metavar="DIR",
                     help="Scrub state folder: read payloads only of the entry logs due, walk the rest light."),
        click.option("--deep-interval", type=Duration(), default=None,
                     help="With --state: every entry log deep-checked at least once per this (default 7d)."),
        click.option("--deep-all", is_flag=True, help="With --state: deep-check every entry log, and record it."),
        click.option("--deep-max-load", type=click.FloatRange(min=0), default=None, metavar="L",
                     help="With --state: above this 1-minute load average per CPU of the host scanning a "
                          "disk, its deep checks wait for a later run (light check only; default: no limit)."),
        click.option("--as-of", type=Instant(), default=None,
                     help="With --state: the run's time (ISO 8601; default now)."),
    ]):
        f = opt(f)
    return f
