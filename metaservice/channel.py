"""The transport both clients share: one gRPC channel with the token, deadlines and retries that
never send a write twice, and the one error type a service's answer becomes."""
from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from typing import TypeVar

import grpc

from bkdisk.formats.errors import BkdiskError
from bkdisk.metaservice.auth import TOKEN_HEADER
from bkdisk.metaservice.proto import metaservice_pb2 as pb

# gRPC codes after which nothing reached the service or the service changed nothing.
TRANSPORT_RETRY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_DENIED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)   # a proxy's refusal, say
MAX_REPLY = 256 << 20        # a batch of replies, each at most ZooKeeper's 1 MiB znode limit twice over


class MetadataError(BkdiskError):
    """A non-SUCCESS status from the service; ``code`` is the StatusCode name."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


R = TypeVar("R")


class StreamFailed(Exception):
    """How a stream ended when it failed: its status code and details, without the call itself."""

    def __init__(self, code: grpc.StatusCode, details: str | None):
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str | None:
        return self._details


def rpc_error(exc: grpc.RpcError | StreamFailed) -> MetadataError:
    code = exc.code()   # RPC_<status>, or the service's PERMISSION_DENIED for a refusal
    return MetadataError("PERMISSION_DENIED" if code in _DENIED else f"RPC_{code.name}", exc.details() or "")


def replies(call: Iterator[R]) -> Generator[R, None, None]:
    """The replies of a streaming call; StreamFailed when it fails; the call cancelled when the caller
    stops reading. No exception keeps the call alive: one collected at interpreter exit runs its
    ``__del__``, which waits on a lock gRPC's polling thread may hold as the interpreter stops it (a
    command that printed its error and never exited)."""
    failed = None
    try:
        try:
            yield from call
        except grpc.RpcError as exc:
            failed = StreamFailed(exc.code(), exc.details())
    finally:
        call.cancel()   # type: ignore[attr-defined]
        del call
    if failed is not None:
        raise failed


def check(r) -> None:
    if r.code != pb.SUCCESS:
        raise MetadataError(pb.StatusCode.Name(r.code), r.message)


class Channel:
    """One gRPC channel with the call settings shared by both clients."""

    def __init__(self, target: str, token: str | None = None, timeout: float = 10.0,
                 retries: int = 6, backoff: float = 0.1, root_certificates: bytes | None = None,
                 client_certificate: tuple[bytes, bytes] | None = None):
        """``root_certificates`` (PEM): TLS; ``client_certificate``: (PEM key, PEM chain), mutual TLS."""
        key, chain = client_certificate if client_certificate is not None else (None, None)
        creds = None if root_certificates is None else grpc.ssl_channel_credentials(root_certificates, key, chain)
        # A coalesced read's reply carries up to a batch of ledgers' metadata.
        options = [("grpc.max_receive_message_length", MAX_REPLY)]
        self.channel = (grpc.secure_channel(target, creds, options) if creds is not None
                        else grpc.insecure_channel(target, options))
        self.target = target
        self.metadata = ((TOKEN_HEADER, token),) if token else ()
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.rpc_count = 0
        self._ready = False

    def ready(self) -> None:
        """Wait at most ``timeout`` seconds for the channel's first connection to the service: a peer that
        takes the connection and never speaks (a stopped process, a port of something else, TLS a side
        cannot agree on) is said after that, with gRPC's cause when it gives one, not waited on by a
        stream without a deadline or by retries."""
        if self._ready:
            return
        try:
            grpc.channel_ready_future(self.channel).result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            why = self._failed_connection()
            raise MetadataError("RPC_UNAVAILABLE", f"no answer within {self.timeout:g} s" + (
                f": {why}" if why else " (a service stopped, or not this service on that port)")) from None
        self._ready = True

    def _failed_connection(self) -> str | None:
        """Why the channel's last connection failed, as gRPC says it to a call that does not wait for one
        (a certificate not trusted, TLS against plaintext, a refused connection); None when it says
        nothing more than that it had no answer."""
        probe = self.channel.unary_unary("/bkdisk.Probe/Connect", request_serializer=lambda _x: b"",
                                         response_deserializer=lambda b: b)
        try:
            probe(None, timeout=1.0, wait_for_ready=False)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE and exc.details():
                return exc.details()
        return None

    def call(self, method, request, *, may_resend: bool):
        """Call ``method``; retry on STORE_UNAVAILABLE (nothing was changed) and, when
        ``may_resend``, on transport failures. Returns the response (any code but STORE_UNAVAILABLE)."""
        return self.call_counted(method, request, may_resend=may_resend)[0]

    def call_counted(self, method, request, *, may_resend: bool):
        """``call``, returning (response, how many times the request was sent)."""
        self.ready()
        delay = self.backoff
        for attempt in range(self.retries + 1):
            self.rpc_count += 1
            try:
                r = method(request, timeout=self.timeout, metadata=self.metadata,
                           wait_for_ready=attempt > 0)
            except grpc.RpcError as exc:
                if exc.code() not in TRANSPORT_RETRY or not may_resend or attempt == self.retries:
                    raise rpc_error(exc) from None
            else:
                if r.code != pb.STORE_UNAVAILABLE or attempt == self.retries:
                    return r, attempt + 1
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.channel.close()
