"""The optional shared token that mutating calls must carry (gRPC call metadata)."""
from __future__ import annotations

import hmac

import grpc

TOKEN_HEADER = "x-bkdisk-token"


def authorized(context: grpc.ServicerContext, token: str | None) -> bool:
    """True when no token is configured or the call carries it (compared in constant time)."""
    if token is None:
        return True
    return any(k == TOKEN_HEADER and hmac.compare_digest(str(v), token)
               for k, v in context.invocation_metadata())
