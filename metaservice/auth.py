"""Who may call the metadata service: the tokens a call carries (gRPC call metadata), what each allows,
and the guard that refuses or narrows a call before its handler runs."""
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
        full = read = False
        for k, v in metadata or ():
            if k == TOKEN_HEADER:
                given = str(v).encode()   # (compare_digest refuses str holding non-ASCII: bytes always compare)
                full |= hmac.compare_digest(given, self.full.encode())
                read |= self.read is not None and hmac.compare_digest(given, self.read.encode())
        return FULL if full else READ if read else None


def token_given(metadata: Iterable[tuple[str, Any]] | None) -> bool:
    return any(k == TOKEN_HEADER for k, _v in metadata or ())


def refusal(response_type: Any, kind: str | None, given: bool) -> Any:
    """The response a refused call gets: PERMISSION_DENIED naming what is missing, never a token."""
    why = ("the read-only token cannot change metadata or registrations" if kind == READ else
           "the token given is not valid for this service" if given else
           "this service needs a token (bkdisk's commands: --token or BKDISK_METADATA_TOKEN)")
    return response_type(code=pb.PERMISSION_DENIED, message=why)


@dataclass(frozen=True)
class Guard:
    """One method of the two services behind the token: a call without a valid one is refused, the
    read-only token may not mutate, and what it reads has its passwords withheld (``strip``: a
    function of one response message)."""

    method: str
    streaming: bool
    response_type: Any
    tokens: Tokens
    strip: Callable[[Any], Any]
    behaviour: Callable

    def admit(self, context: grpc.ServicerContext) -> tuple[Callable, str]:
        """What this call runs (the behaviour, a refusal, or the behaviour with passwords withheld)
        and what the audit trail says of its token."""
        md = context.invocation_metadata()
        tokens = self.tokens
        kind = tokens.kind(md)
        label = ANONYMOUS if not tokens.required else kind or ("wrong-token" if token_given(md) else "no-token")
        if kind == FULL:
            return self.behaviour, label
        if kind is None or self.method in MUTATING:
            return _answer(refusal(self.response_type, kind, token_given(md)), self.streaming), label
        behaviour, strip = self.behaviour, self.strip
        if self.streaming:
            return (lambda req, ctx: (strip(r) for r in behaviour(req, ctx))), label
        return (lambda req, ctx: strip(behaviour(req, ctx))), label


def _answer(response: Any, streaming: bool) -> Callable:
    """A behaviour that answers ``response`` without running the handler (a stream: once, then ends)."""
    if streaming:
        def stream(_request, _context):
            yield response
        return stream
    return lambda _request, _context: response
