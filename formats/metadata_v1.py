"""Ledger metadata format 1: BookKeeper's legacy line-oriented text (no digest type, password or ack quorum).

specs/ledger-metadata.md has its grammar. Source: LedgerMetadataSerDe.parseVersion1Config and
writeVersion1Config.
"""
from __future__ import annotations

import re

from bkdisk.formats.errors import FormatError, shown
from bkdisk.formats.ledger_metadata import INT32, INT64, INVALID_ENTRY_ID, Ensemble, LedgerMetadata, unfit

V1_CLOSED_TAG = "CLOSED"
V1_IN_RECOVERY_ENTRY_ID = -102

_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,19})")


def parse_v1(body: bytes, path: str | None, base: int) -> LedgerMetadata:
    what = "format 1 ledger metadata"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"UTF-8 {what}", f"byte 0x{body[exc.start]:02x} that is not UTF-8",
                          path=path, offset=base + exc.start) from None
    if "\r" in text:
        pos = len(text[: text.index("\r")].encode("utf-8"))
        raise FormatError(f"{what} lines ended by LF only", "CR", path=path, offset=base + pos)
    pieces = text.split("\n")
    # pieces[-1] is what follows the last LF: "" (OPEN) or the closing line without LF.
    offsets = []
    pos = base
    for piece in pieces:
        offsets.append(pos)
        pos += len(piece.encode("utf-8")) + 1
    if len(pieces) < 4:
        raise FormatError(f"{what}: write quorum, ensemble size and length lines",
                          "end of data", path=path, offset=base + len(body))
    write_quorum = _v1_int(pieces[0], INT32, "write quorum", path, offsets[0])
    ensemble_size = _v1_int(pieces[1], INT32, "ensemble size", path, offsets[1])
    length = _v1_int(pieces[2], INT64, "length", path, offsets[2])
    ensembles: list[Ensemble] = []
    for piece, off in zip(pieces[3:-1], offsets[3:-1]):
        parts = piece.split("\t")
        if len(parts) >= 2 and parts[1] == V1_CLOSED_TAG:
            raise FormatError(f"the '<id>\\tCLOSED' line last and without LF ({what})",
                              "more data after it", path=path, offset=off)
        if len(parts) < 2 or any(p == "" for p in parts[1:]):
            raise FormatError(f"ensemble line '<firstEntryId>\\t<bookie>...' ({what})",
                              shown(piece, 80), path=path, offset=off)
        first = _v1_int(parts[0], INT64, "first entry id", path, off)
        ensembles.append((first, tuple(parts[1:])))
    last = pieces[-1]
    if last == "":
        state, last_entry_id, has_last = "OPEN", INVALID_ENTRY_ID, False
    else:
        parts = last.split("\t")
        if len(parts) != 2 or parts[1] != V1_CLOSED_TAG:
            raise FormatError(f"'<lastEntryId>\\tCLOSED' or end of data after the last LF ({what})",
                              shown(last, 80), path=path, offset=offsets[-1])
        closed_id = _v1_int(parts[0], INT64, "last entry id", path, offsets[-1])
        if closed_id == V1_IN_RECOVERY_ENTRY_ID:
            state, last_entry_id, has_last = "IN_RECOVERY", INVALID_ENTRY_ID, False
        else:
            state, last_entry_id, has_last = "CLOSED", closed_id, True
    return LedgerMetadata(
        format_version=1, write_quorum=write_quorum, ensemble_size=ensemble_size,
        ack_quorum=write_quorum, length=length, last_entry_id=last_entry_id, state=state,
        ensembles=tuple(ensembles), has_last_entry_id=has_last, has_ack_quorum=False)


def _v1_int(text: str, bounds: tuple[int, int], what: str, path: str | None, offset: int) -> int:
    if _DECIMAL.fullmatch(text) is None or text == "-0":
        raise FormatError(f"decimal {what} (format 1 ledger metadata)", shown(text, 40),
                          path=path, offset=offset)
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise FormatError(f"{what} in [{bounds[0]}, {bounds[1]}]", text, path=path, offset=offset)
    return value


def serialize_v1(md: LedgerMetadata) -> bytes:
    carried = [name for name, value in (("digest_type", md.digest_type), ("password", md.password),
                                        ("ctime", md.ctime), ("ctoken", md.ctoken))
               if value is not None]
    if md.custom_metadata:
        carried.append("custom_metadata")
    if md.has_ack_quorum:
        carried.append("ack_quorum")
    if carried:
        raise unfit("format 1 carries no " + ", ".join(carried), "values for them")
    if md.is_closed:
        if not md.has_last_entry_id or md.last_entry_id == V1_IN_RECOVERY_ENTRY_ID:
            raise unfit("a CLOSED format 1 ledger has a last entry id other than -102",
                         md.last_entry_id)
    elif md.has_last_entry_id or md.last_entry_id != INVALID_ENTRY_ID:
        raise unfit("format 1 stores no last entry id unless CLOSED", md.last_entry_id)
    lines = [str(md.write_quorum), str(md.ensemble_size), str(md.length)]
    for first, members in md.ensembles:
        if not members:
            raise unfit("format 1 ensembles have at least one bookie", first)
        for member in members:
            if member == "" or any(c in member for c in "\t\n\r"):
                raise unfit("format 1 bookie ids non-empty, without TAB, CR or LF", repr(member))
        if members[0] == V1_CLOSED_TAG:
            raise unfit("format 1 first bookie of an ensemble not named CLOSED", members)
        lines.append("\t".join([str(first), *members]))
    text = "".join(line + "\n" for line in lines)
    if md.state == "IN_RECOVERY":
        text += f"{V1_IN_RECOVERY_ENTRY_ID}\t{V1_CLOSED_TAG}"
    elif md.state == "CLOSED":
        text += f"{md.last_entry_id}\t{V1_CLOSED_TAG}"
    return text.encode("utf-8")
