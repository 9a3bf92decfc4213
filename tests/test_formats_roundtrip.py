"""Every construct declaration round-trips (build -> parse is the identity), and parsing arbitrary
or truncated bytes raises only FormatError, quickly."""
from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.formats import entrylog as fe
from bkdisk.formats import index as fi
from bkdisk.formats import journal as fj
from bkdisk.formats.digests import DIGEST_LENGTH, DigestType
from bkdisk.formats.entry import build_entry, package_entry, parse_entry, parse_entry_ids
from bkdisk.formats.errors import FormatError
from bkdisk.formats.lastmark import LastMark, build_last_mark, parse_last_mark

U64 = st.integers(0, (1 << 64) - 1)
U63 = st.integers(0, (1 << 63) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
DT = st.sampled_from(list(DigestType))
FAST = settings(max_examples=150, deadline=None)


@FAST
@given(scope=U64, ledger=U64, entry=U63, lac=I64, length=I64, payload=st.binary(max_size=300), dt=DT,
       pw=st.binary(max_size=20))
def test_v2_entry_build_then_parse_is_identity_for_any_64_bit_scope_and_ledger(scope, ledger, entry, lac, length,
                                                                               payload, dt, pw):
    e = package_entry(ledger_id=ledger, entry_id=entry, last_add_confirmed=lac, length=length, payload=payload,
                      digest_type=dt, password=pw, scope_id=scope, format_version=2)
    b = build_entry(e)
    assert b == e.to_bytes()
    back = parse_entry(b)
    assert back == e
    assert back.digest_ok(password=pw)
    assert parse_entry_ids(b) == (2, scope, ledger, entry)


@FAST
@given(ledger=U63, entry=U63, lac=I64, length=I64, payload=st.binary(max_size=300), dt=DT, pw=st.binary(max_size=20))
def test_v1_entry_build_then_parse_is_identity(ledger, entry, lac, length, payload, dt, pw):
    e = package_entry(ledger_id=ledger, entry_id=entry, last_add_confirmed=lac, length=length, payload=payload,
                      digest_type=dt, password=pw)
    back = parse_entry(build_entry(e), digest_type=dt)
    assert back == e and back.digest_ok(dt, pw)


@FAST
@given(payload=st.binary(min_size=1, max_size=200), pos=st.integers(0, 10_000), dt=st.sampled_from(
    [DigestType.CRC32, DigestType.CRC32C, DigestType.HMAC]))
def test_any_flipped_byte_of_a_v2_entry_fails_its_digest_or_its_parse(payload, pos, dt):
    e = package_entry(ledger_id=5, entry_id=1, last_add_confirmed=0, length=9, payload=payload, digest_type=dt,
                      password=b"k", scope_id=77, format_version=2)
    b = bytearray(build_entry(e))
    i = pos % len(b)
    b[i] ^= 0x01
    try:
        back = parse_entry(bytes(b))
    except FormatError:
        return
    assert not back.digest_ok(password=b"k")


def test_v1_entry_with_a_ledger_id_of_2_pow_63_or_more_is_refused():
    import pytest
    with pytest.raises(FormatError):
        package_entry(ledger_id=1 << 63, entry_id=0, last_add_confirmed=-1, length=0, payload=b"",
                      digest_type=DigestType.CRC32)


@FAST
@given(scope=U64, ledger=U63, key=st.binary(max_size=64), lac=I64, digest=st.binary(max_size=20))
def test_journal_meta_records_round_trip_scoped_or_not(scope, ledger, key, lac, digest):
    lac_body = fj.LAC_BODY.build(dict(ledger_id=ledger, lac=lac, digest=digest))
    for body, kind in ((fj.build_ledger_key_body(ledger, key, scope), fj.RecordKind.LEDGER_KEY),
                       (fj.build_fence_body(ledger, scope), fj.RecordKind.FENCE),
                       (fj.build_explicit_lac_body(ledger, lac_body, scope), fj.RecordKind.EXPLICIT_LAC)):
        r = fj.classify_body(body, offset=100)
        assert (r.kind, r.scope_id, r.ledger_id, r.scoped) == (kind, scope, ledger, scope != 0)
        if kind == fj.RecordKind.LEDGER_KEY:
            assert r.master_key == key
        if kind == fj.RecordKind.EXPLICIT_LAC:
            assert (r.explicit_lac, r.lac_body) == (lac, lac_body)


@FAST
@given(version=st.sampled_from([4, 5, 6]), pos=st.integers(0, 1 << 20), align=st.sampled_from([512, 4096]))
def test_journal_header_round_trips_and_padding_always_aligns(version, pos, align):
    h = fj.build_header(version)
    assert fj.parse_header(h + bytes(16)) == version and len(h) == fj.header_size(version)
    n = fj.padding_payload_length(pos, align)
    if n is None:
        assert pos % align == 0
    else:
        assert n >= 0 and (pos + 8 + n) % align == 0


@FAST
@given(version=st.sampled_from([0, 1]), off=st.integers(0, (1 << 63) - 1), count=st.integers(0, (1 << 31) - 1))
def test_entry_log_header_round_trips(version, off, count):
    h = fe.build_header(version, off, count)
    assert len(h) == fe.HEADER_SIZE
    assert fe.parse_header(h) == fe.EntryLogHeader(version, off, count)


@FAST
@given(st.dictionaries(st.tuples(st.integers(0, 3).map(lambda s: s * 0x1234567), U63), st.integers(1, 1 << 40),
                       max_size=40))
def test_ledgers_map_round_trips_with_scoped_batches(sizes):
    b = fe.build_ledgers_map(sizes)
    assert fe.parse_ledgers_map(b, 0) == sizes


@FAST
@given(version=st.sampled_from([0, 1]), key=st.binary(max_size=64), bits=st.integers(0, (1 << 32) - 1),
       lac=st.one_of(st.none(), st.binary(min_size=16, max_size=64)))
def test_index_header_round_trips(version, key, bits, lac):
    h = fi.IndexHeader(version, key, bits, lac if version == 1 else None)
    b = fi.build_header(h)
    assert len(b) == fi.HEADER_SIZE and fi.parse_header(b) == h


@FAST
@given(log_id=I64, off=I64)
def test_last_mark_round_trips(log_id, off):
    assert parse_last_mark(build_last_mark(LastMark(log_id, off))) == LastMark(log_id, off)


PARSERS = [
    lambda b: parse_entry(b, digest_type=DigestType.CRC32C),
    lambda b: parse_entry(b, digest_type=DigestType.HMAC),
    parse_entry_ids,
    lambda b: fj.classify_body(b, offset=0),
    fj.parse_header,
    fe.parse_header,
    lambda b: fe.parse_ledgers_map(b, 0),
    fi.parse_header,
    parse_last_mark,
]


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=2048), which=st.integers(0, len(PARSERS) - 1))
def test_arbitrary_bytes_raise_only_format_error_quickly(data, which):
    t0 = time.perf_counter()
    try:
        PARSERS[which](data)
    except FormatError as e:
        assert str(e).count("\n") == 0 and "offset" in str(e)
    assert time.perf_counter() - t0 < 2.0   # bounded: a hang would blow far past this


@settings(max_examples=200, deadline=None)
@given(count=st.integers(1 << 20, (1 << 31) - 1))
def test_huge_length_fields_are_errors_not_allocations(count):
    import pytest
    batch = (20 + 16 * 2).to_bytes(4, "big") + b"\xff" * 8 + (-2).to_bytes(8, "big", signed=True) + \
        count.to_bytes(4, "big") + bytes(32)
    with pytest.raises(FormatError):
        fe.parse_ledgers_map(batch, 0)
    key = fi.INDEX_MAGIC + (1).to_bytes(4, "big") + count.to_bytes(4, "big") + bytes(1012)
    with pytest.raises(FormatError):
        fi.parse_header(key)
    body = (3).to_bytes(8, "big") + (-0x1000).to_bytes(8, "big", signed=True) + count.to_bytes(4, "big")
    with pytest.raises(FormatError):
        fj.classify_body(body, offset=0)


def test_digest_lengths_match_the_table():
    assert {dt.name: DIGEST_LENGTH[dt] for dt in DigestType} == {"CRC32": 8, "HMAC": 20, "CRC32C": 4, "DUMMY": 0}
