"""What stands in front of every method of both services: the token (auth.Guard), the audit trail of
mutations and one peer's stream limits, composed once per method when the services are registered.
A call then pays for its checks only, not for gRPC's interceptor pipeline (a handler looked up and
wrapped anew for every call). The audit trail is outermost, so refused calls have their line; a
stream refused by the token takes no stream slot."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import MethodDescriptor

from bkdisk.metaservice import audit_trail
from bkdisk.metaservice.auth import MUTATING, Guard, Tokens
from bkdisk.metaservice.limits import Limits
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.stream_limits import StreamLimits


class CallGate:
    """``wrap`` puts the checks in front of one method's behaviour."""

    def __init__(self, tokens: Tokens, strip: Callable[[Any], Any], limits: Limits, certificate_names: bool = False):
        self.tokens = tokens
        self.strip = strip
        self.stream_limits = StreamLimits(limits)
        self.certificate_names = certificate_names     # client certificates required: the trail names them

    def wrap(self, method: MethodDescriptor, behaviour: Callable) -> Callable:
        name, streaming = method.name, method.server_streaming
        if streaming:
            behaviour = self.stream_limits.limited(name, behaviour)
        guard = Guard(name, streaming, getattr(pb, method.output_type.name), self.tokens, self.strip, behaviour)
        if streaming:
            return _audited_stream(name, guard, self.certificate_names) if name in MUTATING else _stream(guard)
        return _audited_unary(name, guard, self.certificate_names) if name in MUTATING else _unary(guard)


def _unary(guard: Guard) -> Callable:
    def run(request, context):
        behaviour, _label = guard.admit(context)
        return behaviour(request, context)
    return run


def _stream(guard: Guard) -> Callable:
    def run(request, context):
        behaviour, _label = guard.admit(context)
        yield from behaviour(request, context)
    return run


def _audited_unary(name: str, guard: Guard, certificate_names: bool) -> Callable:
    def run(request, context):
        behaviour, label = guard.admit(context)
        who = audit_trail.caller(context, label, certificate_names)
        try:
            response = behaviour(request, context)
        except Exception as exc:
            audit_trail.failed(name, who, request, exc)
            raise
        audit_trail.unary(name, who, request, response)
        return response
    return run


def _audited_stream(name: str, guard: Guard, certificate_names: bool) -> Callable:
    def run(request, context):
        behaviour, label = guard.admit(context)
        yield from audit_trail.registration(name, label, certificate_names, behaviour)(request, context)
    return run
