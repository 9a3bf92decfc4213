"""Who may call the metadata service: the tokens a call carries (gRPC call metadata), what each allows,
and the interceptor that refuses or narrows a call before its handler runs."""
from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from bkdisk.metaservice.proto import metaservice_pb2 as pb

TOKEN_HEADER = "x-bkdisk-token"
FULL = "full"          # every call
READ = "read"          # reads, listings, watches and discovery reads; passwords withheld
ANONYMOUS = "none"     # no token configured: every caller has FULL

SERVICES = ("bkdisk.metaservice.LedgerMetadataService", "bkdisk.metaservice.DiscoveryService")
# Calls that change metadata or registrations: the full token only.
MUTATING = frozenset({"Create", "CreateMany", "Remove", "Write", "WriteMany", "Register", "Unregister"})


@dataclass(frozen=True)
class Tokens:
    """The full token and the optional read-only one; neither configured: every call is allowed.
    The values never appear in a repr, a log line or an error message."""

    full: str | None = None
    read: str | None = None

    def __post_init__(self) -> None:
        if self.read is not None and self.full is None:
            raise ValueError("a read-only token needs a full token beside it")
        if self.read is not None and self.read == self.full:
            raise ValueError("the read-only token must differ from the full token")

    def __repr__(self) -> str:
        return f"Tokens(full={'set' if self.full else None}, read={'set' if self.read else None})"

    @property
    def required(self) -> bool:
        return self.full is not None

    def kind(self, metadata: Iterable[tuple[str, Any]] | None) -> str | None:
        """FULL, READ or None (no valid token) for a call's metadata; FULL for everyone when no
        token is configured. Both tokens are compared, each in constant time."""
        if self.full is None:
            return FULL
        given = [str(v) for k, v in metadata or () if k == TOKEN_HEADER]
        full = any(hmac.compare_digest(g, self.full) for g in given)
        read = self.read is not None and any(hmac.compare_digest(g, self.read) for g in given)
        return FULL if full else READ if read else None

    def label(self, metadata: Iterable[tuple[str, Any]] | None) -> str:
        """What the audit trail says of a call's token: full, read, none configured, or invalid."""
        if self.full is None:
            return ANONYMOUS
        given = any(k == TOKEN_HEADER for k, _v in metadata or ())
        return self.kind(metadata) or ("wrong-token" if given else "no-token")


def split_method(full_method: str) -> tuple[str, str]:
    service, _, method = full_method.lstrip("/").rpartition("/")
    return service, method


def response_type(full_method: str) -> Any:
    """The response message class of one of the two services' methods."""
    service, method = split_method(full_method)
    desc = pb.DESCRIPTOR.services_by_name[service.rsplit(".", 1)[-1]].methods_by_name[method]
    return getattr(pb, desc.output_type.name)


def refusal(full_method: str, kind: str | None, given: bool) -> Any:
    """The response a refused call gets: PERMISSION_DENIED naming what is missing, never a token."""
    why = ("the read-only token cannot change metadata or registrations" if kind == READ else
           "the token given is not valid for this service" if given else
           "this service needs a token (bkdisk's commands: --token or BKDISK_METADATA_TOKEN)")
    return response_type(full_method)(code=pb.PERMISSION_DENIED, message=why)


def _replace(handler: grpc.RpcMethodHandler, make: Callable[[Callable], Callable]) -> grpc.RpcMethodHandler:
    for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        behaviour = getattr(handler, kind)
        if behaviour is not None:
            return handler._replace(**{kind: make(behaviour)})
    return handler


class TokenGuard(grpc.ServerInterceptor):
    """Every call of both services needs a valid token once one is configured (the health service
    answers anyone); the read-only token may not mutate, and what it reads has passwords withheld
    (``strip``: a function of one response message)."""

    def __init__(self, tokens: Tokens, strip: Callable[[Any], Any]):
        self.tokens = tokens
        self.strip = strip

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        service, method = split_method(details.method)
        if handler is None or service not in SERVICES or not self.tokens.required:
            return handler
        md = details.invocation_metadata
        kind = self.tokens.kind(md)
        if kind == FULL:
            return handler
        if kind is None or method in MUTATING:
            denied = refusal(details.method, kind, any(k == TOKEN_HEADER for k, _v in md or ()))
            return _replace(handler, lambda _b: _answer(denied, handler))
        strip = self.strip
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=lambda req, ctx: strip(handler.unary_unary(req, ctx)))
        return _replace(handler, lambda b: lambda req, ctx: (strip(r) for r in b(req, ctx)))


def _answer(response: Any, handler: grpc.RpcMethodHandler) -> Callable:
    """A behaviour that answers ``response`` without running the handler (a stream: once, then ends)."""
    if handler.response_streaming:
        def stream(_request, _context):
            yield response
        return stream
    return lambda _request, _context: response
