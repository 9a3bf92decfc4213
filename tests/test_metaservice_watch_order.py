"""A Watch call adds the ledgers of its requests in the order they were sent, and counts each ledger
against its peer's limit once, however the requests and the store's sessions come and go."""
from __future__ import annotations

import queue
import threading
import time

import pytest
from conftest import GOLDEN

from bkdisk.metaservice.limits import PeerCounts
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.metaservice.store import StoreUnavailable
from bkdisk.metaservice.watch_stream import WatchStream

HMAC_BIN = GOLDEN / "cluster-3" / "metadata" / "1000.bin"
PEER = "ipv4:127.0.0.9"


class Context:
    """The part of grpc.ServicerContext a Watch call uses."""

    def __init__(self):
        self.active = True

    def is_active(self) -> bool:
        return self.active

    def peer(self) -> str:
        return f"{PEER}:5555"

    def abort(self, code, details):
        raise AssertionError(f"aborted: {code} {details}")


def _requests(ids, release: threading.Event):
    release.wait(10)
    for lid in ids:
        yield pb.LedgerMetadataRequest(ledger_id=lid).SerializeToString()
    threading.Event().wait(30)     # the client keeps its side open


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "m.db")
    for lid in (1, 2, 3):
        s.create(0, lid, HMAC_BIN.read_bytes())
    yield s
    s.close()


def _first(responses, n: int) -> list[int]:
    """The ledgers of the first ``n`` responses, each CURRENT (the stream stays open)."""
    out = []
    for response in responses:
        assert pb.ChangeType.Name(response.change) == "CURRENT", response
        out.append(response.ledger_id)
        if len(out) == n:
            return out
    raise AssertionError(f"the stream ended after {out}")


class _TakenLate(queue.Queue):
    """An inbox whose waiting take returns its first request only once the next two are in line: the
    stream, waiting for a first request, sees the others arrive before it handles the one it took."""

    def get(self, block=True, timeout=None):
        item = super().get(block, timeout)
        if timeout is not None:
            deadline = time.monotonic() + 10
            while self.qsize() < 2 and time.monotonic() < deadline:
                time.sleep(0.005)
        return item


def test_requests_that_come_while_the_first_is_taken_are_added_after_it(store):
    release = threading.Event()
    context = Context()
    stream = WatchStream(store, _requests([1, 2, 3], release), context, PeerCounts(10))
    stream.inbox = _TakenLate()
    release.set()
    try:
        assert _first(stream.run(), 3) == [1, 2, 3]
    finally:
        context.active = False


class _DownOnce:
    """The store with its session down at the first read of ledger 2."""

    def __init__(self, store):
        self.store, self.down = store, True

    def __getattr__(self, name):
        return getattr(self.store, name)

    def read_with_head(self, scope, ledger):
        if ledger == 2 and self.down:
            self.down = False
            raise StoreUnavailable("the session is down; retry")
        return self.store.read_with_head(scope, ledger)


def test_a_request_added_again_after_the_session_is_back_is_counted_once(store):
    release = threading.Event()
    context = Context()
    watches = PeerCounts(3)
    flaky = _DownOnce(store)
    stream = WatchStream(flaky, _requests([1, 2, 3], release), context, watches)
    release.set()
    responses = stream.run()
    try:
        assert _first(responses, 3) == [1, 2, 3]
        assert not flaky.down and watches.held(PEER) == 3
    finally:
        context.active = False
        responses.close()
    assert watches.held(PEER) == 0     # given back as the call ends
