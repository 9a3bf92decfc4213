"""``dump --entry-format hex`` lays its lines out together (bkdisk/dump/shell_format.py); its text is that
of the plain per-line formatter below, commons-io HexDump's (the golden shell outputs hold that text,
tests/test_dump_matches_bookkeeper_shell.py), whatever the bytes, their number, the start offset
(wrapping at 2^32) and the parts a long payload is printed in."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.dump.command import MSG_PART
from bkdisk.dump.shell_format import hexdump, payload_parts


def reference_hexdump(data: bytes, offset: int = 0) -> str:
    """commons-io ``HexDump.dump(data, offset, out, 0)``, a line at a time."""
    b = bytes(data)
    if not b:
        return "Warn: Index is outside the data array's bounds : illegal index: 0 into array of length 0\n"
    lines = []
    for j in range(0, len(b), 16):
        chunk = b[j:j + 16]
        hexpart = "".join(f"{c:02X} " for c in chunk) + "   " * (16 - len(chunk))
        text = "".join(chr(c) if 0x20 <= c < 0x7F else "." for c in chunk)
        lines.append(f"{(offset + j) & 0xFFFFFFFF:08X} {hexpart}{text}\n")
    return "".join(lines)


def _random_bytes(seed: int, n: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


LENGTHS = st.sampled_from([0, 1, 15, 16, 17, 31, 32, 33, 255, 256, 257]) | st.integers(0, 70_000)
OFFSETS = st.sampled_from([0, 1, 15, 16, (1 << 32) - 16, (1 << 32) - 1, 1 << 32, (1 << 33) + 7]) | \
    st.integers(0, 1 << 40)
DATA = st.binary(max_size=80) | st.builds(_random_bytes, st.integers(0, 2**32 - 1), LENGTHS)


@settings(max_examples=300, deadline=None)
@given(data=DATA, offset=OFFSETS)
def test_hexdump_is_the_per_line_text(data, offset):
    assert hexdump(data, offset) == reference_hexdump(data, offset)


def test_every_byte_value_has_its_hex_and_character():
    every = bytes(range(256)) + bytes(range(255, -1, -1)) + b"\x1f\x20\x7e\x7f\x80"
    for cut in (len(every), len(every) - 1, 17, 1):
        assert hexdump(every[:cut], 3) == reference_hexdump(every[:cut], 3)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), total=LENGTHS, cuts=st.lists(st.integers(0, 70_000), max_size=6))
def test_a_payload_printed_in_parts_is_the_per_line_text_of_the_whole(seed, total, cuts):
    whole = _random_bytes(seed, total)
    at = sorted({min(c, total) for c in cuts} | {0, total})
    chunks = [whole[a:b] for a, b in zip(at, at[1:])] or [b""]
    assert "".join(payload_parts(chunks, "hex")) == reference_hexdump(whole)


def test_a_payload_longer_than_a_part_is_cut_where_the_dump_cuts_it():
    """As the dump reads a long entry: its head past the 32-byte entry header, then MSG_PART at a time; the
    parts' offsets run on across MSG_PART boundaries that fall inside a line."""
    whole = _random_bytes(7, 2 * MSG_PART + 17)
    head = MSG_PART - 32 - 5
    chunks = [whole[:head], whole[head:head + MSG_PART], whole[head + MSG_PART:]]
    parts = list(payload_parts(chunks, "hex"))
    assert len(parts) == 4 and "".join(parts) == reference_hexdump(whole)   # (the last, its 1-byte line)
