"""A value a declaration's Check refuses is named with its field, its value and the field's own offset
(not the offset past it, where the parse stood when the Check ran)."""
from __future__ import annotations

import struct

import construct as cs
import pytest
from conftest import GOLDEN

from bkdisk.formats.codec import parse_struct
from bkdisk.formats.errors import FormatError
from bkdisk.formats.index import KEY_OFFSET, parse_header

IDX = GOLDEN / "interleaved-v6-hostport" / "ledgers1" / "current" / "12" / "34" / "1234.idx"


def test_a_refused_field_is_named_at_its_own_offset():
    flat = cs.Struct("a" / cs.Int32ub, "b" / cs.Int32ub, cs.Check(cs.this.b < 5), "c" / cs.Int16ub)
    with pytest.raises(FormatError) as e:
        parse_struct(flat, struct.pack(">IIH", 1, 9, 0), what="a test record", path="t.bin", offset=100)
    assert e.value.offset == 104 and "found b 9, a value outside its allowed range" in str(e.value), e.value


def _planted(at: int, value: int) -> bytes:
    data = bytearray(IDX.read_bytes())
    data[at:at + 4] = struct.pack(">i", value)
    return bytes(data)


def _key_length() -> int:
    return struct.unpack(">i", IDX.read_bytes()[8:12])[0]


@pytest.mark.parametrize(("at", "value", "field"), [
    (4, 2, "version"),
    (8, 0x7FFFFFFF, "master_key_length"),
    (None, 0x7FFFFFFF, "explicit_lac_length"),     # after the key and the state
])
def test_an_index_header_names_the_refused_field_where_it_lies(at, value, field):
    at = KEY_OFFSET + _key_length() + 4 if at is None else at
    with pytest.raises(FormatError) as e:
        parse_header(_planted(at, value), path="1234.idx")
    assert e.value.offset == at and f"found {field} {value}," in str(e.value), e.value


def test_data_ending_inside_a_field_is_said_in_our_words():
    from bkdisk.formats import journal as fj
    body = fj.LEDGER_KEY_BODY.build(dict(ledger_id=7, key_length=4, master_key=b"abcd"))
    with pytest.raises(FormatError) as e:
        fj.classify_body(body[:-1], offset=512, path="j.txn")
    text = str(e.value)
    assert "only 3 bytes left for the field master_key (4 bytes)" in text and "stream" not in text, text


def test_an_integer_constant_that_differs_is_named_with_both_values_in_our_words():
    flat = cs.Struct("marker" / cs.Const(-1, cs.Int64sb), "n" / cs.Int32ub)
    with pytest.raises(FormatError) as e:
        parse_struct(flat, struct.pack(">qI", 7, 0), what="a test batch", path="t.bin", offset=10)
    assert str(e.value) == "t.bin: offset 10: expected a test batch, found 7 where the constant -1 belongs"
