"""Where the audit gets ledger metadata: one small interface, a folder of serialized metadata today
(the metadata-service client of issue 10 becomes another implementation)."""
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
