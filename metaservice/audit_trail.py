"""The audit trail: one INFO line per mutation (create, write, remove, a bookie's registration and its
end) with the caller (peer, client certificate name, which token), the ledger or bookie, and the
outcome, refused calls included. Never a token or a password: only which kind of token it was.

A batch's lines (one an item) go as one record, which ``EveryLine`` prints as that many lines, each
with the prefix a record of its own would have: a batch of a thousand creates costs one record, not
a thousand (with their stream flushes)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from bkdisk.formats.ids import LedgerId
from bkdisk.metaservice.auth import MUTATING, SERVICES, Tokens, split_method
from bkdisk.metaservice.proto import metaservice_pb2 as pb

log = logging.getLogger("bkdisk.metaservice.audit")


def caller(context: grpc.ServicerContext, token: str) -> str:
    cn = (context.auth_context() or {}).get("x509_common_name")
    name = f" cert={cn[0].decode('utf-8', 'replace')!r}" if cn else ""
    return f"peer={context.peer()}{name} token={token}"


def _subject(request: Any, response: Any) -> str:
    if isinstance(request, pb.BookieRequest):
        return f"bookie={request.bookie_id!r}"
    if request.HasField("ledger_id"):
        return f"ledger={LedgerId(request.ledger_scope_id, request.ledger_id).qualified_name}"
    if response is not None and response.code == pb.SUCCESS:      # a Create that generated the id
        return f"ledger={LedgerId(response.ledger_scope_id, response.ledger_id).qualified_name}"
    return f"ledger=new-in-scope-{request.ledger_scope_id}"


def _outcome(response: Any) -> str:
    return pb.StatusCode.Name(response.code)


class EveryLine(logging.Formatter):
    """Each line of a record's message formatted as a record of its own (the same time and logger):
    a log collector that reads a line a record reads the audit trail's line an item of a batch."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        whole = record.message
        if "\n" not in whole:
            return super().formatMessage(record)
        try:
            out = []
            for line in whole.split("\n"):
                record.message = line
                out.append(super().formatMessage(record))
        finally:
            record.message = whole
        return "\n".join(out)


class AuditTrail(grpc.ServerInterceptor):
    def __init__(self, tokens: Tokens):
        self.tokens = tokens

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        service, method = split_method(details.method)
        if handler is None or service not in SERVICES or method not in MUTATING:
            return handler
        token = self.tokens.label(details.invocation_metadata)
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._unary(method, token, handler.unary_unary))
        return handler._replace(unary_stream=self._register(method, token, handler.unary_stream))

    @staticmethod
    def _unary(method: str, token: str, behaviour: Callable) -> Callable:
        def run(request, context):
            who = caller(context, token)
            try:
                response = behaviour(request, context)
            except Exception as exc:
                log.info("%s %s %s outcome=%s", method, who, _subject(request, None), type(exc).__name__)
                raise
            if isinstance(response, pb.LedgerBatchResponse):
                if response.code != pb.SUCCESS or not response.responses:
                    log.info("%s %s batch of %d outcome=%s", method, who, len(request.requests),
                             _outcome(response))
                if response.responses:
                    log.info("%s", "\n".join(f"{method}[{i}] {who} {_subject(q, r)} outcome={_outcome(r)}"
                                             for i, (q, r) in enumerate(zip(request.requests, response.responses))))
            else:
                log.info("%s %s %s outcome=%s", method, who, _subject(request, response), _outcome(response))
            return response
        return run

    @staticmethod
    def _register(method: str, token: str, behaviour: Callable) -> Callable:
        def run(request, context):
            who = caller(context, token)
            registered = False
            try:
                for r in behaviour(request, context):
                    if not registered:
                        log.info("%s %s %s read_only=%s outcome=%s", method, who, _subject(request, r),
                                 request.read_only, _outcome(r))
                        registered = r.code == pb.SUCCESS
                    yield r
            finally:
                if registered:
                    log.info("%s-ended %s %s outcome=UNREGISTERED", method, who, _subject(request, None))
        return run
