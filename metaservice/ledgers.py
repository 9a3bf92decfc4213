"""Ledger metadata as the service accepts it: validation, and the two encodings a request or response carries."""
from __future__ import annotations

import dataclasses
import functools

from bkdisk.formats.bookieid import validate_bookie_id
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ledger_metadata import LedgerMetadata, bookkeeper_refusal
from bkdisk.formats.metadata import (
    FORMAT_VERSIONS,
    format_message_bytes,
    in_format,
    parse_format_message,
    parse_metadata,
    serialize_metadata,
)
from bkdisk.metaservice.store import BadRequest, StoreError


class NotImplementedFormat(StoreError):
    code = "NOT_IMPLEMENTED"


class UnreadableMetadata(StoreError):
    """Stored bytes that do not parse: written by something other than this service."""

    code = "LEDGER_METADATA_ERROR"


def check_consistent(md: LedgerMetadata) -> None:
    """BadRequest unless BookKeeper's client can load ``md``, and, stricter than it, the ack quorum is at
    least 1, the first ensemble starts at entry 0 and each ensemble names valid, distinct BookieIds."""
    refusal = bookkeeper_refusal(md)
    if refusal is not None:
        raise BadRequest(f"BookKeeper cannot load this metadata: {refusal}")
    if md.ack_quorum < 1:
        raise BadRequest(f"ack quorum {md.ack_quorum}: at least 1 bookie must acknowledge an entry")
    if md.ensembles[0][0] != 0:
        raise BadRequest(f"the first ensemble starts at entry {md.ensembles[0][0]}, not 0")
    for first, members in md.ensembles:
        for member in members:
            try:
                validate_bookie_id(member)
            except FormatError as exc:
                raise BadRequest(f"ensemble at entry {first}: invalid BookieId: {exc.found} "
                                 f"(expected {exc.expected})") from None
        if len(set(members)) != len(members):
            raise BadRequest(f"ensemble at entry {first} names a bookie twice")


def incoming(metadata: bytes, serialized: bytes) -> bytes:
    """The LedgerMetadataSerDe bytes to store for a Create/Write request, after validation.

    ``serialized`` is stored exactly as given (any format 1-3); bare ``metadata`` (a binary
    LedgerMetadataFormat, BP-16's field) is stored as format 3.
    """
    if bool(metadata) == bool(serialized):
        raise BadRequest("give exactly one of metadata (LedgerMetadataFormat) and serialized_metadata")
    try:
        if serialized:
            md = parse_metadata(serialized, "<serialized_metadata>")
            data = bytes(serialized)
        else:
            md = parse_format_message(metadata, "<metadata>")
            data = serialize_metadata(md)
    except FormatError as exc:
        raise BadRequest(f"malformed ledger metadata: {exc}") from None
    check_consistent(md)
    return data


def check_format_version(format_version: int) -> None:
    """BadRequest or NotImplementedFormat unless ``format_version`` is 0 (as stored) or a format."""
    if format_version < 0:
        raise BadRequest(f"format_version {format_version} is negative")
    if format_version and format_version not in FORMAT_VERSIONS:
        raise NotImplementedFormat(f"format_version {format_version}: only formats "
                                   f"{FORMAT_VERSIONS} exist")


def unreadable(exc: FormatError) -> UnreadableMetadata:
    """The error of stored bytes that do not parse: where and what was expected, never what was found
    there (the parser quotes the bytes, which may hold the ledger's password, and a caller holding only
    the read token must never see it)."""
    where = "" if exc.offset is None else f" at offset {exc.offset}"
    return UnreadableMetadata(f"stored metadata does not parse{where}: expected {exc.expected}")


@functools.lru_cache(maxsize=65536)
def outgoing(data: bytes, format_version: int) -> tuple[bytes, bytes]:
    """(LedgerMetadataFormat bytes, LedgerMetadataSerDe bytes in ``format_version`` or as stored).

    Kept for the most recent 65536 (bytes, format) pairs: a read served from the store's cache
    then costs no parsing (the bytes are the key, so a changed ledger is a new entry)."""
    check_format_version(format_version)
    try:
        md = parse_metadata(data, "<stored metadata>")
    except FormatError as exc:
        raise unreadable(exc) from None
    serialized = data
    if format_version and format_version != md.format_version:
        try:
            serialized = serialize_metadata(in_format(md, format_version))
        except FormatError as exc:
            raise BadRequest(f"cannot express this ledger in format {format_version}: {exc}") from None
    if not md.has_last_entry_id:
        # Format 1 keeps -1 for an absent last entry id; the message leaves the field unset.
        md = dataclasses.replace(md, last_entry_id=0)
    return format_message_bytes(md), serialized


@functools.lru_cache(maxsize=65536)
def without_password(serialized: bytes) -> bytes:
    """``serialized`` (LedgerMetadataSerDe bytes, any format) with the ledger's password removed,
    in the same format; the bytes themselves when they hold no password (format 1 never does)."""
    try:
        md = parse_metadata(serialized, "<stored metadata>")
    except FormatError as exc:
        raise unreadable(exc) from None
    if md.password is None:
        return serialized
    return serialize_metadata(dataclasses.replace(md, password=None))
