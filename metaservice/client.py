"""Thin Python client of both services: deadlines on every call, retries that never apply a write twice."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from bkdisk.formats.errors import BkdiskError, FormatError
from bkdisk.formats.ids import U64, LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.formats.metadata import parse_metadata
from bkdisk.metaservice.channel import TRANSPORT_RETRY, Channel, MetadataError, StreamFailed, check, replies, rpc_error
from bkdisk.metaservice.coalesce import Coalescer
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.proto import metaservice_pb2_grpc as pb_grpc

BATCH = 64                   # requests per coalesced call
MAX_BATCH_BYTES = 1 << 19    # a coalesced write's request, below the service's 1 MiB default limit


@dataclass(frozen=True)
class Ledger:
    scope: int
    ledger_id: int
    version: int
    serialized: bytes        # LedgerMetadataSerDe bytes
    metadata: bytes          # binary LedgerMetadataFormat
    password_withheld: bool = False   # the read-only token's read: the password was removed


@dataclass(frozen=True)
class LedgerChange:
    change: str              # CURRENT, CREATED, UPDATED, DELETED
    sequence: int
    scope: int
    ledger_id: int
    version: int
    serialized: bytes


@dataclass(frozen=True)
class StoredLedger:
    """One ledger of a bulk read: its metadata as stored (LedgerMetadataSerDe bytes) and version."""

    scope: int
    ledger_id: int
    version: int
    serialized: bytes
    password_withheld: bool = False

    @property
    def key(self) -> LedgerId:
        return LedgerId(self.scope, self.ledger_id)

    def parse(self, where: str = "") -> LedgerMetadata:
        """The parsed metadata; MetadataError LEDGER_METADATA_ERROR naming the ledger if it does not parse."""
        try:
            return parse_metadata(self.serialized, path=f"{where}ledger {self.key.qualified_name}")
        except FormatError as exc:
            raise MetadataError("LEDGER_METADATA_ERROR", str(exc)) from None


def _key128(k: int | LedgerId | None, what: str) -> tuple[int, int] | None:
    if k is None:
        return None
    v = k.value if isinstance(k, LedgerId) else int(k)
    if what == "end" and v == 1 << 128:      # past the largest id: the same as no end
        return None
    if not 0 <= v < 1 << 128:
        raise MetadataError("BAD_REQUEST", f"{what} {v} is outside 0..2^128-1")
    return v >> 64, v & U64


def _ledger(r: pb.LedgerMetadataResponse) -> Ledger:
    return Ledger(r.ledger_scope_id, r.ledger_id, r.version, r.serialized_metadata, r.metadata, r.password_withheld)


class MetadataClient:
    """LedgerMetadataService calls. Writes are retried after an ambiguous failure only where the
    outcome can be checked afterwards (CAS writes, creates with an id, removes).

    Safe to share between threads: with ``coalesce`` (the default) the reads (and the writes) that
    threads make at the same time go as one ReadMany (WriteMany) call, each answered exactly as its
    own Read (Write) would be (metaservice/coalesce.py); a lone call is sent as a plain Read or Write
    at once."""

    def __init__(self, target: str, *, coalesce: bool = True, **kw):
        self.ch = Channel(target, **kw)
        self.stub = pb_grpc.LedgerMetadataServiceStub(self.ch.channel)
        self.reads = Coalescer(self._read_batch, BATCH) if coalesce else None
        self.writes = (Coalescer(self._write_batch, BATCH, MAX_BATCH_BYTES, lambda r: r.ByteSize())
                       if coalesce else None)

    @property
    def rpc_count(self) -> int:
        return self.ch.rpc_count

    def read(self, ledger_id: int, scope: int = 0, format_version: int = 0, *,
             consistent: bool = False) -> Ledger:
        """The ledger's metadata and version; ``consistent``: reflecting every write any client
        completed before the call (the service syncs with its store first)."""
        req = pb.LedgerMetadataRequest(ledger_id=ledger_id, ledger_scope_id=scope,
                                       format_version=format_version, consistent_read=consistent)
        r = self.reads.call(req) if self.reads is not None else self._read_one(req)
        check(r)
        return _ledger(r)

    def _read_one(self, req: pb.LedgerMetadataRequest) -> pb.LedgerMetadataResponse:
        return self.ch.call(self.stub.Read, req, may_resend=True)

    def _read_batch(self, reqs: list) -> list:
        if len(reqs) == 1:
            return [self._read_one(reqs[0])]
        r = self.ch.call(self.stub.ReadMany, pb.LedgerBatchRequest(requests=reqs), may_resend=True)
        check(r)
        # an item the store could not serve yet is retried on its own, as a single Read is
        return [self._read_one(q) if x.code == pb.STORE_UNAVAILABLE else x
                for q, x in zip(reqs, r.responses, strict=True)]

    def _write_one(self, req: pb.LedgerMetadataRequest) -> tuple[pb.LedgerMetadataResponse, bool]:
        r, sent = self.ch.call_counted(self.stub.Write, req, may_resend=True)
        return r, sent > 1

    def _write_batch(self, reqs: list) -> list:
        if len(reqs) == 1:
            return [self._write_one(reqs[0])]
        try:
            r, sent = self.ch.call_counted(self.stub.WriteMany, pb.LedgerBatchRequest(requests=reqs),
                                           may_resend=True)
        except MetadataError as exc:
            if exc.code != "RPC_RESOURCE_EXHAUSTED":
                raise
            return [self._write_one(q) for q in reqs]   # above a smaller request limit: refused whole
        check(r)
        # STORE_UNAVAILABLE: that write was not applied; it is sent again on its own
        return [self._write_one(q) if x.code == pb.STORE_UNAVAILABLE else (x, sent > 1)
                for q, x in zip(reqs, r.responses, strict=True)]

    def create(self, serialized: bytes = b"", *, metadata: bytes = b"", scope: int = 0,
               ledger_id: int | None = None) -> Ledger:
        req = pb.LedgerMetadataRequest(ledger_scope_id=scope, serialized_metadata=serialized,
                                       metadata=metadata)
        if ledger_id is not None:
            req.ledger_id = ledger_id
        before = self.ch.rpc_count
        try:
            r = self.ch.call(self.stub.Create, req, may_resend=ledger_id is not None)
            check(r)
            return _ledger(r)
        except MetadataError as exc:
            # A resent create that finds its own bytes at version 0 had succeeded the first time.
            if exc.code == "LEDGER_EXISTS" and ledger_id is not None and self.ch.rpc_count - before > 1:
                got = self.read(ledger_id, scope)
                if got.version == 0 and serialized and got.serialized == serialized:
                    return got
            raise

    def write(self, ledger_id: int, serialized: bytes, expected_version: int, scope: int = 0) -> Ledger:
        req = pb.LedgerMetadataRequest(ledger_id=ledger_id, ledger_scope_id=scope,
                                       serialized_metadata=serialized, expected_version=expected_version)
        r, resent = self.writes.call(req) if self.writes is not None else self._write_one(req)
        if r.code == pb.BAD_VERSION and resent:
            # a resent write that finds its own bytes one version on had succeeded the first time
            got = self.read(ledger_id, scope)
            if got.version == expected_version + 1 and got.serialized == serialized:
                return got
        check(r)
        return _ledger(r)

    def remove(self, ledger_id: int, scope: int = 0, expected_version: int | None = None) -> None:
        req = pb.LedgerMetadataRequest(ledger_id=ledger_id, ledger_scope_id=scope)
        if expected_version is not None:
            req.expected_version = expected_version
        before = self.ch.rpc_count
        try:
            check(self.ch.call(self.stub.Remove, req, may_resend=True))
        except MetadataError as exc:
            if not (exc.code == "LEDGER_NOT_FOUND" and self.ch.rpc_count - before > 1):
                raise

    def iterate(self, scope: int = 0, all_scopes: bool = False,
                limit_per_response: int = 1000) -> Iterator[tuple[int, int]]:
        """(scope, ledger id) of every ledger, ascending per scope; resumes after a lost stream."""
        last: tuple[int, int] | None = None
        self.ch.ready()
        for attempt in range(self.ch.retries + 1):
            self.ch.rpc_count += 1
            stream = replies(self.stub.Iterate(pb.GetLedgerRangesRequest(
                limit_per_response=limit_per_response, ledger_scope_id=scope, all_scopes=all_scopes),
                timeout=self.ch.timeout * 30, metadata=self.ch.metadata))
            try:
                for page in stream:
                    if page.code == pb.STORE_UNAVAILABLE and attempt < self.ch.retries:
                        break      # the store session is being re-established: reopen after `last`
                    check(page)
                    ranges = pb.LedgerRangeList.FromString(page.serialized_ranges)
                    for rg in ranges.ranges:
                        for lid in range(rg.first, rg.first + rg.count):
                            key = (ranges.ledger_scope_id, lid)
                            if last is None or _after(key, last):
                                last = key
                                yield key
                else:
                    return
            except StreamFailed as exc:
                if exc.code() not in TRANSPORT_RETRY or attempt == self.ch.retries:
                    raise rpc_error(exc) from None
            finally:
                stream.close()
            time.sleep(self.ch.backoff)

    def watch(self, ledgers: Sequence[tuple[int, int]] = (), watch_all: bool = False,
              after_sequence: int | None = None, resume: bool = True,
              on_lost: Callable[[str], None] | None = None) -> Iterator[LedgerChange]:
        """Changes of the given (scope, ledger) pairs or of everything, in order. A lost stream is
        reopened: a watch of everything after the last sequence seen; a watch of named ledgers from
        the version last seen of each (which also holds across a restart of the service), so no
        change is lost or delivered twice. A service that does not answer within ``timeout`` seconds
        at first is said (MetadataError), not waited on; once it answered, a lost stream is reopened
        until it answers again, ``on_lost`` told why once each time a stream that gave changes is lost."""
        seen = after_sequence
        self.ch.ready()
        said = False
        known: dict[tuple[int, int], int] = {}
        while True:
            reqs = []
            for key in ([None] if watch_all or not ledgers else list(ledgers)):
                req = pb.LedgerMetadataRequest(watch_all=key is None)
                if key is not None:
                    req.ledger_scope_id, req.ledger_id = key
                if key is not None and key in known:
                    req.known_version = known[key]
                elif seen is not None:
                    req.after_sequence = seen
                reqs.append(req)
            self.ch.rpc_count += 1
            stop = threading.Event()
            try:
                for r in replies(self.stub.Watch(_hold(reqs, stop), metadata=self.ch.metadata)):
                    said = False
                    check(r)
                    seen = r.sequence if seen is None else max(seen, r.sequence)
                    change = pb.ChangeType.Name(r.change)
                    known[(r.ledger_scope_id, r.ledger_id)] = -1 if change == "DELETED" else r.version
                    yield LedgerChange(change, r.sequence, r.ledger_scope_id, r.ledger_id, r.version,
                                       r.serialized_metadata)
            except StreamFailed as exc:
                if not resume or exc.code() not in TRANSPORT_RETRY:
                    raise rpc_error(exc) from None
                if on_lost is not None and not said:
                    on_lost(str(rpc_error(exc)))
                    said = True
                time.sleep(self.ch.backoff)
            finally:
                stop.set()

    def read_ledgers(self, start: int | LedgerId | None = None, end: int | LedgerId | None = None, *,
                     scope: int | None = None, page_size: int = 1000,
                     format_version: int = 0) -> Iterator[list[StoredLedger]]:
        """Bulk read: every ledger whose 128-bit id (scope << 64 | ledger id) is in [start, end),
        ascending by that id, as pages (lists) of at most ``page_size`` StoredLedger.

        ``start`` is inclusive, ``end`` exclusive (2^128 or None: through the largest id); None
        as start reads from the smallest id; ``scope=S`` instead
        reads the whole scope S. One server stream per call; a stream lost to the transport or to
        STORE_UNAVAILABLE is reopened after the last ledger yielded, so no ledger is yielded twice
        or skipped. Not a snapshot: a ledger changed during the read shows either state.
        """
        if scope is not None:
            if start is not None or end is not None:
                raise MetadataError("BAD_REQUEST", "give scope or start/end, not both")
            start, end = scope << 64, (scope + 1) << 64
        low, high = _key128(start, "start"), _key128(end, "end")
        self.ch.ready()
        for attempt in range(self.ch.retries + 1):
            req = pb.ReadLedgersRequest(page_size=page_size, format_version=format_version)
            if low is not None:
                req.start.ledger_scope_id, req.start.ledger_id = low
            if high is not None:
                if low is not None and low >= high:
                    return
                req.end.ledger_scope_id, req.end.ledger_id = high
            self.ch.rpc_count += 1
            stream = replies(self.stub.ReadLedgers(req, timeout=self.ch.timeout * 60, metadata=self.ch.metadata))
            try:
                for page in stream:
                    if page.code == pb.STORE_UNAVAILABLE and attempt < self.ch.retries:
                        break      # the store session is being re-established: reopen after `low`
                    check(page)
                    got = [StoredLedger(x.ledger_scope_id, x.ledger_id, x.version, x.serialized_metadata,
                                        x.password_withheld) for x in page.ledgers]
                    if got:
                        last = (got[-1].scope << 64 | got[-1].ledger_id) + 1
                        if last >> 128:
                            yield got
                            return
                        low = (last >> 64, last & U64)
                        yield got
                else:
                    return
            except StreamFailed as exc:
                if exc.code() not in TRANSPORT_RETRY or attempt == self.ch.retries:
                    raise rpc_error(exc) from None
            finally:
                stream.close()
            time.sleep(self.ch.backoff)

    def load_all(self, scope: int | None = None) -> dict[LedgerId, LedgerMetadata]:
        """Every ledger's metadata (of one scope, or of all): what a metadata folder gives fsck and
        the audit, read through the service (one bulk read) so the reader holds no store session."""
        where = f"{self.ch.target}: "
        return {x.key: x.parse(where) for page in self.read_ledgers(scope=scope) for x in page}

    def close(self) -> None:
        self.ch.close()


def service_target(url: str) -> str:
    """HOST:PORT from ``grpc://HOST:PORT`` (or a bare HOST:PORT); BkdiskError otherwise."""
    rest = url[len("grpc://"):] if url.startswith("grpc://") else url
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in rest.rstrip("/"):
        raise BkdiskError(f"{url}: not a metadata service address (expected grpc://HOST:PORT)")
    return f"{host}:{port}"


def _hold(reqs: list, stop: threading.Event) -> Iterator:
    """Send the watch requests, then keep the request side open until the call ends."""
    yield from reqs
    stop.wait()


def _iterate_order(key: tuple[int, int]) -> tuple[bool, int, int]:
    # Iterate yields scope 0 first, then other scopes ascending; within a scope, ids ascending.
    return key[0] != 0, key[0], key[1]


def _after(key: tuple[int, int], last: tuple[int, int]) -> bool:
    return _iterate_order(key) > _iterate_order(last)
