"""BookKeeper's metadata protobufs (generated bindings) plus a TextFormat printer/reader matching protobuf-java."""
from __future__ import annotations

import re
import warnings
from typing import cast

from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from bkdisk.formats.errors import FormatError
from bkdisk.formats.proto.bookkeeper_formats_pb2 import CookieFormat, LedgerMetadataFormat

__all__ = ["CookieFormat", "LedgerMetadataFormat", "java_text_format", "java_escape_bytes", "parse_text_format"]

# protobuf-java TextFormat.escapeBytes: these bytes get a one-letter escape; every other byte outside
# printable ASCII (0x20..0x7e) becomes a three-digit octal escape. Python's own printer differs on
# 0x07, 0x08, 0x0b and 0x0c (it writes octal) and on non-ASCII text (it can print it raw).
_NAMED_ESCAPES = {
    0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v",
    0x5C: "\\\\", 0x27: "\\'", 0x22: '\\"',
}
_ESCAPE_TABLE = tuple(
    _NAMED_ESCAPES.get(b, chr(b) if 0x20 <= b <= 0x7E else f"\\{b:03o}") for b in range(256)
)


def java_escape_bytes(data: bytes) -> str:
    """Escape ``data`` the way protobuf-java's TextFormat does inside a double-quoted literal."""
    return "".join(_ESCAPE_TABLE[b] for b in data)


def _scalar_text(field: FieldDescriptor, value: object) -> str:
    t = field.type
    if t == FieldDescriptor.TYPE_STRING:
        return '"' + java_escape_bytes(str(value).encode("utf-8")) + '"'
    if t == FieldDescriptor.TYPE_BYTES:
        return '"' + java_escape_bytes(cast(bytes, value)) + '"'   # a bytes field's value is bytes
    if t == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[int(cast(int, value))].name   # an enum field's value is its number
    if t == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
             FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
             FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32,
             FieldDescriptor.TYPE_SFIXED64):
        return str(int(cast(int, value)))   # an integer field's value is an int
    raise TypeError(f"field type {t} is not used by the BookKeeper messages")


def _print(msg: Message, indent: str, out: list[str]) -> None:
    for field in sorted(msg.DESCRIPTOR.fields, key=lambda f: f.number):
        if field.is_repeated:
            values = list(getattr(msg, field.name))
        elif msg.HasField(field.name):
            values = [getattr(msg, field.name)]
        else:
            continue
        for value in values:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                out.append(f"{indent}{field.name} {{\n")
                _print(value, indent + "  ", out)
                out.append(f"{indent}}}\n")
            else:
                out.append(f"{indent}{field.name}: {_scalar_text(field, value)}\n")


def java_text_format(msg: Message) -> str:
    """``TextFormat.printToString(msg)`` of protobuf-java: fields by number, set fields only,

    ``name: value`` lines, nested messages as ``name {`` ... ``}`` indented by two spaces,
    strings and bytes quoted with Java's escapes (non-ASCII text as octal UTF-8 bytes).
    """
    out: list[str] = []
    _print(msg, "", out)
    return "".join(out)


def parse_text_format(body: bytes, message: Message, *, what: str, path: str | None = None,
                      offset: int = 0) -> Message:
    """Parse UTF-8 TextFormat ``body`` into ``message``; every failure becomes a FormatError.

    ``offset`` is the file offset of ``body`` (errors are anchored there, at the failing line).
    Required fields are checked, since protobuf's Python text parser does not.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"UTF-8 {what}", f"byte 0x{body[exc.start]:02x} that is not UTF-8",
                          path=path, offset=offset + exc.start) from None
    try:
        with warnings.catch_warnings():
            # protobuf only warns on an invalid escape such as "\e"; protobuf-java rejects it.
            warnings.simplefilter("error")
            text_format.Parse(text, message)
    except text_format.ParseError as exc:
        line = exc.GetLine() if exc.GetLine() is not None else 1
        lines = text.split("\n")
        line_start = sum(len(x.encode("utf-8")) + 1 for x in lines[: max(0, min(line, len(lines)) - 1)])
        raise FormatError(what, _short(str(exc)), path=path, offset=offset + line_start) from None
    except Exception as exc:  # the parser's own bugs on odd input must not escape as other types
        raise FormatError(what, _short(f"{type(exc).__name__}: {exc}"), path=path, offset=offset) from None
    missing = message.FindInitializationErrors()
    if missing:
        raise FormatError(f"{what} with its required fields", "missing " + ", ".join(missing),
                          path=path, offset=offset)
    return message


_PY_HEX_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def _short(text: str) -> str:
    """protobuf's parse message in one line and in our words: control characters and the Python
    escapes protobuf quotes them with become 0xNN."""
    text = "".join(ch if ch.isprintable() or ch.isspace() else f"0x{ord(ch):02x}" for ch in text)
    text = _PY_HEX_ESCAPE.sub(lambda m: "0x" + m.group(1).lower(), text)
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."
