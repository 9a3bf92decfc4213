"""Discovery client and BP-41's BookieAddressResolver: BookieId -> address, cached, invalidated by the
registration watch."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc

from bkdisk.formats.bookieid import HostPort, legacy_address, validate_bookie_id
from bkdisk.formats.errors import BkdiskError, FormatError
from bkdisk.metaservice.channel import Channel, MetadataError, StreamFailed, check, replies, rpc_error
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc

# BookKeeper names a bookie's data endpoint "bookie-rpc" (BookieServiceInfo, BP-38).
RPC_ENDPOINT = "bookie-rpc"


class ResolveError(BkdiskError):
    """A BookieId that cannot be mapped to a network address."""


@dataclass(frozen=True)
class Bookie:
    bookie_id: str
    read_only: bool
    endpoints: tuple[tuple[str, str, int, str], ...]      # (id, host, port, protocol)
    properties: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"bookie_id": self.bookie_id, "read_only": self.read_only,
                "endpoints": [{"id": i, "host": h, "port": p, "protocol": pr}
                              for i, h, p, pr in self.endpoints],
                "properties": dict(sorted(self.properties.items()))}


def _bookie(b: pb.BookieInfo) -> Bookie:
    return Bookie(b.bookie_id, b.read_only,
                  tuple((e.id, e.host, e.port, e.protocol) for e in b.info.endpoints),
                  dict(b.info.properties))


def service_info(host: str, port: int, properties: dict[str, str] | None = None) -> pb.BookieServiceInfoFormat:
    """A BookieServiceInfo with the one ``bookie-rpc`` endpoint a bookie publishes."""
    info = pb.BookieServiceInfoFormat(properties=properties or {})
    info.endpoints.add(id=RPC_ENDPOINT, host=host, port=port, protocol="bookie-rpc")
    return info


class DiscoveryClient:
    def __init__(self, target: str, **kw):
        self.ch = Channel(target, **kw)
        self.stub = pb_grpc.DiscoveryServiceStub(self.ch.channel)

    @property
    def rpc_count(self) -> int:
        return self.ch.rpc_count

    def list(self, read_only: bool = False) -> list[Bookie]:
        r = self.ch.call(self.stub.ListBookies, pb.BookieRequest(read_only=read_only), may_resend=True)
        check(r)
        return [_bookie(b) for b in r.bookies]

    def info(self, bookie_id: str) -> Bookie:
        r = self.ch.call(self.stub.GetBookieServiceInfo, pb.BookieRequest(bookie_id=bookie_id),
                         may_resend=True)
        check(r)
        return _bookie(r.bookies[0])

    def unregister(self, bookie_id: str) -> None:
        check(self.ch.call(self.stub.Unregister, pb.BookieRequest(bookie_id=bookie_id), may_resend=True))

    def register(self, bookie_id: str, info: pb.BookieServiceInfoFormat,
                 read_only: bool = False) -> Registration:
        """Register; the registration lasts until ``Registration.close()`` or this process ends."""
        self.ch.ready()
        self.ch.rpc_count += 1
        call = self.stub.Register(pb.BookieRequest(bookie_id=bookie_id, read_only=read_only, info=info),
                                  metadata=self.ch.metadata)
        refused: MetadataError | None = None
        try:
            check(next(call))
        except grpc.RpcError as exc:
            refused = rpc_error(exc)
        except MetadataError as exc:
            refused = exc
        if refused is None:
            return Registration(call)
        call.cancel()
        del call     # not kept alive by the error: see channel.replies
        raise refused

    def watch(self) -> Iterator[tuple[str, Bookie]]:
        """(change, bookie): CURRENT for every registered bookie, then each change as it happens."""
        self.ch.ready()
        self.ch.rpc_count += 1
        try:
            for r in replies(self.stub.WatchBookies(pb.BookieRequest(), metadata=self.ch.metadata)):
                check(r)
                if r.change != pb.NONE:     # NONE only marks the end of the initial snapshot
                    yield pb.ChangeType.Name(r.change), _bookie(r.bookies[0])
        except StreamFailed as exc:
            raise rpc_error(exc) from None

    def close(self) -> None:
        self.ch.close()


class Registration:
    """A live registration: the open Register call is the bookie's session."""

    def __init__(self, call):
        self._call = call

    def close(self) -> None:
        self._call.cancel()


class BookieAddressResolver:
    """Maps a BookieId to the address of its ``bookie-rpc`` endpoint.

    With discovery, answers come from a cache filled by GetBookieServiceInfo and dropped for a
    bookie as soon as the registration watch reports a change for it. In legacy mode (BP-41's
    resolver switched off) no RPC is made: the BookieId itself must be ``host:port``.
    """

    def __init__(self, discovery: DiscoveryClient | None = None, legacy: bool = False):
        if discovery is None and not legacy:
            raise ValueError("a discovery client is needed unless legacy mode is on")
        self.discovery = discovery
        self.legacy = legacy
        self._cache: dict[str, HostPort] = {}
        self._generation = 0     # bumped by every invalidation; a lookup racing one is not cached
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = False
        if not legacy:
            threading.Thread(target=self._watch, args=(discovery,), daemon=True).start()
            self._ready.wait(10)

    def _watch(self, discovery: DiscoveryClient) -> None:
        while not self._stop:
            try:
                stream = discovery.stub.WatchBookies(pb.BookieRequest(), metadata=discovery.ch.metadata)
                self._stream = stream
                for r in stream:
                    self._ready.set()
                    if r.code != pb.SUCCESS:   # refused (no token): lookups say so; no cache to keep
                        self._stop = True
                        break
                    if r.change not in (pb.CURRENT, pb.NONE):
                        with self._lock:
                            self._generation += 1
                            for b in r.bookies:
                                self._cache.pop(b.bookie_id, None)
            except grpc.RpcError:
                # Lost the watch: nothing cached can be trusted any longer.
                with self._lock:
                    self._generation += 1
                    self._cache.clear()
                time.sleep(0.2)
            finally:
                self._ready.set()

    @property
    def generation(self) -> int:
        """How many registration changes (and lost watches) have invalidated cached entries so far."""
        with self._lock:
            return self._generation

    def resolve(self, bookie_id: str) -> HostPort:
        # (a BookieId refused here is a bad request, as the service's answer to it would be: its cause
        # says so to a command, which exits as for that answer, not as for a service out of reach)
        try:
            validate_bookie_id(bookie_id)
        except FormatError as exc:
            why = f"invalid BookieId {exc.found}"
            raise ResolveError(why) from MetadataError("BAD_REQUEST", why)
        if self.legacy or self.discovery is None:   # no discovery client only in legacy mode
            addr = legacy_address(bookie_id)
            if addr is None:
                why = f"BookieId {bookie_id!r} is not host:port and the resolver is off (legacy mode)"
                raise ResolveError(why) from MetadataError("BAD_REQUEST", why)
            return addr
        with self._lock:
            hit = self._cache.get(bookie_id)
            generation = self._generation
        if hit is not None:
            return hit
        try:
            bookie = self.discovery.info(bookie_id)
        except MetadataError as exc:
            if exc.code == "PERMISSION_DENIED":
                raise        # the caller, not the BookieId, was refused
            raise ResolveError(f"cannot resolve {bookie_id!r}: {exc}") from exc   # its code says why
        eps = sorted(bookie.endpoints, key=lambda e: e[0] != RPC_ENDPOINT)
        if not eps:
            raise ResolveError(f"bookie {bookie_id!r} publishes no endpoint")
        addr = HostPort(eps[0][1], eps[0][2])
        with self._lock:
            if generation == self._generation:
                self._cache[bookie_id] = addr
        return addr

    def close(self) -> None:
        self._stop = True
        stream = getattr(self, "_stream", None)
        if stream is not None:
            stream.cancel()
