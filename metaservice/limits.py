"""What one caller may hold of the service: request and batch sizes, open streams and watched ledgers
per peer (the caller's address without its port), and how long a stream that ends may run. No gRPC
here: ``serve --help`` shows the defaults without loading it."""
from __future__ import annotations

import threading
from dataclasses import dataclass

# ZooKeeper's default znode limit (jute.maxbuffer) bounds a ledger's metadata; requests above it
# are refused by gRPC before any code runs (RESOURCE_EXHAUSTED).
DEFAULT_MAX_REQUEST = 1 << 20
# Server threads kept beyond those streams may hold: the calls that end (a read, a write) always find
# one, however many watches callers on however many hosts keep open.
UNARY_WORKERS = 32


@dataclass(frozen=True)
class Limits:
    max_request_bytes: int = DEFAULT_MAX_REQUEST
    max_batch: int = 1000                 # requests per ReadMany / WriteMany
    streams_per_peer: int = 64            # open streaming calls of one peer (watches, listings, ...)
    streams_total: int = 128              # open streaming calls of all peers (each holds a server thread)
    watches_per_peer: int = 100_000       # ledgers one peer's Watch streams follow (watch_all: 1)
    stream_seconds: float = 3600.0        # a listing or bulk read that runs longer is ended


def peer_host(peer: str) -> str:
    """``ipv4:10.0.0.1`` of ``ipv4:10.0.0.1:5555`` (``ipv6:[::1]:5555`` -> ``ipv6:[::1]``): every
    connection of one host counts as one peer."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rpartition(":")[0]
    return peer


class PeerCounts:
    """A count per peer, each at most ``limit``."""

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def take(self, peer: str, n: int = 1) -> bool:
        with self._lock:
            held = self._counts.get(peer, 0)
            if held + n > self.limit:
                return False
            self._counts[peer] = held + n
            return True

    def give(self, peer: str, n: int = 1) -> None:
        with self._lock:
            left = self._counts.get(peer, 0) - n
            if left > 0:
                self._counts[peer] = left
            else:
                self._counts.pop(peer, None)

    def held(self, peer: str) -> int:
        with self._lock:
            return self._counts.get(peer, 0)
