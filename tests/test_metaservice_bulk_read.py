"""The bulk read (ReadLedgers): every ledger of a 128-bit id range or of a scope, with metadata and
version, in pages, ascending, over both stores; and the commands built on it (export, load_all)."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from metaservice_fixture import served

from bench.metaservice_bench import _payload
from bkdisk.formats.ids import U64, LedgerId
from bkdisk.formats.metadata import parse_metadata
from bkdisk.metaservice.channel import MetadataError
from bkdisk.metaservice.sqlite_store import SqliteStore
from bkdisk.metaservice.store_url import open_store

_roots = itertools.count(1)
# Ids at the edges of each encoding: scope-0 short and long trees, the top of a scope, scope 2^64-1.
KEYS = [(0, 0), (0, 1), (0, 9999), (0, 2**31 - 2), (0, 2**31 - 1), (0, 2**32), (0, 2**63 - 1),
        (1, 0), (1, 5), (7, U64), (U64, 0), (U64, U64)]


@pytest.fixture(params=["sqlite", "zk"])
def filled(request, tmp_path, zookeeper):
    store = (SqliteStore(tmp_path / "m.db") if request.param == "sqlite"
             else open_store(f"zk://{zookeeper.hosts}/b{next(_roots)}/ledgers"))
    for i, (s, lid) in enumerate(KEYS):
        store.create(s, lid, _payload(i))
    store.write(0, 1, _payload(100), 0)
    with served(store) as (client, _port):
        yield client, request.param


def _flat(pages):
    return [x for p in pages for x in p]


def test_reads_every_ledger_ascending_with_its_version_and_bytes(filled):
    c, _kind = filled
    before = c.rpc_count
    pages = list(c.read_ledgers(page_size=5))
    assert c.rpc_count - before == 1                       # one stream, not one Read per ledger
    assert [len(p) for p in pages] == [5, 5, 2]
    got = _flat(pages)
    assert [(x.scope, x.ledger_id) for x in got] == KEYS
    assert [x.version for x in got] == [0, 1] + [0] * (len(KEYS) - 2)
    assert got[1].serialized == _payload(100)
    assert got[5].serialized == _payload(5) and got[5].parse().length == 5


@pytest.mark.parametrize("lo,hi", [(None, None), (1, 2**31), ((0, 2**31 - 1), (1, 5)),
                                   ((1, 0), (2, 0)), ((7, U64), (U64, 0)), ((U64, 1), None),
                                   ((0, 5), (0, 5)), (None, (0, 0))])
def test_a_range_is_start_inclusive_end_exclusive_on_the_128_bit_id(filled, lo, hi):
    c, _kind = filled
    key = lambda k: None if k is None else (k if isinstance(k, int) else (k[0] << 64) | k[1])  # noqa: E731
    a, b = key(lo), key(hi)
    want = [k for k in KEYS if (a is None or (k[0] << 64 | k[1]) >= a) and (b is None or (k[0] << 64 | k[1]) < b)]
    got = [(x.scope, x.ledger_id) for x in _flat(c.read_ledgers(a, LedgerId(*hi) if isinstance(hi, tuple) else b,
                                                               page_size=3))]
    assert got == want


def test_a_scope_reads_only_that_scope_and_ranges_split_without_overlap(filled):
    c, _kind = filled
    assert [(x.scope, x.ledger_id) for x in _flat(c.read_ledgers(scope=1))] == [(1, 0), (1, 5)]
    assert [(x.scope, x.ledger_id) for x in _flat(c.read_ledgers(scope=U64))] == [(U64, 0), (U64, U64)]
    cuts = [0, 2**31 - 1, 1 << 64, (7 << 64) | U64, 1 << 128]
    parts = [_flat(c.read_ledgers(a, b)) for a, b in zip(cuts, cuts[1:])]
    assert [(x.scope, x.ledger_id) for p in parts for x in p] == KEYS


def test_format_conversion_and_bad_requests(filled):
    c, _kind = filled
    got = _flat(c.read_ledgers(scope=0, format_version=2))
    assert {parse_metadata(x.serialized, "x").format_version for x in got} == {2}
    with pytest.raises(MetadataError, match="NOT_IMPLEMENTED"):
        _flat(c.read_ledgers(format_version=9))
    with pytest.raises(MetadataError, match="BAD_REQUEST"):
        _flat(c.read_ledgers(page_size=0))
    with pytest.raises(MetadataError, match="BAD_REQUEST"):
        _flat(c.read_ledgers(-1))


def test_load_all_and_export_use_one_stream(filled, tmp_path):
    c, _kind = filled
    before = c.rpc_count
    md = c.load_all()
    assert c.rpc_count - before == 1
    assert set(md) == {LedgerId(*k) for k in KEYS} and md[LedgerId(0, 1)].length == 100


def test_ledgers_written_straight_into_zookeeper_are_read(zookeeper):
    root = f"/b{next(_roots)}/ledgers"
    store = open_store(f"zk://{zookeeper.hosts}{root}")
    kz = KazooClient(hosts=zookeeper.hosts)
    kz.start(15)
    try:
        for lid in range(3000):     # more than one short-tree leaf parent's worth is not needed; many pages are
            kz.create(f"{root}/00/{lid // 10000:04d}/L{lid % 10000:04d}", _payload(lid), makepath=True)
        kz.set(f"{root}/00/0000/L0042", _payload(4242))
        with served(store) as (c, _port):
            got = _flat(c.read_ledgers(page_size=1000))
            assert [x.ledger_id for x in got] == list(range(3000))
            assert got[42].version == 1 and got[42].parse().length == 4242
            assert [x.ledger_id for x in _flat(c.read_ledgers(1500, 1503))] == [1500, 1501, 1502]
    finally:
        kz.stop()
        kz.close()


@settings(max_examples=25, deadline=None)
@given(ids=st.sets(st.tuples(st.sampled_from([0, 1, 2**63, U64]), st.integers(0, 2**63 - 1)), max_size=30),
       a=st.integers(0, (1 << 128) - 1), b=st.integers(0, (1 << 128) - 1),
       size=st.integers(1, 7))
def test_sqlite_ranges_match_sorted_ids(tmp_path_factory, ids, a, b, size):
    store = SqliteStore(tmp_path_factory.mktemp("h") / "m.db")
    for s, lid in ids:
        store.create(s, lid, _payload(1))
    want = sorted(k for k in ids if a <= (k[0] << 64 | k[1]) < b)
    got = []
    for page in store.scan((a >> 64, a & U64), (b >> 64, b & U64), size):
        assert 1 <= len(page) <= size
        got += [(v.scope, v.ledger) for v in page]
    store.close()
    assert got == want
