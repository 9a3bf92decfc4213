"""What both the metadata servicer and its watch streams answer with: a request's ledger id, checked,
and a ledger's metadata as a response in the encoding the caller asked for."""
from __future__ import annotations

from typing import Any

from bkdisk.metaservice import ledgers
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.store import BadRequest, check_ids


def ledger_id_of(request: pb.LedgerMetadataRequest) -> int:
    if not request.HasField("ledger_id"):
        raise BadRequest("ledger_id is required")
    check_ids(request.ledger_scope_id, request.ledger_id)
    return request.ledger_id


def ledger_response(scope: int, ledger: int, version: int, data: bytes, format_version: int,
              **extra: Any) -> pb.LedgerMetadataResponse:
    message, serialized = ledgers.outgoing(data, format_version)
    return pb.LedgerMetadataResponse(code=pb.SUCCESS, ledger_scope_id=scope, ledger_id=ledger,
                                     version=version, metadata=message,
                                     serialized_metadata=serialized, **extra)
