"""bench/fixed_cost_bench.py's pieces: the two threads' halves of the bytes, the twin's build arguments."""
from __future__ import annotations

import argparse
import os

from bench import fixed_cost_bench


def _files(tmp_path, sizes):
    out = []
    for i, n in enumerate(sizes):
        p = tmp_path / f"{i}.log"
        p.write_bytes(b"\x01" * n)
        out.append(str(p))
    return out


def test_halves_split_the_bytes_evenly_and_keep_every_file(tmp_path):
    paths = _files(tmp_path, [800, 100, 500, 400, 200])
    a, b = fixed_cost_bench._halves(paths)
    assert sorted(a + b) == sorted(paths)
    size = [sum(map(os.path.getsize, h)) for h in (a, b)]
    assert sorted(size) == [1000, 1000]


def test_raw_read_two_reads_mapped_and_small_files(tmp_path):
    mapped = _files(tmp_path, [1 << 16, 3 << 16])
    small = mapped[:1]   # (read whole, as index files are)
    assert fixed_cost_bench.raw_read_two(mapped, small, 1 << 16) > 0


def test_the_twin_is_the_same_bookie_small_beside_it():
    a = argparse.Namespace(dir="/x/c2g20k-rocksdb/", size_gib=2.0, ledgers=20_000, storage="rocksdb",
                           entry_bytes="1024:60000", digest="crc32c", layout="interleaved")
    t = fixed_cost_bench.twin_of(a)
    assert (t.dir, t.size_gib, t.ledgers) == ("/x/c2g20k-rocksdb-twin", fixed_cost_bench.TWIN_GIB,
                                              fixed_cost_bench.TWIN_LEDGERS)
    assert (t.storage, t.entry_bytes, t.digest, t.layout) == (a.storage, a.entry_bytes, a.digest, a.layout)
    assert a.dir == "/x/c2g20k-rocksdb/" and a.size_gib == 2.0   # (the big bookie's own arguments untouched)
