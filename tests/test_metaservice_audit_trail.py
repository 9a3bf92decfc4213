"""The audit trail's lines are written by a thread of its own, in the order the mutations were
answered, without a flush being asked for; a batch has a line per request; a call's own thread
never writes them (it only notes what they say)."""
from __future__ import annotations

import io
import threading
import time

from conftest import GOLDEN
from metaservice_fixture import served

from bkdisk.metaservice import audit_trail
from bkdisk.metaservice.create_batches import create_many
from bkdisk.metaservice.sqlite_store import SqliteStore

BIN = (GOLDEN / "cluster-3" / "metadata" / "1000.bin").read_bytes()


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
    err = Recording()
    monkeypatch.setattr("sys.stderr", err)
    audit_trail.flush()                                   # nothing of an earlier test left to write
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
    audit_trail.LINES.note("Remove", "peer=ipv4:127.0.0.1:1 token=full", ("ledger", 0, 7), "SUCCESS")
    audit_trail.flush()
    (line,) = err.getvalue().splitlines()
    stamp, rest = line[:23], line[24:]
    time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")
    assert stamp[19] == "," and stamp[20:].isdigit()
    assert rest == f"{audit_trail.NAME} Remove peer=ipv4:127.0.0.1:1 token=full ledger={'7'.zfill(32)} outcome=SUCCESS"
