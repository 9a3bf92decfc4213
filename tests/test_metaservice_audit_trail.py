"""The audit trail's lines are written by a thread of its own, in the order the mutations were
answered, without a flush being asked for; a batch has a line per request; a call's own thread
never writes them (it only notes what they say)."""
from __future__ import annotations

import collections
import io
import threading
import time

import pytest
from conftest import GOLDEN
from metaservice_fixture import served

from bkdisk.metaservice import audit_trail
from bkdisk.metaservice.create_batches import create_many
from bkdisk.metaservice.sqlite_store import SqliteStore

BIN = (GOLDEN / "cluster-3" / "metadata" / "1000.bin").read_bytes()


@pytest.fixture(autouse=True)
def trail_on(monkeypatch):
    """The trail as `bkdisk metadata serve` has it: on (a program embedding the service turns it on)."""
    monkeypatch.setattr(audit_trail.LINES, "on", True)


def _lines() -> audit_trail._Lines:
    lines = audit_trail._Lines()
    lines.on = True
    return lines


class Recording(io.StringIO):
    """stderr standing in: what was written and by which threads."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[str] = set()

    def write(self, s: str) -> int:
        self.writers.add(threading.current_thread().name)
        return super().write(s)


def _trail_lines(err: Recording, n: int) -> list[str]:
    """The trail's lines once ``n`` are there (the writer writes a batch 20 ms after its first line)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [x.split(f" {audit_trail.NAME} ", 1)[1] for x in err.getvalue().splitlines()
                 if f" {audit_trail.NAME} " in x]
        if len(lines) >= n:
            return lines
        time.sleep(0.01)
    raise AssertionError(f"{n} audit lines expected, got: {err.getvalue()!r}")


def test_the_lines_come_from_the_trails_thread_in_order_with_a_line_per_batch_request(tmp_path, monkeypatch):
    audit_trail.flush()              # what an earlier test left goes to its stderr, before this test's
    err = Recording()
    monkeypatch.setattr("sys.stderr", err)
    with served(SqliteStore(tmp_path / "m.db")) as (client, _port):
        client.create(BIN, ledger_id=5)
        client.write(5, BIN, 0)
        got = create_many(client, [(0, 6, BIN), (0, 5, BIN)])
        assert [type(g).__name__ for g in got] == ["Ledger", "MetadataError"]
        client.remove(6)
        lines = _trail_lines(err, 5)
    assert err.writers == {"audit-trail"}                 # never the calls' threads
    shapes = [(x.split()[0], x.split()[2], x.split()[-1]) for x in lines]
    q5, q6 = "ledger=" + "5".zfill(32), "ledger=" + "6".zfill(32)
    assert shapes == [("Create", "token=none", "outcome=SUCCESS"),
                      ("Write", "token=none", "outcome=SUCCESS"),
                      ("CreateMany[0]", "token=none", "outcome=SUCCESS"),
                      ("CreateMany[1]", "token=none", "outcome=LEDGER_EXISTS"),
                      ("Remove", "token=none", "outcome=SUCCESS")]
    assert [x.split()[3] for x in lines] == [q5, q5, q6, q5, q6]
    assert all(x.split()[1].startswith("peer=ipv4:127.0.0.1:") for x in lines)


def test_a_line_has_the_form_of_the_services_log_lines(monkeypatch):
    err = Recording()
    monkeypatch.setattr("sys.stderr", err)
    audit_trail.LINES.note("Remove", ("ipv4:127.0.0.1:1", None, "full"), ("ledger", 0, 7), "SUCCESS")
    audit_trail.flush()
    (line,) = err.getvalue().splitlines()
    stamp, rest = line[:23], line[24:]
    time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")
    assert stamp[19] == "," and stamp[20:].isdigit()
    assert rest == f"{audit_trail.NAME} Remove peer=ipv4:127.0.0.1:1 token=full ledger={'7'.zfill(32)} outcome=SUCCESS"


def _wait_written(err: io.StringIO, n: int, seconds: float = 5.0) -> int:
    deadline = time.monotonic() + seconds
    while err.getvalue().count("\n") < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return err.getvalue().count("\n")


def test_two_calls_noting_at_the_same_moment_both_wake_the_writer(monkeypatch):
    """Each call appends, then the other, before either looks at the queue: the writer is still
    woken (and started) and writes both without a flush."""
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    both_appended = threading.Barrier(2)

    class Racing(collections.deque):
        def append(self, x):
            super().append(x)
            both_appended.wait()          # the thread switch that may fall between the append and the check

    lines = _lines()
    lines._notes = Racing()
    ts = [threading.Thread(target=lines.note, args=("Remove", ("ipv4:10.0.0.1:1", None, "full"), ("ledger", 0, i), 0))
          for i in (1, 2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert _wait_written(err, 2) == 2


def test_the_writer_survives_a_missing_stderr_and_a_note_it_cannot_word(monkeypatch):
    """Started with stderr closed (sys.stderr None) the lines are dropped, not held, and the writer
    lives on; a note that does not format is one line saying so."""
    monkeypatch.setattr("sys.stderr", None)
    lines = _lines()
    for i in range(1000):
        lines.note("Remove", ("ipv4:10.0.0.1:1", None, "full"), ("ledger", 0, i), 0)
    deadline = time.monotonic() + 5
    while lines._notes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not lines._notes and lines._writer is not None and lines._writer.is_alive()
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    lines.note("Write", ("ipv4:10.0.0.1:1", None, "full"), ("ledger", 0), 0)      # a subject missing its id
    lines.note("Remove", ("ipv4:10.0.0.1:1", None, "full"), ("ledger", 0, 3), 0)
    assert _wait_written(err, 2) == 2
    first, second = err.getvalue().splitlines()
    assert first.endswith(f"{audit_trail.NAME} Write (its audit line could not be formatted: IndexError)")
    assert second.endswith("outcome=SUCCESS") and lines._writer.is_alive()


def test_a_writer_that_falls_behind_is_caught_up_by_the_calls(monkeypatch):
    """Lines held waiting for the writer are bounded: past MAX_NOTED the noting call writes them."""
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr(audit_trail, "MAX_NOTED", 50)
    lines = _lines()
    with lines._write_lock:                          # the writer stalled (a stderr nobody reads)
        lines._writer = threading.current_thread()   # and never started: only the calls can write
        for i in range(60):
            threading.Thread(target=lines.note, args=("Remove", ("p", None, "full"), ("ledger", 0, i), 0)).start()
        time.sleep(0.2)
        assert err.getvalue() == ""
    assert _wait_written(err, 51) >= 51


def test_a_service_a_program_embeds_writes_no_trail_unless_asked(tmp_path, monkeypatch):
    err = Recording()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr(audit_trail.LINES, "on", False)
    with served(SqliteStore(tmp_path / "m.db")) as (client, _port):
        client.create(BIN, ledger_id=5)
    audit_trail.flush()
    assert err.getvalue() == ""
