"""Bookie discovery (BP-16, BP-41): registrations that live as long as their bookie's session, and their gRPC
service."""
from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass

from bkdisk.formats.bookieid import validate_bookie_id
from bkdisk.formats.errors import FormatError
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc

RETAINED_EVENTS = 10_000
POLL_SECONDS = 0.2
# How long a Register waits for another session holding its BookieId to end (a bookie restarting while
# its old stream is still being torn down), as a BookKeeper bookie waits for its old ZooKeeper session
# to expire (zkTimeout, 10 s by default) before it refuses to start.
TAKEOVER_WAIT_S = 10.0


class BookieHeld(Exception):
    """A BookieId that a live session, or a bookie outside the service, holds: two bookies answering to
    one id would each be sent the other's entries."""


@dataclass(frozen=True)
class Registration:
    bookie_id: str
    read_only: bool
    info: bytes          # serialized BookieServiceInfoFormat, as BookKeeper stores it in its znode
    session: int


@dataclass(frozen=True)
class BookieEvent:
    sequence: int
    change: str          # CREATED, UPDATED or DELETED
    registration: Registration


class Registry:
    """Registered bookies in memory: a registration belongs to one session and goes with it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._bookies: dict[str, Registration] = {}
        self._events: deque[BookieEvent] = deque(maxlen=RETAINED_EVENTS)
        self._seq = 0
        self._sessions = itertools.count(1)
        self.takeover_wait = TAKEOVER_WAIT_S

    def new_session(self) -> int:
        return next(self._sessions)

    def _emit(self, change: str, reg: Registration) -> None:
        self._seq += 1
        self._events.append(BookieEvent(self._seq, change, reg))
        self._cond.notify_all()

    def register(self, bookie_id: str, read_only: bool, info: bytes, session: int) -> None:
        """Register ``bookie_id`` for ``session``, once no other session holds it (waiting up to
        ``takeover_wait`` for one to end); BookieHeld when one still does."""
        with self._cond:
            if not self._cond.wait_for(lambda: bookie_id not in self._bookies, self.takeover_wait):
                raise BookieHeld(f"{bookie_id} is registered by another session that is still live "
                                 f"(waited {self.takeover_wait:g} s for it to end)")
            reg = Registration(bookie_id, read_only, info, session)
            self._bookies[bookie_id] = reg
            self._emit("CREATED", reg)

    def unregister(self, bookie_id: str, session: int | None = None) -> bool:
        """Remove ``bookie_id`` (only if still held by ``session`` when one is given)."""
        with self._cond:
            reg = self._bookies.get(bookie_id)
            if reg is None or (session is not None and reg.session != session):
                return False
            del self._bookies[bookie_id]
            self._emit("DELETED", reg)
            return True

    def listing(self) -> tuple[list[Registration], int]:
        with self._cond:
            return sorted(self._bookies.values(), key=lambda r: r.bookie_id), self._seq

    def get(self, bookie_id: str) -> Registration | None:
        with self._cond:
            return self._bookies.get(bookie_id)

    def events_after(self, sequence: int, timeout: float) -> list[BookieEvent] | None:
        """Events after ``sequence`` (waiting up to ``timeout``); None if they were dropped."""
        with self._cond:
            self._cond.wait_for(lambda: self._seq > sequence, timeout)
            if self._events and self._events[0].sequence > sequence + 1:
                return None
            if not self._events and self._seq > sequence:
                return None
            return [e for e in self._events if e.sequence > sequence]


def _info(reg: Registration) -> pb.BookieInfo:
    return pb.BookieInfo(bookie_id=reg.bookie_id, read_only=reg.read_only,
                         info=pb.BookieServiceInfoFormat.FromString(reg.info))


class DiscoveryServicer(pb_grpc.DiscoveryServiceServicer):
    """Who may call it is settled before a call runs (call_gate)."""

    def __init__(self, registry: Registry):
        self.registry = registry

    def _checked_id(self, request: pb.BookieRequest) -> str | pb.BookieResponse:
        try:
            return validate_bookie_id(request.bookie_id)
        except FormatError as exc:
            return pb.BookieResponse(code=pb.BAD_REQUEST, ledger_scope_id=request.ledger_scope_id,
                                     message=f"invalid BookieId: {exc.found} (expected {exc.expected})")

    def ListBookies(self, request, context):
        regs, seq = self.registry.listing()
        return pb.BookieResponse(code=pb.SUCCESS, sequence=seq, ledger_scope_id=request.ledger_scope_id,
                                 bookies=[_info(r) for r in regs if r.read_only == request.read_only])

    def GetBookieServiceInfo(self, request, context):
        bookie = self._checked_id(request)
        if isinstance(bookie, pb.BookieResponse):
            return bookie
        reg = self.registry.get(bookie)
        if reg is None:
            return pb.BookieResponse(code=pb.BOOKIE_NOT_FOUND, ledger_scope_id=request.ledger_scope_id,
                                     message=f"no bookie registered as {bookie!r}")
        return pb.BookieResponse(code=pb.SUCCESS, ledger_scope_id=request.ledger_scope_id,
                                 bookies=[_info(reg)])

    def Register(self, request, context):
        bookie = self._checked_id(request)
        if isinstance(bookie, pb.BookieResponse):
            yield bookie
            return
        session = self.registry.new_session()
        ended = threading.Event()
        context.add_callback(ended.set)
        try:
            self.registry.register(bookie, request.read_only, request.info.SerializeToString(), session)
        except BookieHeld as exc:
            yield pb.BookieResponse(code=pb.BOOKIE_EXISTS, ledger_scope_id=request.ledger_scope_id, message=str(exc))
            return
        try:
            yield pb.BookieResponse(code=pb.SUCCESS, change=pb.CREATED, ledger_scope_id=request.ledger_scope_id,
                                    bookies=[_info(self.registry.get(bookie) or Registration(
                                        bookie, request.read_only, request.info.SerializeToString(), session))])
            while not ended.wait(POLL_SECONDS) and context.is_active():
                pass
        finally:   # the session ended: an ephemeral registration goes with it
            self.registry.unregister(bookie, session)

    def Unregister(self, request, context):
        bookie = self._checked_id(request)
        if isinstance(bookie, pb.BookieResponse):
            return bookie
        if not self.registry.unregister(bookie):
            return pb.BookieResponse(code=pb.BOOKIE_NOT_FOUND, ledger_scope_id=request.ledger_scope_id,
                                     message=f"no bookie registered as {bookie!r}")
        return pb.BookieResponse(code=pb.SUCCESS, change=pb.DELETED,
                                 ledger_scope_id=request.ledger_scope_id)

    def WatchBookies(self, request, context):
        if request.HasField("after_sequence"):
            seq = request.after_sequence
        else:
            regs, seq = self.registry.listing()
            for r in regs:
                yield pb.BookieResponse(code=pb.SUCCESS, change=pb.CURRENT, sequence=seq,
                                        bookies=[_info(r)], ledger_scope_id=request.ledger_scope_id)
            # change NONE marks the end of the snapshot: the watcher is now in sync.
            yield pb.BookieResponse(code=pb.SUCCESS, change=pb.NONE, sequence=seq,
                                    ledger_scope_id=request.ledger_scope_id)
        while context.is_active():
            events = self.registry.events_after(seq, POLL_SECONDS)
            if events is None:
                yield pb.BookieResponse(code=pb.BAD_VERSION, ledger_scope_id=request.ledger_scope_id,
                                        message=f"registration events after {seq} were dropped")
                return
            for e in events:
                seq = e.sequence
                yield pb.BookieResponse(code=pb.SUCCESS, change=pb.ChangeType.Value(e.change),
                                        sequence=e.sequence, bookies=[_info(e.registration)],
                                        ledger_scope_id=request.ledger_scope_id)
