"""The streamed full read of a fixed-size-key database (rocksdbfiles/stream.py) against the reference merge
(``Database.items``): any mix of levels, overlapping level-0 tables, WAL writes, deletions and range
tombstones of any bound length, cut into chunks anywhere; and `bkdisk dump locations`' kernel text
against its line-by-line twin."""
from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import location_value, locations_key
from bkdisk.rocksdbfiles import stream
from bkdisk.rocksdbfiles import writer as w
from bkdisk.rocksdbfiles.db import open_db
from bkdisk.rocksdbfiles.sst import Record

V = rf.ValueType
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
KEY = st.tuples(st.integers(0, 6), st.integers(0, 40))
BOUND = st.tuples(KEY, st.sampled_from([-1, 0, 1])).map(     # 15, 16 or 17 bytes: cut, exact, longer
    lambda kd: locations_key(*kd[0])[:15] if kd[1] < 0 else locations_key(*kd[0]) + b"\x00" * kd[1])


@st.composite
def databases(draw):
    """(tables [(level, records)], range deletions by table, WAL batches): sequences unique and increasing."""
    seq = iter(range(1, 10 ** 6))
    tables, tombs = [], {}
    n_tables = draw(st.integers(1, 5))
    l1_keys = sorted(set(draw(st.lists(KEY, min_size=n_tables, max_size=150))))
    l1_cut = sorted(draw(st.sets(st.integers(1, max(1, len(l1_keys) - 1)), max_size=2)))
    for a, b in zip([0] + l1_cut, l1_cut + [len(l1_keys)]):     # level 1: tables that do not overlap
        if a < b:
            tables.append((1, [Record(locations_key(*k), next(seq), V.VALUE, location_value(k[0], k[1] * 8))
                               for k in l1_keys[a:b]]))
    for _ in range(draw(st.integers(0, 3))):
        keys = sorted(set(draw(st.lists(KEY, min_size=1, max_size=60))))
        recs = [Record(locations_key(*k), next(seq), draw(st.sampled_from([V.VALUE, V.VALUE, V.DELETION])),
                       b"") for k in keys]
        recs = [Record(r.user_key, r.sequence, r.vtype, location_value(9, r.sequence) if r.vtype == V.VALUE
                       and draw(st.integers(0, 20)) else b"" if r.vtype != V.VALUE else b"short")
                for r in recs]
        tables.insert(0, (0, recs))
    for i in range(len(tables)):
        if draw(st.booleans()):
            b, e = sorted([draw(BOUND), draw(BOUND)])
            tombs[i] = [(b, e, next(seq))]
    tables.reverse()      # the writer numbers tables in order; the MANIFEST orders levels itself
    tombs = {len(tables) - 1 - i: t for i, t in tombs.items()}
    wal = []
    for _ in range(draw(st.integers(0, 3))):
        ops = []
        for _ in range(draw(st.integers(1, 6))):
            kind = draw(st.sampled_from([V.VALUE, V.DELETION, V.RANGE_DELETION]))
            if kind == V.RANGE_DELETION:
                b, e = sorted([draw(BOUND), draw(BOUND)])
                ops.append((kind, b, e))
            else:
                k = locations_key(*draw(KEY))
                ops.append((kind, k, location_value(7, 1) if kind == V.VALUE else b""))
        first = next(seq)
        for _ in ops[1:]:
            next(seq)
        wal.append(w.write_batch(first, ops))
    return tables, tombs, wal


def _fixed(db, monkeypatch) -> tuple[list[tuple[bytes, bytes]], list]:
    monkeypatch.setattr(stream, "CHUNK_ROWS", 5)
    got = []
    for keys, values in db.fixed_chunks(16, 8):
        got += [(bytes(k), bytes(v)) for k, v in zip(keys, values)]
    return got, [p for p in db.problems if p.kind == "bad-value-size"]


@SETTINGS
@given(databases())
def test_the_stream_equals_the_reference_merge(tmp_path_factory, monkeypatch, made):
    tables, tombs, wal = made
    d = tmp_path_factory.mktemp("db")
    w.write_db(d, tables, w.TableOptions(block_size=256), wal=wal, range_deletions=tombs)
    with ExitStack() as st_:
        want = list(open_db(d, st_).items())
        db = open_db(d, st_)
        got, bad = _fixed(db, monkeypatch)
    assert got == [(k, v) for k, v in want if len(v) == 8]
    assert sorted(p.detail.split(":")[0] for p in bad) == sorted(f"key {k.hex()}" for k, v in want if len(v) != 8)


def test_a_ledger_deleted_by_range_is_gone_and_a_later_write_is_back(tmp_path, monkeypatch):
    # BookKeeper >= 4.16 deletes a ledger's locations with deleteRange((L, 0), (L + 1, 0)).
    old = [Record(locations_key(lid, e), 1 + lid * 10 + e, V.VALUE, location_value(1, 100 * lid + e))
           for lid in range(3) for e in range(10)]
    wal = [w.write_batch(100, [(V.RANGE_DELETION, locations_key(1, 0), locations_key(2, 0))]),
           w.write_batch(101, [(V.VALUE, locations_key(1, 4), location_value(2, 4))])]
    w.write_db(tmp_path / "db", [(1, old)], wal=wal)
    with ExitStack() as st_:
        got, bad = _fixed(open_db(tmp_path / "db", st_), monkeypatch)
    assert [k for k, _v in got] == ([locations_key(0, e) for e in range(10)] + [locations_key(1, 4)]
                                    + [locations_key(2, e) for e in range(10)]) and bad == []


def test_ceil_key_is_the_smallest_fixed_key_at_or_above_a_bound():
    assert rf.ceil_key(b"\x01", 3) == b"\x01\x00\x00"
    assert rf.ceil_key(b"\x01\x02\x03", 3) == b"\x01\x02\x03"
    assert rf.ceil_key(b"\x01\x02\x03\x00", 3) == b"\x01\x02\x04"
    assert rf.ceil_key(b"\x01\xff\xff\x00", 3) == b"\x02\x00\x00"
    assert rf.ceil_key(b"\xff\xff\xff\x00", 3) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-2 ** 63, 2 ** 63 - 1), st.integers(-2 ** 63, 2 ** 63 - 1),
                          st.integers(-2 ** 31, 2 ** 31), st.integers(0, 2 ** 32 - 1)), max_size=40),
       st.integers(0, 40), st.booleans())
def test_the_listing_kernel_writes_what_the_shell_prints(rows, cut, headers):
    from bkdisk.dump import shell_format as sf
    from bkdisk.dump.locations_text import Listing, line
    rows.sort()
    want, last = [], None
    for lid, eid, log, pos in rows:
        if headers and lid != last:
            want.append(sf.ledger_index_header_line(sf.ledger_text(lid)))
            last = lid
        want.append(line(eid, log, pos))
    cols = {k: np.array([r[i] for r in rows], np.int64) for i, k in enumerate(("ledger", "entry", "log", "offset"))}
    listing = Listing(headers)
    got = b"".join(bytes(listing.encode({k: v[a:b] for k, v in cols.items()})) for a, b in ((0, cut), (cut, len(rows))))
    assert got.decode() == "".join(want)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=60) | st.builds(lambda a, b: a + b, st.sampled_from([
    bytes.fromhex("080110001a0400010203"), bytes.fromhex("080110011a00220401020304"),
    bytes.fromhex("10011a0008002801")]),
    st.binary(max_size=12)))
@example(bytes.fromhex("080110001a02aabb1a01cc"))   # masterKey twice: protobuf keeps the last
@example(bytes.fromhex("080110001a02aabb30001a01cc"))   # ... with an unknown field between: the library's
def test_a_value_the_ledger_data_kernel_takes_is_one_protobuf_parses(value):
    from bkdisk.formats.dbledger import parse_ledger
    from bkdisk.formats.errors import FormatError
    from bkdisk.rocksdbfiles.kernels import plain_ledger_data
    row = np.zeros((1, 64), np.uint8)
    row[0, :len(value)] = np.frombuffer(value, np.uint8)
    ok = np.zeros(1, bool)
    at, n = np.zeros(1, np.int64), np.zeros(1, np.int64)
    plain_ledger_data(row, np.array([len(value)], np.int64), ok, at, n)
    if ok[0]:
        info = parse_ledger(b"\0" * 8, value)      # raises if the kernel took what protobuf refuses
        assert value[at[0]:at[0] + n[0]] == info.master_key   # (the last masterKey, as protobuf reads it)
    else:
        assert (at[0], n[0]) == (-1, 0)           # (no key place for a value the protobuf library reads)
        try:
            parse_ledger(b"\0" * 8, value)
        except FormatError:
            pass


def test_the_ledgers_table_equals_the_reference_reader(tmp_path):
    from conftest import GOLDEN

    from bkdisk.formats.dbledger import LEDGERS_KEY, LedgerInfo, ledger_value
    from bkdisk.rocksdbfiles.dbindex import read_ledger_table, read_ledgers
    good = [ledger_value(LedgerInfo(i, True, i % 2 == 0, bytes([i]) * 20, bytes(36) if i % 3 == 0 else None,
                                    (i % 4 == 0) if i % 5 else None)) for i in range(60)]
    odd = {7: good[7] + bytes.fromhex("3001"),                      # an unknown field: protobuf keeps it
           8: bytes.fromhex("0801"),                                # required fields missing
           9: b"\xff\xff",                                          # undecodable
           10: good[10] + bytes.fromhex("229601") + bytes(150),                # a 150-byte explicit LAC body
           11: b"\x08\x01\x10\x00\x1a\x14" + bytes(20) + b"\x22\xc8\x01" + bytes(200)}
    recs = [Record(LEDGERS_KEY.build(i), 1 + i, V.VALUE, odd.get(i, good[i])) for i in range(60)]
    wal = [w.write_batch(100, [(V.VALUE, LEDGERS_KEY.build(3), good[4]), (V.DELETION, LEDGERS_KEY.build(5), b"")])]
    w.write_db(tmp_path / "ledgers", [(1, recs)], w.TableOptions(compression=rf.Compression.SNAPPY, block_size=512),
               wal=wal)
    dbs = [tmp_path / "ledgers"] + sorted(GOLDEN.glob("**/current/ledgers"))
    for db in dbs:
        with ExitStack() as st_:
            want, p1 = read_ledgers(db, st_)
            table, p2 = read_ledger_table(db, st_)
        assert dict(table.items()) == want and p2 == p1 and len(table) == len(want)
        if db == dbs[0]:
            assert [p.detail.split(":")[0] for p in p2] == [f"key {LEDGERS_KEY.build(i).hex()}" for i in (8, 9)]
            assert len(want) == 60 - 1 - 2 and want[3].master_key == bytes([4]) * 20
        else:
            assert p2 == []


def test_overlapping_tables_on_one_level_still_merge_in_key_order(tmp_path, monkeypatch):
    # A level's tables never overlap in a sound database; where damage makes them, each is its own source.
    a = [Record(locations_key(1, e), 1 + e, V.VALUE, location_value(0, e)) for e in range(0, 60, 2)]
    b = [Record(locations_key(1, e), 100 + e, V.VALUE, location_value(1, e)) for e in range(1, 60, 2)]
    w.write_db(tmp_path / "db", [(1, a), (1, b)], w.TableOptions(block_size=256))
    with ExitStack() as st_:
        want = list(open_db(tmp_path / "db", st_).items())
        got, bad = _fixed(open_db(tmp_path / "db", st_), monkeypatch)
    assert got == want and len(got) == 60 and bad == []
