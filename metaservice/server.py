"""The gRPC LedgerMetadataService (BP-16) over a MetadataStore, and ``serve`` that starts it with discovery."""
from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from bkdisk.metaservice import ledgers, malformed_log
from bkdisk.metaservice.auth import SERVICES, Tokens
from bkdisk.metaservice.call_gate import CallGate
from bkdisk.metaservice.discovery import DiscoveryServicer, Registry
from bkdisk.metaservice.limits import DEFAULT_MAX_REQUEST, UNARY_WORKERS, Limits, PeerCounts
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc
from bkdisk.metaservice.registration import add_service
from bkdisk.metaservice.request_log import RequestLog
from bkdisk.metaservice.responses import ledger_id_of, ledger_response
from bkdisk.metaservice.store import (
    BadRequest,
    MetadataStore,
    StoreError,
    Versioned,
    check_ids,
)
from bkdisk.metaservice.watch_stream import WatchStream
from bkdisk.metaservice.withheld import strip_passwords

log = logging.getLogger(__name__)

MAX_PAGE = 100_000


def failure(response_type: Any, request: Any, exc: Exception, name: str) -> Any:
    """What went wrong as a response: StoreError -> its status code, any other exception ->
    UNEXPECTED (logged)."""
    extra = ({"ledger_scope_id": getattr(request, "ledger_scope_id", 0)}
             if "ledger_scope_id" in response_type.DESCRIPTOR.fields_by_name else {})
    if isinstance(exc, StoreError):
        return response_type(code=pb.StatusCode.Value(exc.code), message=exc.message, **extra)
    log.error("unexpected failure in %s", name, exc_info=exc)
    return response_type(code=pb.UNEXPECTED, message=f"{type(exc).__name__}: {exc}"[:300], **extra)


def outcome(response_type: Any, request: Any, run: Callable[[], Any], name: str) -> Any:
    """``run()``'s response, or what went wrong as one (``failure``)."""
    try:
        return run()
    except Exception as exc:   # a bug must reach the client as a status
        return failure(response_type, request, exc, name)


def guarded(response_type: Any) -> Callable:
    """Turn the outcome of a unary handler into a response (``outcome``). Who may call it is
    settled before it runs (call_gate)."""
    def wrap(fn: Callable) -> Callable:
        def handler(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
            return outcome(response_type, request, lambda: fn(self, request, context), fn.__name__)
        handler.__name__ = fn.__name__
        return handler
    return wrap


def _batch(request: pb.LedgerBatchRequest, limit: int) -> list[pb.LedgerMetadataRequest]:
    if len(request.requests) > limit:
        raise BadRequest(f"a batch holds at most {limit} requests")
    return list(request.requests)


def _write_args(request: pb.LedgerMetadataRequest) -> tuple[int, int, bytes, int]:
    ledger = ledger_id_of(request)
    if not request.HasField("expected_version"):
        raise BadRequest("expected_version is required: a write is a compare-and-set")
    data = ledgers.incoming(request.metadata, request.serialized_metadata)
    return request.ledger_scope_id, ledger, data, request.expected_version


def _written(got: Versioned) -> pb.LedgerMetadataResponse:
    return ledger_response(got.scope, got.ledger, got.version, got.data, 0)


class LedgerMetadataServicer(pb_grpc.LedgerMetadataServiceServicer):
    def __init__(self, store: MetadataStore, limits: Limits | None = None):
        self.store = store
        self.limits = limits = limits or Limits()
        self.watches = PeerCounts(limits.watches_per_peer)

    @guarded(pb.LedgerMetadataResponse)
    def Create(self, request, context):
        scope = request.ledger_scope_id
        ledger = request.ledger_id if request.HasField("ledger_id") else None
        check_ids(scope, ledger)
        data = ledgers.incoming(request.metadata, request.serialized_metadata)
        got = self.store.create(scope, ledger, data)
        return ledger_response(scope, got.ledger, got.version, got.data, 0)

    @guarded(pb.LedgerMetadataResponse)
    def Remove(self, request, context):
        ledger = ledger_id_of(request)
        expected = request.expected_version if request.HasField("expected_version") else None
        self.store.remove(request.ledger_scope_id, ledger, expected)
        return pb.LedgerMetadataResponse(code=pb.SUCCESS, ledger_scope_id=request.ledger_scope_id,
                                         ledger_id=ledger)

    @guarded(pb.LedgerMetadataResponse)
    def Read(self, request, context):
        return self._read(request)

    def _read(self, request: pb.LedgerMetadataRequest) -> pb.LedgerMetadataResponse:
        ledger = ledger_id_of(request)
        got = self.store.read(request.ledger_scope_id, ledger, consistent=request.consistent_read)
        return ledger_response(got.scope, got.ledger, got.version, got.data, request.format_version)

    @guarded(pb.LedgerBatchResponse)
    def ReadMany(self, request, context):
        items = _batch(request, self.limits.max_batch)
        return pb.LedgerBatchResponse(code=pb.SUCCESS, responses=[
            outcome(pb.LedgerMetadataResponse, r, functools.partial(self._read, r), "Read") for r in items])

    @guarded(pb.LedgerMetadataResponse)
    def Write(self, request, context):
        return _written(self.store.write(*_write_args(request)))

    @guarded(pb.LedgerBatchResponse)
    def WriteMany(self, request, context):
        # Each write checked and applied on its own, in the order given (the store pipelines them).
        items = _batch(request, self.limits.max_batch)
        out: list = [None] * len(items)
        valid: list[tuple[int, tuple]] = []
        for i, r in enumerate(items):
            try:
                valid.append((i, _write_args(r)))
            except StoreError as exc:
                out[i] = failure(pb.LedgerMetadataResponse, r, exc, "Write")
        results = self.store.write_many([args for _i, args in valid])
        for (i, _args), got in zip(valid, results):
            out[i] = (failure(pb.LedgerMetadataResponse, items[i], got, "Write") if isinstance(got, Exception)
                      else outcome(pb.LedgerMetadataResponse, items[i], functools.partial(_written, got), "Write"))
        return pb.LedgerBatchResponse(code=pb.SUCCESS, responses=out)

    @guarded(pb.LedgerBatchResponse)
    def CreateMany(self, request, context):
        # Create-only, each item on its own, in order (the store sends them as one batch). A created
        # ledger is answered with its ids and version: the caller holds the metadata it sent.
        items = _batch(request, self.limits.max_batch)
        out: list = [None] * len(items)
        valid: list[tuple[int, tuple]] = []
        for i, r in enumerate(items):
            try:
                valid.append((i, (r.ledger_scope_id, ledger_id_of(r),
                                  ledgers.incoming(r.metadata, r.serialized_metadata))))
            except StoreError as exc:
                out[i] = failure(pb.LedgerMetadataResponse, r, exc, "Create")
        results = self.store.create_many([args for _i, args in valid])
        for (i, _args), got in zip(valid, results):
            out[i] = (failure(pb.LedgerMetadataResponse, items[i], got, "Create") if isinstance(got, Exception)
                      else pb.LedgerMetadataResponse(code=pb.SUCCESS, ledger_scope_id=got.scope,
                                                     ledger_id=got.ledger, version=got.version))
        return pb.LedgerBatchResponse(code=pb.SUCCESS, responses=out)

    def Iterate(self, request, context):
        scope = request.ledger_scope_id
        limit = request.limit_per_response
        if not 1 <= limit <= MAX_PAGE:
            yield pb.GetLedgerRangesResponse(code=pb.BAD_REQUEST, ledger_scope_id=scope,
                                             message=f"limit_per_response must be 1..{MAX_PAGE}")
            return
        try:
            scopes = [0] + [s for s in self.store.scopes() if s] if request.all_scopes else [scope]
            for s in scopes:
                after = None
                while context.is_active():
                    ids = self.store.ledger_ids(s, after, limit)
                    if not ids:
                        break
                    after = ids[-1]
                    yield pb.GetLedgerRangesResponse(code=pb.SUCCESS, ledger_scope_id=s,
                                                     count=len(ids),
                                                     serialized_ranges=_ranges(s, ids))
                    if len(ids) < limit:
                        break
        except StoreError as exc:
            yield pb.GetLedgerRangesResponse(code=pb.StatusCode.Value(exc.code),
                                             ledger_scope_id=scope, message=exc.message)

    def ReadLedgers(self, request, context):
        size = request.page_size
        if not 1 <= size <= MAX_PAGE:
            yield pb.ReadLedgersResponse(code=pb.BAD_REQUEST,
                                         message=f"page_size must be 1..{MAX_PAGE}")
            return
        start = (request.start.ledger_scope_id, request.start.ledger_id) if request.HasField("start") else None
        end = (request.end.ledger_scope_id, request.end.ledger_id) if request.HasField("end") else None
        fmt = request.format_version
        try:
            ledgers.check_format_version(fmt)
            page: list = []
            for batch in self.store.scan(start, end, size):
                for v in batch:
                    data = v.data if not fmt else ledgers.outgoing(v.data, fmt)[1]
                    page.append(pb.StoredLedger(ledger_scope_id=v.scope, ledger_id=v.ledger,
                                                version=v.version, serialized_metadata=data))
                    if len(page) == size:
                        yield pb.ReadLedgersResponse(code=pb.SUCCESS, ledgers=page)
                        page = []
                if not context.is_active():
                    return
            if page:
                yield pb.ReadLedgersResponse(code=pb.SUCCESS, ledgers=page)
        except StoreError as exc:
            yield pb.ReadLedgersResponse(code=pb.StatusCode.Value(exc.code), message=exc.message)

    def Watch(self, request_iterator, context):
        yield from WatchStream(self.store, request_iterator, context, self.watches).run()


def _ranges(scope: int, ids: list[int]) -> bytes:
    out = pb.LedgerRangeList(ledger_scope_id=scope)
    for lid in ids:
        if out.ranges and out.ranges[-1].first + out.ranges[-1].count == lid:
            out.ranges[-1].count += 1
        else:
            out.ranges.add(first=lid, count=1)
    return out.SerializeToString()


def serve(store: MetadataStore, bind: str = "127.0.0.1:0", token: str | None = None,
          max_request_bytes: int = DEFAULT_MAX_REQUEST, workers: int | None = None,
          registry: Registry | None = None,
          tls: tuple[bytes, bytes] | None = None, log_requests: bool = False, *,
          read_token: str | None = None, tls_client_ca: bytes | None = None,
          limits: Limits | None = None) -> tuple[grpc.Server, int]:
    """Start both services and gRPC's health service on ``bind`` (loopback unless told otherwise);
    returns (server, port). ``token``: every call of both services must carry it (``read_token``:
    reads only, passwords withheld); health answers anyone. ``tls``: (PEM key, PEM chain) to serve
    TLS; ``tls_client_ca`` (PEM) then requires a client certificate it signed. ``limits`` bound one
    caller (``max_request_bytes`` its request size when not given); ``log_requests``: one line per
    request (RequestLog). Every mutation is logged (audit_trail) whatever ``log_requests`` says."""
    if limits is None:
        limits = Limits(max_request_bytes=max_request_bytes)
    if workers is None:   # every stream a thread, and threads left for the calls that end
        workers = limits.streams_total + UNARY_WORKERS
    malformed_log.install()
    tokens = Tokens(token, read_token)
    # The request log, an interceptor, runs outside the checks: refused calls have their line too.
    # The checks themselves stand in front of each method (call_gate), not in gRPC's pipeline.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         interceptors=[RequestLog()] if log_requests else None,
                         options=[("grpc.max_receive_message_length", limits.max_request_bytes),
                                  ("grpc.so_reuseport", 0)])
    gate = CallGate(tokens, strip_passwords, limits, certificate_names=tls_client_ca is not None)
    add_service(server, "LedgerMetadataService", LedgerMetadataServicer(store, limits), gate.wrap)
    add_service(server, "DiscoveryService", DiscoveryServicer(registry or store.new_registry()), gate.wrap)
    checks = health.HealthServicer()
    for name in ("", *SERVICES):
        checks.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    if tls is None and tls_client_ca is not None:
        raise StoreError("a client CA needs TLS (a certificate and key)")
    try:   # (grpcio says a failed bind by returning 0, or, since 1.5x, by raising RuntimeError)
        if tls is not None:
            creds = grpc.ssl_server_credentials([tls], root_certificates=tls_client_ca,
                                                require_client_auth=tls_client_ca is not None)
            port = server.add_secure_port(bind, creds)
        else:
            port = server.add_insecure_port(bind)
    except RuntimeError:
        port = 0
    if port == 0:
        server.stop(0)
        why = ("the address is in use or not this host's, or the certificate and key are not a PEM pair"
               if tls is not None else "the address is in use or not this host's")
        raise StoreError(f"cannot serve on {bind}: {why}")
    server.start()
    return server, port
