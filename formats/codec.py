"""Running construct declarations with our error type: every failure becomes one FormatError."""
from __future__ import annotations

import ast
import functools
import io
import re
from typing import Any

import construct as cs

from bkdisk.formats.errors import FormatError, shown


def parse_struct(struct: cs.Construct, data: bytes | memoryview, *, what: str, path: str | None = None,
                 offset: int = 0, **context: Any) -> Any:
    """Parse ``data`` with ``struct``; a failure names ``what``, the file and the absolute offset."""
    stream = io.BytesIO(bytes(data))
    try:
        return struct.parse_stream(stream, **context)
    except cs.ConstructError as e:
        at = _field_start(struct, e, context)
        found = _describe(e)
        if at is None and isinstance(e, cs.CheckError):
            checked = _checked_field(struct, data, context)
            if checked is not None:
                at, name, value = checked
                value = shown(value) if isinstance(value, bytes) else repr(value)
                found = f"{name} {value}, a value outside its allowed range"
        raise FormatError(what, found, path=path,
                          offset=offset + (stream.tell() if at is None else at)) from None


def build_struct(struct: cs.Construct, value: Any, *, what: str, **context: Any) -> bytes:
    """Build ``value`` with ``struct``; a value that does not fit raises FormatError."""
    try:
        return struct.build(value, **context)
    except (cs.ConstructError, KeyError, TypeError, ValueError) as e:
        raise FormatError(f"a buildable {what}", _describe(e)) from None


def _field_start(struct: cs.Construct, e: cs.ConstructError, context: dict) -> int | None:
    """Offset of the field that failed, when it lies in the fixed-size prefix of a flat Struct."""
    name = (getattr(e, "path", None) or "").split("->")[-1].strip()
    inner = struct
    while not isinstance(inner, cs.Struct) and hasattr(inner, "subcon"):
        inner = inner.subcon
    if not name or not isinstance(inner, cs.Struct):
        return None
    for field, off, _size in field_layout(inner, **context):
        if field == name:
            return off
    return None


def _checked_field(struct: cs.Construct, data: bytes | memoryview, context: dict) -> tuple[int, str, Any] | None:
    """(offset, name, value) of the field a failed Check of a flat Struct checked: the named field
    parsed last before it (a Check reads no bytes, so the stream stood past that field)."""
    inner = struct
    while not isinstance(inner, cs.Struct) and hasattr(inner, "subcon"):
        inner = inner.subcon
    if not isinstance(inner, cs.Struct):
        return None
    fields = inner.subcons
    last: tuple[int, str, Any] | None = None
    for k, sc in enumerate(fields):
        if isinstance(sc, cs.Check):
            try:
                cs.Struct(*fields[:k + 1]).parse(bytes(data), **context)
            except cs.CheckError:
                return last
            except cs.ConstructError:
                return None
        elif sc.name is not None:
            stream = io.BytesIO(bytes(data))
            try:
                cs.Struct(*fields[:k]).parse_stream(stream, **context)
                value = cs.Struct(*fields[:k + 1]).parse(bytes(data), **context)[sc.name]
            except cs.ConstructError:
                return None
            last = (stream.tell(), sc.name, value)
    return None


_BYTES_LITERAL = re.compile(r"b'(?:[^'\\]|\\.)*'" + r'|b"(?:[^"\\]|\\.)*"')


_CONST_VALUES = re.compile(r"expected (-?\d+) but parsed (-?\d+)")
_SHORT_READ = re.compile(r"stream read less than specified amount, expected (\d+), found (\d+)")


def _describe(e: Exception) -> str:
    """construct's message in our words: no parse-path preamble, no Python byte reprs."""
    if isinstance(e, cs.ConstError):
        found = _BYTES_LITERAL.findall(str(e))
        if len(found) == 2:
            return shown(ast.literal_eval(found[1]))
        values = _CONST_VALUES.search(str(e))
        if values:   # (an integer constant: both values as numbers)
            return f"{values[2]} where the constant {values[1]} belongs"
    short = _SHORT_READ.search(str(e))
    if short:   # construct's words for data that ends inside a field
        name = (getattr(e, "path", None) or "").split("->")[-1].strip()
        field = f"a field of {short[1]} bytes"
        if name and name != "(parsing)":
            field = f"the field {name} ({short[1]} bytes)"
        return f"only {short[2]} bytes left for {field} (the data ends inside it)"
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Error in path")]
    text = " ".join(lines).replace("check failed during parsing", "a value outside its allowed range")
    text = _BYTES_LITERAL.sub(lambda m: shown(ast.literal_eval(m.group())), text)
    return text[:200] or type(e).__name__


def field_layout(struct: cs.Struct, **context: Any) -> list[tuple[str, int, int]]:
    """(name, offset, size) of each named fixed-size field of a flat Struct, for the spec-table tests.

    Fields whose size depends on data (a key of length L) are listed with size -1 and stop
    the offset arithmetic, because a byte table states them relative to that length.
    """
    out: list[tuple[str, int, int]] = []
    pos = 0
    for sc in struct.subcons:
        try:
            size = sc.sizeof(**context)
        except cs.SizeofError:
            size = -1
        if sc.name is not None:
            out.append((sc.name, pos, size))
        if size < 0:
            break
        pos += size
    return out


def field_offsets(struct: cs.Struct) -> dict[str, int]:
    """Offset of each named field of ``struct`` up to and including its first field of variable size."""
    return {name: at for name, at, _size in field_layout(struct)}


@functools.cache
def _field_at(struct: cs.Struct, name: str) -> tuple[int, cs.Construct]:
    at = field_offsets(struct)
    if name not in at:
        raise KeyError(f"no field {name!r} in the declaration")
    return at[name], struct._subcons[name]


def field_offset(struct: cs.Struct, name: str) -> int:
    """Offset of a field (its start fixed by the fields before it), derived from the declaration."""
    return _field_at(struct, name)[0]


def read_field(struct: cs.Struct, name: str, data: bytes | memoryview, base: int = 0, *,
               path: str | None = None) -> Any:
    """One field of ``struct`` laid out at ``base`` in ``data``, decoded by its own declaration.

    Lets a reader take a single field (a size, an entry id) without parsing the whole record, and
    without re-typing the field's offset or width.
    """
    off, sc = _field_at(struct, name)
    n = sc.sizeof()
    chunk = bytes(data[base + off:base + off + n])
    if len(chunk) < n:
        raise FormatError(f"the {n}-byte field {name}", f"{len(chunk)} bytes", path=path, offset=base + off)
    return sc.parse(chunk)


def build_field(struct: cs.Struct, name: str, value: Any) -> bytes:
    """The bytes of one fixed-size field of ``struct`` holding ``value`` (to patch a field in place)."""
    return _field_at(struct, name)[1].build(value)


def read_value(decl: cs.Construct, data: bytes | memoryview, offset: int = 0, *, path: str | None = None) -> Any:
    """A fixed-size declaration (a size prefix, a location slot) read at ``offset``."""
    n = decl.sizeof()
    chunk = bytes(data[offset:offset + n])
    if len(chunk) < n:
        raise FormatError(f"a {n}-byte value", f"{len(chunk)} bytes", path=path, offset=offset)
    return decl.parse(chunk)
