"""Responses for the read-only token: every ledger's metadata with its password removed (the key a
client opens and fences the ledger with, and of its entries' digests), and marked so."""
from __future__ import annotations

from typing import Any

from bkdisk.metaservice import ledgers
from bkdisk.metaservice.proto import metaservice_pb2 as pb
from bkdisk.metaservice.store import StoreError


def _ledger(r: Any) -> None:
    """One LedgerMetadataResponse, in place: both encodings re-made from the password-free bytes."""
    if not r.serialized_metadata and not r.metadata:
        return                        # a deletion, a refusal: no metadata to withhold
    try:
        # the service always sends both; bare `metadata` would be withheld whole
        r.serialized_metadata = ledgers.without_password(r.serialized_metadata)
        r.metadata = ledgers.outgoing(r.serialized_metadata, 0)[0] if r.serialized_metadata else b""
    except StoreError as exc:
        # metadata that does not parse cannot be shown safely: the item becomes the error
        code = pb.StatusCode.Value(exc.code)
        r.Clear()
        r.code, r.message = code, exc.message
        return
    r.password_withheld = True


def strip_passwords(response: Any) -> Any:
    """``response`` (any message of either service) with no password left in it."""
    if isinstance(response, pb.LedgerMetadataResponse):
        _ledger(response)
    elif isinstance(response, pb.LedgerBatchResponse):
        for r in response.responses:
            _ledger(r)
    elif isinstance(response, pb.ReadLedgersResponse):
        for x in response.ledgers:
            try:
                x.serialized_metadata = ledgers.without_password(x.serialized_metadata)
            except StoreError:
                x.serialized_metadata = b""   # unreadable: nothing of it is shown
            x.password_withheld = True
    return response
