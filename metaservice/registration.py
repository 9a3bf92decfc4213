"""The two services' method handlers, as the generated registration makes them, but each behaviour
behind the service's checks (call_gate) and Watch's requests parsed by the servicer itself."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from bkdisk.metaservice.proto import metaservice_pb2 as pb

# Watch reads its requests on a thread of its own (WatchStream). A request gRPC fails to parse is
# ended by gRPC from its polling thread, concurrently with that reader; under concurrent calls such
# a call's status was seen never to complete, and a server holding one never stops. Parsed by the
# stream instead, a bad request ends the call from the handler, as any other refusal does.
RAW_REQUESTS = frozenset({("LedgerMetadataService", "Watch")})

_KINDS = {(False, False): grpc.unary_unary_rpc_method_handler,
          (False, True): grpc.unary_stream_rpc_method_handler,
          (True, False): grpc.stream_unary_rpc_method_handler,
          (True, True): grpc.stream_stream_rpc_method_handler}


def add_service(server: grpc.Server, service: str, servicer: Any, wrap: Callable[[Any, Callable], Callable]) -> None:
    """Register ``servicer``'s methods of ``service`` (a service of the proto) on ``server``, generic and
    registered handlers as generated code makes them, each behaviour given through ``wrap(method, behaviour)``."""
    desc = pb.DESCRIPTOR.services_by_name[service]
    handlers = {}
    for m in desc.methods:
        make = _KINDS[(m.client_streaming, m.server_streaming)]
        parse = None if (service, m.name) in RAW_REQUESTS else getattr(pb, m.input_type.name).FromString
        handlers[m.name] = make(wrap(m, getattr(servicer, m.name)), request_deserializer=parse,
                                response_serializer=getattr(pb, m.output_type.name).SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(desc.full_name, handlers),))
    server.add_registered_method_handlers(desc.full_name, handlers)
