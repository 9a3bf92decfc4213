"""Named creates sent as one CreateMany call from the client side: create-only, each its own outcome,
retried as a single create is (``MetadataClient.create``)."""
from __future__ import annotations

from collections.abc import Sequence

from bkdisk.metaservice.channel import MetadataError, check
from bkdisk.metaservice.client import Ledger, MetadataClient
from bkdisk.metaservice.proto import metaservice_pb2 as pb


def create_many(client: MetadataClient, items: Sequence[tuple[int, int, bytes]]) -> list[Ledger | MetadataError]:
    """Create each named ledger (scope, ledger id, serialized metadata) with one CreateMany call (at
    most 1000 items, metaservice.client.MAX_BATCH_BYTES of metadata): the Ledger created or the
    MetadataError (LEDGER_EXISTS for one that exists). A resent batch's LEDGER_EXISTS that finds its
    own bytes at version 0 had applied the first time; an item the store could not serve yet, or a
    batch above the service's request limit, is sent again a create at a time."""
    if not items:
        return []
    req = pb.LedgerBatchRequest(requests=[
        pb.LedgerMetadataRequest(ledger_scope_id=s, ledger_id=lid, serialized_metadata=data)
        for s, lid, data in items])
    try:
        r, sent = client.ch.call_counted(client.stub.CreateMany, req, may_resend=True)
    except MetadataError as exc:
        if exc.code != "RPC_RESOURCE_EXHAUSTED":
            raise
        return [_create_one(client, s, lid, data) for s, lid, data in items]
    check(r)
    out: list[Ledger | MetadataError] = []
    for (s, lid, data), x in zip(items, r.responses, strict=True):
        if x.code == pb.SUCCESS:
            out.append(Ledger(s, lid, x.version, data, b""))
        elif x.code == pb.STORE_UNAVAILABLE:
            out.append(_create_one(client, s, lid, data))
        elif x.code == pb.LEDGER_EXISTS and sent > 1 and (mine := _own_create(client, s, lid, data)):
            out.append(mine)
        else:
            out.append(MetadataError(pb.StatusCode.Name(x.code), x.message))
    return out


def _create_one(client: MetadataClient, scope: int, ledger_id: int, data: bytes) -> Ledger | MetadataError:
    try:
        return client.create(data, scope=scope, ledger_id=ledger_id)
    except MetadataError as exc:
        return exc


def _own_create(client: MetadataClient, scope: int, ledger_id: int, data: bytes) -> Ledger | None:
    got = client.read(ledger_id, scope)
    return got if got.version == 0 and got.serialized == data else None
