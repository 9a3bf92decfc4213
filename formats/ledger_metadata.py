"""A ledger's metadata as a value (``LedgerMetadata``) and the bounds every format of it shares.

Below the formats' parsers and writers (``metadata.py``: formats 2 and 3 and the choice of format;
``metadata_v1.py``: format 1), which all build and read this one value."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bkdisk.formats.errors import FormatError

INVALID_ENTRY_ID = -1

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)

Ensemble = tuple[int, tuple[str, ...]]


@dataclass(frozen=True)
class LedgerMetadata:
    """One ledger's metadata, holding exactly what its serialized form holds.

    Values are the stored ones, not BookKeeper's interpretation: ``length`` and ``last_entry_id``
    are kept even when the ledger is not CLOSED (BookKeeper then reads them as 0 and -1, see
    ``effective_length``/``effective_last_entry_id``). Presence of optional protobuf fields is kept
    so that ``serialize_metadata`` reproduces the input: ``None`` means absent for ``digest_type``,
    ``password``, ``ctime`` and ``ctoken``; ``has_last_entry_id``/``has_ack_quorum`` for the two
    optional integers (when absent, ``last_entry_id`` is 0, the protobuf default, and
    ``ack_quorum`` equals ``write_quorum``, as BookKeeper reads it).

    Format 1 carries no ack quorum, digest type, password, ctime, custom metadata or cToken; a
    format 1 object has ``has_ack_quorum=False``, ``ack_quorum == write_quorum``, ``None``/``()``
    for the rest, ``has_last_entry_id`` true only when CLOSED and ``last_entry_id`` -1 otherwise.
    """

    format_version: int
    write_quorum: int
    ensemble_size: int
    ack_quorum: int
    length: int
    last_entry_id: int
    state: str
    ensembles: tuple[Ensemble, ...]
    digest_type: str | None = None
    password: bytes | None = None
    ctime: int | None = None
    custom_metadata: tuple[tuple[str, bytes], ...] = ()
    ctoken: int | None = None
    has_last_entry_id: bool = True
    has_ack_quorum: bool = True

    @property
    def is_closed(self) -> bool:
        return self.state == "CLOSED"

    @property
    def effective_last_entry_id(self) -> int:
        """The last entry id BookKeeper reads: the stored one when CLOSED, else -1."""
        return self.last_entry_id if self.is_closed else INVALID_ENTRY_ID

    @property
    def effective_length(self) -> int:
        """The length BookKeeper reads: the stored one when CLOSED, else 0."""
        return self.length if self.is_closed else 0

    def ensemble_at(self, entry_id: int) -> tuple[str, ...]:
        """The ensemble in force for ``entry_id``: greatest first entry id <= ``entry_id``."""
        best: Ensemble | None = None
        for first, members in self.ensembles:
            if first <= entry_id and (best is None or first >= best[0]):
                best = (first, members)
        if best is None:
            raise KeyError(entry_id)
        return best[1]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (bytes as hex) for machine consumers."""
        return {
            "format_version": self.format_version,
            "ensemble_size": self.ensemble_size,
            "write_quorum": self.write_quorum,
            "ack_quorum": self.ack_quorum,
            "has_ack_quorum": self.has_ack_quorum,
            "state": self.state,
            "length": self.length,
            "last_entry_id": self.last_entry_id,
            "has_last_entry_id": self.has_last_entry_id,
            "effective_length": self.effective_length,
            "effective_last_entry_id": self.effective_last_entry_id,
            "ensembles": [{"first_entry_id": first, "bookies": list(members)}
                          for first, members in self.ensembles],
            "digest_type": self.digest_type,
            # LedgerMetadataImpl.hasPassword: the field is present, even empty (format 1 has none)
            "has_password": self.password is not None,
            "password_hex": None if self.password is None else self.password.hex(),
            "ctime": self.ctime,
            "custom_metadata": [{"key": k, "value_hex": v.hex()} for k, v in self.custom_metadata],
            "ctoken": self.ctoken,
        }


def bookkeeper_refusal(md: LedgerMetadata) -> str | None:
    """Why BookKeeper's client cannot load ``md``, or None. LedgerMetadataSerDe hands every record to
    LedgerMetadataBuilder, which takes the segments in order, each of exactly ``ensembleSize`` bookies
    and starting after the one before, then requires ensemble >= write quorum >= ack quorum and at
    least one ensemble (LedgerMetadataImpl). The parsers here keep such a record, so that it can be
    shown and reported; this says what the bookies' clients make of it."""
    previous = None
    for first, members in md.ensembles:
        if len(members) != md.ensemble_size:
            return (f"the ensemble at entry {first} has {len(members)} bookies, "
                    f"the ensemble size is {md.ensemble_size}")
        if previous is not None and first <= previous:
            return f"the ensemble at entry {first} does not start after the one at entry {previous}"
        previous = first
    if md.write_quorum > md.ensemble_size:
        return f"write quorum {md.write_quorum} is larger than the ensemble size {md.ensemble_size}"
    if md.ack_quorum > md.write_quorum:
        return f"ack quorum {md.ack_quorum} is larger than the write quorum {md.write_quorum}"
    if not md.ensembles:
        return "it holds no ensemble"
    return None


def unfit(what: str, found: object) -> FormatError:
    """The error of a value no format can serialize: what was expected, and what was found."""
    return FormatError(f"serializable ledger metadata: {what}", str(found)[:200])
