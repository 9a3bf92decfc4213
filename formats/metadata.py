"""Ledger metadata as LedgerMetadataSerDe writes it (formats 1, 2 and 3): parse and byte-exact serialize."""
from __future__ import annotations

import dataclasses
from typing import Any

from google.protobuf.message import Message

from bkdisk.formats.errors import FormatError, shown
from bkdisk.formats.ledger_metadata import INT32, INT64, INVALID_ENTRY_ID, LedgerMetadata, unfit
from bkdisk.formats.proto import LedgerMetadataFormat, java_text_format, parse_text_format

# specs/ledger-metadata.md; BookKeeper: bookkeeper-server/src/main/java/org/apache/bookkeeper/meta/
# LedgerMetadataSerDe.java and bookkeeper-proto/src/main/proto/DataFormats.proto.

HEADER_PREFIX = b"BookieMetadataFormatVersion\t"
MAX_VERSION_DIGITS = 10
FORMAT_VERSIONS = (1, 2, 3)
CURRENT_FORMAT_VERSION = 3

STATES = ("OPEN", "IN_RECOVERY", "CLOSED")
DIGEST_TYPES = ("CRC32", "HMAC", "CRC32C", "DUMMY")

# ---------------------------------------------------------------------------------------------
# parsing


def parse_metadata(data: bytes, path: str | None = None) -> LedgerMetadata:
    """Parse LedgerMetadataSerDe bytes (header line + format 1, 2 or 3 body).

    Raises FormatError (and nothing else) on any deviation. The header, the format 1 text and
    the format 3 length prefix must be in the exact form BookKeeper writes; format 2/3 message
    bodies are decoded by protobuf.
    """
    data = bytes(data)
    version, body_offset = _parse_header(data, path)
    body = data[body_offset:]
    if version == 1:
        from bkdisk.formats.metadata_v1 import parse_v1  # format 1 is rare: its text parser loads on demand
        return parse_v1(body, path, body_offset)
    if version == 2:
        msg = parse_text_format(body, LedgerMetadataFormat(), what="LedgerMetadataFormat TextFormat",
                                path=path, offset=body_offset)
        return _from_message(msg, 2, path, body_offset)
    return _parse_v3(body, path, body_offset)


def body_offset(data: bytes) -> int:
    """Where the record's body starts: past its header line (format 3: at its length prefix)."""
    return _parse_header(bytes(data[:len(HEADER_PREFIX) + MAX_VERSION_DIGITS + 1]), None)[1]


def _parse_header(data: bytes, path: str | None) -> tuple[int, int]:
    if data.startswith(HEADER_PREFIX + b"3\n"):   # what BookKeeper writes today: no byte-by-byte check
        return 3, len(HEADER_PREFIX) + 2
    for i, want in enumerate(HEADER_PREFIX):
        if i >= len(data):
            raise FormatError("header 'BookieMetadataFormatVersion\\t'", "end of data", path=path, offset=i)
        if data[i] != want:
            raise FormatError("header 'BookieMetadataFormatVersion\\t'", f"byte 0x{data[i]:02x}",
                              path=path, offset=i)
    start = len(HEADER_PREFIX)
    end = data.find(b"\n", start, start + MAX_VERSION_DIGITS + 1)
    if end < 0:
        raise FormatError(f"a format version of at most {MAX_VERSION_DIGITS} digits ended by LF",
                          shown(data[start:start + MAX_VERSION_DIGITS + 1]), path=path, offset=start)
    text = data[start:end]
    if text not in (b"1", b"2", b"3"):
        raise FormatError("format version 1, 2 or 3", shown(text), path=path, offset=start)
    return int(text), end + 1


def _parse_v3(body: bytes, path: str | None, base: int) -> LedgerMetadata:
    size = 0
    for i in range(5):
        if i >= len(body):
            raise FormatError("varint32 message length", "end of data", path=path, offset=base + i)
        b = body[i]
        size |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            n = i + 1
            break
    else:
        raise FormatError("varint32 message length of at most 5 bytes", "a 6th byte", path=path,
                          offset=base + 5)
    if size > INT32[1]:
        raise FormatError("message length below 2^31", str(size), path=path, offset=base)
    if n > 1 and body[n - 1] == 0:
        raise FormatError("minimally encoded varint32 message length", body[:n].hex(), path=path,
                          offset=base)
    if len(body) - n != size:
        found = "end of data" if len(body) - n < size else f"{len(body) - n - size} bytes after it"
        raise FormatError(f"a {size}-byte LedgerMetadataFormat message ending the data", found,
                          path=path, offset=base + n + min(size, len(body) - n))
    msg = LedgerMetadataFormat()
    try:
        msg.ParseFromString(body[n:])
    except Exception as exc:  # DecodeError, or any parser failure on hostile bytes
        raise FormatError("binary LedgerMetadataFormat", f"{type(exc).__name__}: {exc}"[:200],
                          path=path, offset=base + n) from None
    missing = msg.FindInitializationErrors()
    if missing:
        raise FormatError("LedgerMetadataFormat with its required fields", "missing " + ", ".join(missing),
                          path=path, offset=base + n)
    return _from_message(msg, 3, path, base + n)


def _text(value: object, what: str, path: str | None, offset: int) -> str:
    # upb hands back bytes for a proto2 string field that is not valid UTF-8.
    if not isinstance(value, str):
        raise FormatError(f"UTF-8 {what}", shown(value, 80), path=path, offset=offset)
    return value


def _from_message(msg: Message, version: int, path: str | None, offset: int) -> LedgerMetadata:
    m: Any = msg
    segments = []
    for seg in m.segment:   # a loop, not generators: every ledger of a cluster's metadata comes here
        members = tuple(seg.ensembleMember)
        for x in members:
            if not isinstance(x, str):
                _text(x, "ensemble member", path, offset)
        segments.append((int(seg.firstEntryId), members))
    ensembles = tuple(segments)
    custom = tuple((_text(e.key, "custom metadata key", path, offset), bytes(e.value))
                   for e in m.customMetadata)
    has_ack = m.HasField("ackQuorumSize")
    return LedgerMetadata(
        format_version=version,
        write_quorum=int(m.quorumSize),
        ensemble_size=int(m.ensembleSize),
        ack_quorum=int(m.ackQuorumSize) if has_ack else int(m.quorumSize),
        length=int(m.length),
        last_entry_id=int(m.lastEntryId),
        state=LedgerMetadataFormat.State.Name(m.state),
        ensembles=ensembles,
        digest_type=LedgerMetadataFormat.DigestType.Name(m.digestType) if m.HasField("digestType") else None,
        password=bytes(m.password) if m.HasField("password") else None,
        ctime=int(m.ctime) if m.HasField("ctime") else None,
        custom_metadata=custom,
        ctoken=int(m.cToken) if m.HasField("cToken") else None,
        has_last_entry_id=m.HasField("lastEntryId"),
        has_ack_quorum=has_ack,
    )


# ---------------------------------------------------------------------------------------------
# serialization


def in_format(md: LedgerMetadata, version: int) -> LedgerMetadata:
    """``md`` to be serialized in format ``version`` as BookKeeper would write it: format 1 stores a last
    entry id for a CLOSED ledger only (-1 stands for none); formats 2 and 3 always set the field (-1 for
    a ledger not closed), which BookKeeper reads as -1 when unset too."""
    if version == 1 and not md.is_closed:
        md = dataclasses.replace(md, has_last_entry_id=False, last_entry_id=INVALID_ENTRY_ID)
    elif version != 1 and not md.has_last_entry_id:
        md = dataclasses.replace(md, has_last_entry_id=True, last_entry_id=INVALID_ENTRY_ID)
    return dataclasses.replace(md, format_version=version)


def serialize_metadata(md: LedgerMetadata) -> bytes:
    """The exact bytes LedgerMetadataSerDe writes for ``md`` in ``md.format_version``.

    Raises FormatError when ``md`` holds something its format cannot carry (for example a
    digest type in format 1) or a value out of its field's range.
    """
    _check_common(md)
    header = HEADER_PREFIX + str(md.format_version).encode("ascii") + b"\n"
    if md.format_version == 1:
        from bkdisk.formats.metadata_v1 import serialize_v1
        return header + serialize_v1(md)
    msg = _to_message(md)
    if md.format_version == 2:
        return header + java_text_format(msg).encode("utf-8")
    body = msg.SerializeToString()
    return header + _varint(len(body)) + body


def _check_int(value: object, bounds: tuple[int, int], name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
        raise unfit(f"{name} an integer in [{bounds[0]}, {bounds[1]}]", repr(value))


def _check_text(value: object, name: str) -> None:
    if not isinstance(value, str):
        raise unfit(f"{name} a str", repr(value))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise unfit(f"{name} encodable as UTF-8", repr(value)) from None


def _check_common(md: LedgerMetadata) -> None:
    if md.format_version not in FORMAT_VERSIONS:
        raise unfit("format_version 1, 2 or 3", md.format_version)
    if md.state not in STATES:
        raise unfit(f"state one of {STATES}", md.state)
    for value, bounds, name in ((md.write_quorum, INT32, "write_quorum"),
                                (md.ensemble_size, INT32, "ensemble_size"),
                                (md.ack_quorum, INT32, "ack_quorum"),
                                (md.length, INT64, "length"),
                                (md.last_entry_id, INT64, "last_entry_id")):
        _check_int(value, bounds, name)
    for ens in md.ensembles:
        if not (isinstance(ens, tuple) and len(ens) == 2 and isinstance(ens[1], tuple)):
            raise unfit("ensembles (first_entry_id, (bookie, ...)) pairs", repr(ens))
        _check_int(ens[0], INT64, "first_entry_id")
        for member in ens[1]:
            _check_text(member, "ensemble member")
    if not md.has_ack_quorum and md.ack_quorum != md.write_quorum:
        raise unfit("ack_quorum equal to write_quorum when has_ack_quorum is false", md.ack_quorum)


def _to_message(md: LedgerMetadata) -> Message:
    if not md.has_last_entry_id and md.last_entry_id != 0:
        raise unfit("last_entry_id 0 (the protobuf default) when has_last_entry_id is false",
                     md.last_entry_id)
    m: Any = LedgerMetadataFormat()
    m.quorumSize = md.write_quorum
    m.ensembleSize = md.ensemble_size
    m.length = md.length
    if md.has_last_entry_id:
        m.lastEntryId = md.last_entry_id
    m.state = LedgerMetadataFormat.State.Value(md.state)
    for first, members in md.ensembles:
        seg = m.segment.add()
        seg.ensembleMember.extend(members)
        seg.firstEntryId = first
    if md.digest_type is not None:
        if md.digest_type not in DIGEST_TYPES:
            raise unfit(f"digest_type one of {DIGEST_TYPES} or None", md.digest_type)
        m.digestType = LedgerMetadataFormat.DigestType.Value(md.digest_type)
    if md.password is not None:
        if not isinstance(md.password, bytes):
            raise unfit("password bytes or None", repr(md.password))
        m.password = md.password
    if md.has_ack_quorum:
        m.ackQuorumSize = md.ack_quorum
    if md.ctime is not None:
        _check_int(md.ctime, INT64, "ctime")
        m.ctime = md.ctime
    for key, value in md.custom_metadata:
        _check_text(key, "custom metadata key")
        if not isinstance(value, bytes):
            raise unfit("custom metadata values bytes", repr(value))
        entry = m.customMetadata.add()
        entry.key = key
        entry.value = value
    if md.ctoken is not None:
        _check_int(md.ctoken, INT64, "ctoken")
        m.cToken = md.ctoken
    return m


def parse_format_message(body: bytes, path: str | None = None) -> LedgerMetadata:
    """Parse a bare binary LedgerMetadataFormat (no header, no length) as format 3 metadata."""
    return _parse_v3(_varint(len(body)) + bytes(body), path, 0)


def format_message_bytes(md: LedgerMetadata) -> bytes:
    """The bare binary LedgerMetadataFormat message of ``md`` (what format 3 puts after its length)."""
    _check_common(md)
    return _to_message(md).SerializeToString()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
