"""Payload hashes kept as arrays give, as text, exactly hashlib's hex digests (null where no payload)."""
from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie.arrow_columns import hex_column
from bkdisk.digests.payload_hashes import PayloadHashes, hex_ascii, sha256_payloads

PAYLOADS = st.lists(st.one_of(st.none(), st.binary(max_size=300)), max_size=60)


def _laid_out(payloads):
    """The payloads one after another behind a few junk bytes each; None: an entry whose payload is unknown."""
    buf, start, length = bytearray(), [], []
    for p in payloads:
        buf += b"\xa5" * 3
        start.append(len(buf))
        length.append(-1 if p is None else len(p))
        buf += p or b"junk"
    return np.frombuffer(bytes(buf) or b"\0", np.uint8), np.array(start, np.int64), np.array(length, np.int64)


@settings(max_examples=80, deadline=None)
@given(PAYLOADS)
def test_hashes_are_hashlibs(payloads):
    hashes = sha256_payloads(*_laid_out(payloads))
    want = [None if p is None else hashlib.sha256(p).hexdigest() for p in payloads]
    assert list(hashes) == want
    assert hashes.present.tolist() == [p is not None for p in payloads]


@settings(max_examples=80, deadline=None)
@given(PAYLOADS, st.data())
def test_hex_column_is_hashlibs_hexdigest(payloads, data):
    hashes = sha256_payloads(*_laid_out(payloads))
    want = [None if p is None else hashlib.sha256(p).hexdigest() for p in payloads]
    rows = np.where(hashes.present, np.arange(len(hashes)), -1)
    col = hex_column(hashes.raw, rows)
    assert col.type == pa.string() and col.to_pylist() == want
    col.validate(full=True)
    # a subset of the rows (one ledger's) indexes into the whole log's hashes
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(payloads), max_size=len(payloads))), bool)
    sub = hex_column(hashes.raw, rows[keep])
    assert sub.to_pylist() == [w for w, k in zip(want, keep.tolist()) if k]


@given(st.lists(st.binary(min_size=32, max_size=32), max_size=20))
def test_hex_ascii_is_bytes_hex(digests):
    raw = np.frombuffer(b"".join(digests), np.uint8).reshape(len(digests), 32)
    assert [r.tobytes().decode() for r in hex_ascii(raw)] == [d.hex() for d in digests]


def test_concat_and_put_keep_rows_in_order():
    a = sha256_payloads(*_laid_out([b"a", None]))
    b = sha256_payloads(*_laid_out([b"b"]))
    both = PayloadHashes.concat([a, b])
    assert list(both) == [hashlib.sha256(b"a").hexdigest(), None, hashlib.sha256(b"b").hexdigest()]
    both.put(np.array([1]), sha256_payloads(*_laid_out([b"c"])))
    assert list(both)[1] == hashlib.sha256(b"c").hexdigest()
    assert both != a and PayloadHashes.concat([]) == PayloadHashes.empty()
