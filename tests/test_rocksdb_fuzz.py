"""Arbitrary and mutated bytes of every RocksDB file kind (SST, MANIFEST, WAL, CURRENT) raise only our
FormatError (a WAL's damage is data, never an exception), with no hang and no allocation a length
field claims."""
from __future__ import annotations

import os
import tempfile
import tracemalloc
from contextlib import ExitStack
from pathlib import Path

from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import location_value, locations_key
from bkdisk.formats.errors import FormatError
from bkdisk.rocksdbfiles import writer as w
from bkdisk.rocksdbfiles.block import Handle, read_block
from bkdisk.rocksdbfiles.db import open_db
from bkdisk.rocksdbfiles.manifest import Version, apply_edit, read_current, read_manifest
from bkdisk.rocksdbfiles.sst import Record, SstFile
from bkdisk.rocksdbfiles.wal import decode_batch, replay_wal

LOC = GOLDEN / "dbstorage-v6-bookieid" / "ledgers0" / "current" / "locations"
SEEDS = {
    "golden-lz4": (LOC / "000008.sst").read_bytes(),
    "golden-snappy": (LOC.parent / "ledgers" / "000008.sst").read_bytes(),
    "writer-v6-delta": w.build_sst([Record(locations_key(1, i), 10 + i, rf.ValueType.VALUE, location_value(0, i))
                                    for i in range(400)], w.TableOptions(format_version=6, block_size=1024,
                                                                         index_restart_interval=4)),
}
MANIFEST = (LOC / "MANIFEST-000010").read_bytes()
WAL = w.frame_log([w.write_batch(52 + i, [(rf.ValueType.VALUE, locations_key(2, i), location_value(0, i)),
                                          (rf.ValueType.DELETION, locations_key(3, i), b"")]) for i in range(40)]
                  + [w.write_batch(92, [(rf.ValueType.VALUE, b"big", b"x" * 70000)])])   # spans 3 blocks
WAL_BATCHES = replay_wal(WAL, path="9.log", number=9).batches
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw, seed: bytes):
    """``seed`` with a few bytes overwritten, a range deleted, or cut short."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "delete", "insert"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[i] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[i:]
        elif kind == "delete":
            del data[i:i + draw(st.integers(1, 64))]
        else:
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


def _read_sst(data: bytes) -> None:
    try:
        t = SstFile("f.sst", data)
        for r in t.records():
            t.get(r.user_key)
        t.range_deletions()
    except FormatError as e:
        assert e.path == "f.sst" and str(e).startswith("f.sst: offset ")


@FUZZ
@given(st.sampled_from(sorted(SEEDS)).flatmap(lambda k: mutated(SEEDS[k])))
def test_mutated_sst_raises_only_format_error(data: bytes):
    _read_sst(data)


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes_as_sst_raise_only_format_error(data: bytes):
    _read_sst(data + SEEDS["golden-lz4"][-rf.FOOTER_SIZE:] if data[:1] == b"\x00" else data)


@FUZZ
@given(mutated(MANIFEST))
def test_mutated_manifest_raises_only_format_error(data: bytes):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "CURRENT").write_bytes(b"MANIFEST-000010\n")
        Path(d, "MANIFEST-000010").write_bytes(data)
        try:
            read_manifest(d)
        except FormatError as e:
            assert e.path.endswith("MANIFEST-000010")


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_version_edits_raise_only_format_error(payload: bytes):
    try:
        apply_edit(Version("m"), payload, path="m", base=64)
    except FormatError as e:
        assert e.path == "m" and e.offset >= 64


@FUZZ
@given(mutated(WAL))
def test_mutated_wal_replays_up_to_its_damage_without_raising(data: bytes):
    r = replay_wal(data, path="9.log", number=9)
    # Damage only ever drops batches: what replays is original batches in their order (a whole record
    # cut out at record boundaries is undetectable from the log alone, so not always a prefix).
    originals = iter([(b.sequence, b.records) for b in WAL_BATCHES])
    assert all(any(x == o for o in originals) for x in [(b.sequence, b.records) for b in r.batches])


def test_the_unmutated_wal_replays_whole():
    r = replay_wal(WAL, path="9.log", number=9)
    assert len(r.batches) == 41 and r.tail is None and r.bad_batch is None


@FUZZ
@given(st.binary(max_size=100))
def test_arbitrary_write_batches_raise_only_format_error(payload: bytes):
    try:
        decode_batch(payload, path="l", offset=0)
    except FormatError as e:
        assert e.path == "l"


@FUZZ
@given(st.binary(max_size=40))
def test_arbitrary_current_files_raise_only_format_error(data: bytes):
    with tempfile.TemporaryDirectory() as d:
        Path(d, "CURRENT").write_bytes(data)
        try:
            assert read_current(d).startswith("MANIFEST-")
        except FormatError as e:
            assert e.path == os.path.join(d, "CURRENT") and e.offset == 0


def _huge_claims() -> list[bytes]:
    """Tables whose lengths claim far more than the file holds: a 2**60-byte block, a 2**31-byte LZ4 block."""
    base = SEEDS["golden-lz4"]
    t = SstFile("x", base)
    footer_at = len(base) - rf.FOOTER_SIZE
    huge_handle = bytearray(base)
    part2 = rf.VARINT.build(t.footer.metaindex.offset) + rf.VARINT.build(1 << 60)
    huge_handle[footer_at + 1:footer_at + 1 + len(part2)] = part2
    raw = w.build_block([(rf.internal_key(b"k", 1, 1), b"v")], 16)
    lz4_block = rf.VARINT.build(1 << 31) + raw      # a claimed uncompressed size of 2 GiB
    ck = rf.builtin_checksum(rf.ChecksumType.XXHASH, lz4_block + bytes([rf.Compression.LZ4]))
    forged = lz4_block + rf.BLOCK_TRAILER.build(dict(compression_type=rf.Compression.LZ4, checksum=ck))
    return [bytes(huge_handle), forged]


def test_claimed_huge_lengths_are_errors_not_allocations():
    tracemalloc.start()
    try:
        huge, forged = _huge_claims()
        for attempt in (lambda: SstFile("x", huge),
                        lambda: read_block(forged, Handle(0, len(forged) - 5), rf.ChecksumType.XXHASH, path="x")):
            try:
                attempt()
                raise AssertionError("a huge claimed length was accepted")
            except FormatError as e:
                assert e.path == "x"
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_open_db_on_a_damaged_copy_reports_problems_not_exceptions(tmp_path: Path):
    d = tmp_path / "db"
    d.mkdir()
    (d / "CURRENT").write_bytes(b"MANIFEST-000010\n")
    (d / "MANIFEST-000010").write_bytes(MANIFEST)
    (d / "000008.sst").write_bytes(SEEDS["golden-lz4"][:-1])
    (d / "000009.log").write_bytes(WAL[:-100])
    with ExitStack() as stack:
        db = open_db(d, stack)
        kinds = sorted(p.kind for p in db.problems)
        assert kinds == ["sst-size", "sst-unreadable", "wal-torn-tail"]
        assert len(dict(db.items())) == 40          # the WAL's 40 puts (its deletes hit nothing; the big
        # batch at the end was cut, so it is the torn tail)


@FUZZ
@given(st.binary(max_size=300))
def test_the_jitted_block_decoder_fails_exactly_where_its_twin_does(raw: bytes):
    import numpy as np

    from bkdisk.rocksdbfiles.block import Block
    from bkdisk.rocksdbfiles.kernels import decode_entries
    try:
        want = [(k, v) for k, v, _ in Block(raw, len(raw), [0], False, "b").entries()]
    except FormatError as e:
        want = e.offset
    try:
        arena, koff, klen, voff, vlen = decode_entries(np.frombuffer(raw, np.uint8), len(raw), path="b")
        got = [(arena[o:o + n].tobytes(), raw[vo:vo + vn]) for o, n, vo, vn in zip(koff, klen, voff, vlen)]
    except FormatError as e:
        got = e.offset
    assert got == want
