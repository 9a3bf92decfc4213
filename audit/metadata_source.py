"""Where the audit gets ledger metadata: one small interface, a folder of serialized metadata or the
ledger metadata service (issue 10) through its client."""
from __future__ import annotations

from typing import Protocol

from formats.ids import LedgerId
from formats.metadata import LedgerMetadata


class MetadataSource(Protocol):
    """Every ledger's metadata, keyed by its full (128-bit) id."""

    def describe(self) -> str:
        """Where the metadata came from, for the report."""

    def load(self) -> dict[LedgerId, LedgerMetadata]:
        """All ledgers; raises the layer's error type when the source cannot be read at all."""


class MetadataDirSource:
    """A folder of ``<hex id>.bin``/``.txt`` files as LedgerMetadataSerDe writes them."""

    def __init__(self, folder: str, *, strict: bool = True):
        self.folder, self.strict = folder, strict
        self.errors: list[Exception] = []
        self._loaded: dict[LedgerId, LedgerMetadata] | None = None

    def describe(self) -> str:
        return f"metadata folder {self.folder}"

    def load(self) -> dict[LedgerId, LedgerMetadata]:
        """Read the folder once; later calls return the same ledgers."""
        if self._loaded is None:
            from bookie.metadata_dir import load_metadata_dir
            md, self.errors = load_metadata_dir(self.folder)
            if self.errors and self.strict:
                # A ledger whose metadata cannot be read would be reported as an orphan: refuse instead.
                raise self.errors[0]
            self._loaded = md
        return self._loaded


class MetadataServiceSource:
    """Every ledger's metadata read through the ledger metadata service (``grpc://HOST:PORT``), once,
    on the driver: the whole audit holds one connection to the service, and the service one store
    session, however many tasks run."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0):
        from metaservice.client import service_target
        self.url, self.target = url, service_target(url)
        self.token, self.timeout = token, timeout
        self._loaded: dict[LedgerId, LedgerMetadata] | None = None

    def describe(self) -> str:
        return f"metadata service {self.url}"

    def load(self) -> dict[LedgerId, LedgerMetadata]:
        """Read every ledger once; later calls return the same ledgers."""
        if self._loaded is None:
            from metaservice.client import MetadataClient
            client = MetadataClient(self.target, token=self.token, timeout=self.timeout)
            try:
                self._loaded = client.load_all()
            finally:
                client.close()
        return self._loaded


def open_source(spec: str) -> MetadataSource:
    """``grpc://HOST:PORT`` names the metadata service; anything else a metadata folder."""
    return MetadataServiceSource(spec) if spec.startswith("grpc://") else MetadataDirSource(spec)
