"""One log line per request of the metadata service (``serve --verbose``)."""
from __future__ import annotations

import logging
import time

import grpc

from bkdisk.metaservice.proto import metaservice_pb2 as pb

log = logging.getLogger(__name__)


class RequestLog(grpc.ServerInterceptor):
    """One log line per request: method, peer, outcome (the response's status code, or the gRPC
    error), milliseconds; a stream's line is written when it ends."""

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None
        method = details.method.rsplit("/", 1)[-1]

        def line(context, outcome, t0):
            log.info("%s %s %s %.1f ms", method, context.peer(), outcome, (time.perf_counter() - t0) * 1000)

        def unary(behaviour):
            def run(request, context):
                t0 = time.perf_counter()
                try:
                    r = behaviour(request, context)
                except Exception as exc:
                    line(context, type(exc).__name__, t0)
                    raise
                code = getattr(r, "code", None)
                line(context, "OK" if code is None else pb.StatusCode.Name(code), t0)
                return r
            return run

        def streaming(behaviour):
            def run(request, context):
                t0, n, outcome = time.perf_counter(), 0, "OK"
                try:
                    for r in behaviour(request, context):
                        n += 1
                        code = getattr(r, "code", 0)
                        if code:
                            outcome = pb.StatusCode.Name(code)
                        yield r
                finally:
                    line(context, f"{outcome} ({n} responses)", t0)
            return run

        if handler.unary_unary:
            return handler._replace(unary_unary=unary(handler.unary_unary))
        if handler.unary_stream:
            return handler._replace(unary_stream=streaming(handler.unary_stream))
        if handler.stream_stream:
            return handler._replace(stream_stream=streaming(handler.stream_stream))
        return handler
