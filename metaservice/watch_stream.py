"""One Watch call of the metadata service: the ledgers it follows, and their changes sent in
change-log order."""
from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError

from bkdisk.metaservice.limits import PeerCounts, peer_host
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.responses import ledger_id_of, ledger_response
from bkdisk.metaservice.store import Change, MetadataStore, StoreError, StoreUnavailable

WATCH_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Unreadable:
    """A request of the stream that did not parse: the call ends with ``message``."""
    message: str


class WatchStream:
    """One Watch call: requests add ledgers (or everything); changes go out in change-log order.

    A ledger added without ``after_sequence`` first gets its CURRENT state, read together with the
    change-log head, then every later change; with ``after_sequence`` it gets every change after
    that sequence, which is how a client resumes after a reconnect without losing or doubling one.
    """

    def __init__(self, store: MetadataStore, requests: Iterator, context: grpc.ServicerContext,
                 watches: PeerCounts):
        self.store = store
        self.context = context
        self.watches = watches         # ledgers followed per peer, across its streams
        self.peer = peer_host(context.peer())
        self.counted: set[tuple[int, int] | None] = set()   # keys counted in ``watches`` for this stream
        self.inbox: queue.Queue = queue.Queue()  # requests as the pump parses them
        self.pending: deque = deque()            # requests taken from the inbox, to add in this order
        self.delivered: dict[tuple[int, int] | None, int] = {}   # key (None: all) -> last sequence sent
        self.format_version = 0
        self.cursor: int | None = None
        threading.Thread(target=self._pump, args=(requests,), daemon=True).start()

    def _pump(self, requests: Iterator[bytes]) -> None:
        """Requests into the inbox as they come, parsed here (registration.RAW_REQUESTS); one that does
        not parse goes in as Unreadable, and nothing after it."""
        try:
            for raw in requests:
                try:
                    self.inbox.put(pb.LedgerMetadataRequest.FromString(raw))
                except DecodeError as exc:
                    self.inbox.put(Unreadable(f"a Watch request of {len(raw)} bytes that does not parse: {exc}"))
                    return
        except Exception:   # the client went away; the stream ends on is_active()
            pass

    def _add(self, r: pb.LedgerMetadataRequest) -> Iterator[pb.LedgerMetadataResponse]:
        self.format_version = r.format_version
        key = None if r.watch_all else (r.ledger_scope_id, ledger_id_of(r))
        scope, ledger = key if key is not None else (0, None)
        if key not in self.counted:   # once, even when the request is added again after the store is back
            if not self.watches.take(self.peer):
                self.context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                   f"{self.peer} follows {self.watches.limit} ledgers already "
                                   "(serve --max-watches-per-peer)")
            self.counted.add(key)
        self.store.follow(scope, ledger)
        if r.HasField("after_sequence"):
            start = r.after_sequence
            self.store.resumable(scope, ledger, start)   # BadVersion here if that point is not held
        elif key is None:
            start = self.store.head_sequence()
        else:
            got, start = self.store.read_with_head(*key)
            if not r.HasField("known_version"):
                if got is not None:
                    yield ledger_response(got.scope, got.ledger, got.version, got.data, self.format_version,
                                    change=pb.CURRENT, sequence=start)
            elif got is None and r.known_version >= 0:
                yield pb.LedgerMetadataResponse(code=pb.SUCCESS, ledger_scope_id=key[0], ledger_id=key[1],
                                                version=r.known_version, change=pb.DELETED, sequence=start)
            elif got is not None and r.known_version < 0:
                yield ledger_response(got.scope, got.ledger, got.version, got.data, self.format_version,
                                change=pb.CREATED, sequence=start)
            elif got is not None and got.version != r.known_version:
                # a lower version than known is a new incarnation: deleted and created again
                if got.version < r.known_version:
                    yield pb.LedgerMetadataResponse(code=pb.SUCCESS, ledger_scope_id=key[0],
                                                    ledger_id=key[1], version=r.known_version,
                                                    change=pb.DELETED, sequence=start)
                yield ledger_response(got.scope, got.ledger, got.version, got.data, self.format_version,
                                change=pb.UPDATED if got.version > r.known_version else pb.CREATED,
                                sequence=start)
        self.delivered[key] = start
        self.cursor = start if self.cursor is None else min(self.cursor, start)

    def _wanted(self, c: Change) -> bool:
        key = (c.scope, c.ledger)
        marks = [m for k, m in ((key, self.delivered.get(key)), (None, self.delivered.get(None)))
                 if m is not None]
        return bool(marks) and c.sequence > min(marks)

    def run(self) -> Iterator[pb.LedgerMetadataResponse]:
        try:
            while self.context.is_active():
                try:
                    yield from self._follow()
                    return
                except StoreUnavailable:   # the store session is re-established: the watch stays open
                    time.sleep(WATCH_POLL_SECONDS)
        finally:
            self.watches.give(self.peer, len(self.counted))

    def _follow(self) -> Iterator[pb.LedgerMetadataResponse]:
        try:
            while self.context.is_active():
                self._take_requests()
                while self.pending:
                    request = self.pending.popleft()
                    if isinstance(request, Unreadable):
                        self.context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
                    try:
                        yield from self._add(request)
                    except StoreUnavailable:
                        self.pending.appendleft(request)   # added again, first, once the store is back
                        raise
                if self.cursor is None:
                    self.inbox_wait()
                    continue
                changes = self.store.changes_since(self.cursor)
                for c in changes:
                    self.cursor = c.sequence
                    if not self._wanted(c):
                        continue
                    for k in ((c.scope, c.ledger), None):
                        if k in self.delivered:
                            self.delivered[k] = max(self.delivered[k], c.sequence)
                    yield self._change(c)
                if not changes:
                    self.store.wait_for_change(self.cursor, WATCH_POLL_SECONDS)
        except StoreUnavailable:
            raise
        except StoreError as exc:
            yield pb.LedgerMetadataResponse(code=pb.StatusCode.Value(exc.code), message=exc.message)

    def _take_requests(self) -> None:
        while True:
            try:
                self.pending.append(self.inbox.get_nowait())
            except queue.Empty:
                return

    def inbox_wait(self) -> None:
        """Wait for a request while the stream follows nothing yet; one that comes is kept first in line."""
        try:
            self.pending.append(self.inbox.get(timeout=WATCH_POLL_SECONDS))
        except queue.Empty:
            pass

    def _change(self, c: Change) -> pb.LedgerMetadataResponse:
        kind = pb.ChangeType.Value(c.change)
        if c.data is None:
            return pb.LedgerMetadataResponse(code=pb.SUCCESS, ledger_scope_id=c.scope,
                                             ledger_id=c.ledger, version=c.version, change=kind,
                                             sequence=c.sequence)
        return ledger_response(c.scope, c.ledger, c.version, c.data, self.format_version, change=kind,
                         sequence=c.sequence)
