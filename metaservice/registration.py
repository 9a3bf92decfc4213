"""The LedgerMetadataService's method handlers, as the generated registration makes them but for the
methods whose requests the servicer parses itself."""
from __future__ import annotations

from typing import Any

import grpc

from bkdisk.metaservice.proto import metaservice_pb2 as pb

SERVICE = "bkdisk.metaservice.LedgerMetadataService"
# Watch reads its requests on a thread of its own (WatchStream). A request gRPC fails to parse is
# ended by gRPC from its polling thread, concurrently with that reader; under concurrent calls such
# a call's status was seen never to complete, and a server holding one never stops. Parsed by the
# stream instead, a bad request ends the call from the handler, as any other refusal does.
RAW_REQUESTS = frozenset({"Watch"})

_KINDS = {(False, False): grpc.unary_unary_rpc_method_handler,
          (False, True): grpc.unary_stream_rpc_method_handler,
          (True, False): grpc.stream_unary_rpc_method_handler,
          (True, True): grpc.stream_stream_rpc_method_handler}


def add_ledger_service(servicer: Any, server: grpc.Server) -> None:
    """Register ``servicer``'s methods on ``server`` (generic and registered handlers, as generated code does)."""
    handlers = {}
    for m in pb.DESCRIPTOR.services_by_name["LedgerMetadataService"].methods:
        make = _KINDS[(m.client_streaming, m.server_streaming)]
        parse = None if m.name in RAW_REQUESTS else getattr(pb, m.input_type.name).FromString
        handlers[m.name] = make(getattr(servicer, m.name), request_deserializer=parse,
                                response_serializer=getattr(pb, m.output_type.name).SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)
