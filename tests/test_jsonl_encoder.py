"""The jitted JSON Lines encoder writes exactly what json.dumps writes, row for row."""
from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.diskio.jsonl import CHOICE, DIGEST, INT, INT_OR_NULL, UINT, RowTemplate, Slot, encode_rows_reference

I64 = st.integers(-(1 << 63), (1 << 63) - 1)
U64 = st.integers(0, (1 << 64) - 1)
CHOICES = (None, "CRC32", True, False, "métadata \"quoted\"")
SLOTS = (Slot("a", INT), Slot("u", UINT), Slot("n", INT_OR_NULL), Slot("c", CHOICE, CHOICES), Slot("h", DIGEST))
ORDER = ("bookie", "a", "u", "k", "n", "c", "h")
CONSTS = {"bookie": "bookie-1.rack-a", "k": 7}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(I64, U64, I64, st.integers(0, len(CHOICES) - 1), st.one_of(st.none(), st.binary(
    min_size=32, max_size=32))), max_size=40))
def test_encoder_equals_json_dumps_per_row(rows):
    cols = {"a": np.array([r[0] for r in rows], np.int64), "u": np.array([r[1] for r in rows], np.uint64),
            "n": np.array([r[2] for r in rows], np.int64), "c": np.array([r[3] for r in rows], np.uint8)}
    hashes = [r[4] for r in rows]
    present = [h for h in hashes if h is not None]
    digests = np.frombuffer(b"".join(present), np.uint8).reshape(len(present), 32)
    digest_row = np.full(len(rows), -1, np.int64)
    digest_row[[i for i, h in enumerate(hashes) if h is not None]] = np.arange(len(present))
    got = RowTemplate(CONSTS, SLOTS, ORDER).encode(cols, digests, digest_row)
    expected = encode_rows_reference([
        {"bookie": CONSTS["bookie"], "a": a, "u": u, "k": 7, "n": n if n >= 0 else None, "c": CHOICES[c],
         "h": None if h is None else h.hex()} for a, u, n, c, h in rows])
    assert got == expected
    assert [json.loads(line) for line in got.splitlines()] == [json.loads(line) for line in expected.splitlines()]


def test_a_code_outside_the_choices_is_refused_not_written():
    t = RowTemplate({}, (Slot("c", CHOICE, (None, True)),), ("c",))
    try:
        t.encode({"c": np.array([0, 2], np.uint8)})
    except ValueError as e:
        assert "outside its 2 choices" in str(e)
    else:
        raise AssertionError("an out-of-range code must be refused")
