"""One bookie's view of the service's ledger metadata, for a check of that bookie (bookie-fsck
--metadata grpc://, the audit's disk tasks): the ledgers that place entries on it kept from one
streaming bulk read, any other ledger read with one Read when a check asks for it."""
from __future__ import annotations

from bkdisk.bookie.metadata_dir import MetadataView, kept_for
from bkdisk.bookie.near_ledgers import NearLedgers
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.ledger_metadata import LedgerMetadata
from bkdisk.formats.metadata import parse_metadata
from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.client import MetadataClient

NOT_FOUND = "LEDGER_NOT_FOUND"


def read_ledger(target: str, lid: LedgerId, **client_kw) -> LedgerMetadata | None:
    """One ledger's metadata from the service at ``target``, None when it has none."""
    c = MetadataClient(target, **client_kw)
    try:
        got = c.read(lid.ledger, lid.scope)
    except MetadataError as exc:
        if exc.code == NOT_FOUND:
            return None
        raise
    finally:
        c.close()
    return parse_metadata(got.serialized, path=f"{target}: ledger {lid}")


def bookie_view(target: str, bookie: str | None, **client_kw) -> MetadataView:
    """Every ledger read once (one bulk read), those ``kept_for`` ``bookie`` kept."""
    client = MetadataClient(target, **client_kw)
    near = NearLedgers()
    try:
        for page in client.read_ledgers():
            for x in page:
                m = x.parse(f"{target}: ")
                if kept_for(m, bookie):
                    near.add(x.key, m)
    finally:
        client.close()
    return MetadataView(near, lambda lid: read_ledger(target, lid, **client_kw))
