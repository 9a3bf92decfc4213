"""The limits of one peer's streaming calls, applied before a stream's handler runs (metaservice.limits)."""
from __future__ import annotations

import time
from collections.abc import Callable

import grpc

from bkdisk.metaservice.limits import Limits, PeerCounts, peer_host

# Streams that end on their own (a listing, a bulk read): the rest (watches, a bookie's Register)
# live as long as their caller wants.
FINITE_STREAMS = frozenset({"Iterate", "ReadLedgers"})
ALL_PEERS = "*"


class StreamLimits:
    """Refuses a peer's streaming call beyond ``streams_per_peer`` open ones, and any beyond
    ``streams_total`` of all peers' (RESOURCE_EXHAUSTED: each holds one of the server's threads, and the
    server has UNARY_WORKERS more for the calls that end), and ends a listing or bulk read that runs past
    ``stream_seconds`` (DEADLINE_EXCEEDED)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.streams = PeerCounts(limits.streams_per_peer)
        self.total = PeerCounts(limits.streams_total)   # one count: every peer's

    def limited(self, method: str, behaviour: Callable) -> Callable:
        """``behaviour`` (a streaming method's) within the limits."""
        return self._limited(behaviour, method in FINITE_STREAMS)

    def _limited(self, behaviour: Callable, finite: bool) -> Callable:
        limits, streams, total = self.limits, self.streams, self.total

        def run(request, context):
            peer = peer_host(context.peer())
            if not streams.take(peer):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"{limits.streams_per_peer} streams are open from {peer} already")
            if not total.take(ALL_PEERS):
                streams.give(peer)
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                              f"{limits.streams_total} streams are open on this service already (serve --max-streams)")
            try:
                t0 = time.monotonic()
                for r in behaviour(request, context):
                    yield r
                    if finite and time.monotonic() - t0 > limits.stream_seconds:
                        context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                      f"a stream runs at most {limits.stream_seconds:g} s (serve --max-stream-seconds)")
            finally:
                total.give(ALL_PEERS)
                streams.give(peer)
        return run
