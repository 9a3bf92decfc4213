"""Hostile input to `bkdisk metadata serve`: ten thousand malformed, truncated and oversized messages
to every method of both services, unary and streaming, with and without the token. Each gets an
error status; the service stays up, its memory bounded, and answers a valid call afterwards."""
from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import GOLDEN
from test_metadata_cli import Served

from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.proto import metaservice_pb2 as pb

TOKEN = "fuzz-token-4c1d"
CALLS = 10_000
MAX_REQUEST = 64 << 10
RSS_GROWTH = 256 << 20


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))


def garbage(rng: random.Random, i: int) -> bytes:
    """Bytes no request message parses from, of four kinds in turn."""
    tail = rng.randbytes(rng.randrange(0, 200))
    kind = i % 4
    if kind == 0:
        return b"\x0f" + tail                                 # field 1 with wire type 7: malformed
    if kind == 1:
        return b"\x08" + b"\xff" * rng.randrange(1, 9)        # a varint cut short: truncated
    if kind == 2:
        n = rng.randrange(2, 4000)
        return b"\x12" + _varint(n) + rng.randbytes(n - 1)    # a length-delimited field cut short
    return b"\x12" + _varint(MAX_REQUEST + 1) + bytes(MAX_REQUEST + 1)   # over the request limit


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _methods():
    for service in ("LedgerMetadataService", "DiscoveryService"):
        for m in pb.DESCRIPTOR.services_by_name[service].methods:
            yield (f"/bkdisk.metaservice.{service}/{m.name}", m.client_streaming, m.server_streaming,
                   getattr(pb, m.output_type.name).FromString)


def _call(channel: grpc.Channel, method: str, client_streaming: bool, server_streaming: bool, parse,
          payload: bytes, metadata) -> str:
    """The gRPC status the call ended with, or the service's own status code when it answered
    (SUCCESS only if every response said so: the bytes were taken for a request)."""
    try:
        if client_streaming:
            got = list(channel.stream_stream(method, response_deserializer=parse)(
                iter([payload]), metadata=metadata, timeout=30))
        elif server_streaming:
            got = list(channel.unary_stream(method, response_deserializer=parse)(
                payload, metadata=metadata, timeout=30))
        else:
            got = [channel.unary_unary(method, response_deserializer=parse)(payload, metadata=metadata, timeout=30)]
    except grpc.RpcError as exc:
        return exc.code().name
    return next((pb.StatusCode.Name(r.code) for r in got if r.code != pb.SUCCESS), "SUCCESS")


@pytest.mark.slow
def test_ten_thousand_garbage_calls_leave_the_service_up_bounded_answering_and_stopping(tmp_path):
    s = Served(tmp_path, "--token", TOKEN, "--max-request-bytes", str(MAX_REQUEST))
    # its stderr read as a log collector reads it: the audit trail has a line per item of every batch
    # that parses, far more than a pipe holds, and a writer on a full pipe waits
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(s.proc.stderr), daemon=True)
    reader.start()
    try:
        good = MetadataClient(s.addr, token=TOKEN, timeout=5)
        good.create((GOLDEN / "cluster-3" / "metadata" / "10.bin").read_bytes(), ledger_id=1)
        methods = list(_methods())
        assert len(methods) == 15                 # every method of both services
        rng = random.Random(37)
        with grpc.insecure_channel(s.addr, options=[("grpc.max_send_message_length", 2 * MAX_REQUEST)]) as ch:
            for i in range(len(methods) * 4):     # every method and kind once before measuring
                _call(ch, *methods[i % len(methods)], garbage(rng, i), ())
            before = _rss(s.proc.pid)
            plan = [(methods[i % len(methods)], garbage(rng, i // len(methods)),
                     (("x-bkdisk-token", TOKEN),) if i % 2 else ()) for i in range(CALLS)]
            with ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(lambda p: _call(ch, *p[0], p[1], p[2]), plan))
            after = _rss(s.proc.pid)
        assert s.proc.poll() is None, "the service died"
        assert len(codes) == CALLS and "SUCCESS" not in codes, set(codes)
        # gRPC's refusal of bytes that do not parse or are too large; INVALID_ARGUMENT: Watch's own
        # (it parses its requests); PERMISSION_DENIED: a Watch without the token is refused before
        # its first request is read
        assert set(codes) <= {"INTERNAL", "RESOURCE_EXHAUSTED", "PERMISSION_DENIED", "INVALID_ARGUMENT"}, set(codes)
        assert after - before < RSS_GROWTH, (before, after)
        # liveness: a valid call within a deadline of 1 s, with no retry
        alive = MetadataClient(s.addr, token=TOKEN, timeout=1.0, retries=0, coalesce=False)
        assert alive.read(1).version == 0
        alive.close()
        good.close()
        # SIGTERM stops it within 5 s, every call ended: none left for the stop to give up on (the
        # service's own line when it has to)
        s.proc.terminate()
        assert s.proc.wait(5) == 0
        reader.join(5)
        assert not [line for line in said if "still open" in line], said[-3:]
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(30)


def test_a_watch_request_that_does_not_parse_ends_the_call_with_its_reason(tmp_path):
    s = Served(tmp_path, "--token", TOKEN)
    threading.Thread(target=s.proc.stderr.read, daemon=True).start()
    try:
        with grpc.insecure_channel(s.addr) as ch:
            watch = ch.stream_stream("/bkdisk.metaservice.LedgerMetadataService/Watch",
                                     response_deserializer=pb.LedgerMetadataResponse.FromString)
            with pytest.raises(grpc.RpcError) as raised:
                list(watch(iter([b"\x0f\x01"]), metadata=(("x-bkdisk-token", TOKEN),), timeout=10))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "Watch request of 2 bytes that does not parse" in raised.value.details()
        s.stop()
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(30)
