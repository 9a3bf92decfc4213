"""The RocksDB reader on its own: SST blocks and checksums, log framing, MANIFEST edits, WAL replay and
the merged view, against golden bytes where they exist and the test writer where they do not."""
from __future__ import annotations

import shutil
from contextlib import ExitStack
from pathlib import Path

import crc32c
import pytest
import xxhash
from conftest import GOLDEN

from bkdisk.formats import rocksdb as rf
from bkdisk.formats.dbledger import location_value, locations_key, parse_location
from bkdisk.formats.errors import FormatError
from bkdisk.rocksdbfiles import writer as w
from bkdisk.rocksdbfiles.db import open_db
from bkdisk.rocksdbfiles.logfile import read_log
from bkdisk.rocksdbfiles.manifest import Version, apply_edit
from bkdisk.rocksdbfiles.sst import Record, SstFile
from bkdisk.rocksdbfiles.wal import decode_batch

V = rf.ValueType
GOLDEN_SSTS = sorted(GOLDEN.glob("**/current/*/0*.sst"))
LOCATIONS0 = GOLDEN / "dbstorage-v6-bookieid" / "ledgers0" / "current" / "locations"


def test_golden_trailers_are_xxh32_of_contents_and_type_byte_seed_0():
    assert len(GOLDEN_SSTS) == 6
    for p in GOLDEN_SSTS:
        data = p.read_bytes()
        t = SstFile(str(p), data)
        for h in t.index_handles + [t.footer.metaindex, t.footer.index]:
            stored = rf.BLOCK_TRAILER.parse(data[h.offset + h.size:h.end]).checksum
            assert stored == xxhash.xxh32(data[h.offset:h.offset + h.size + 1], seed=0).intdigest()


@pytest.mark.parametrize("path", GOLDEN_SSTS,
                         ids=lambda p: f"{p.parents[3].name}-{p.parent.parent.name}-{p.parent.name}")
def test_writer_data_blocks_are_byte_identical_to_rocksdbs(path: Path):
    data = path.read_bytes()
    t = SstFile(str(path), data)
    (h,) = t.index_handles
    raw = w.build_block([(rf.internal_key(r.user_key, r.sequence, r.vtype), r.value) for r in t.records()], 16)
    f = w._File(w.TableOptions(checksum_type=t.footer.checksum_type, format_version=t.format_version))
    f.block(raw, {"LZ4": rf.Compression.LZ4, "Snappy": rf.Compression.SNAPPY}[t.compression])
    assert bytes(f.buf) == data[h.offset:h.end]


def _records(n: int, versions: int = 1) -> list[Record]:
    out = []
    for i in range(n):
        for v in range(versions):
            seq = 1000 + i * versions + (versions - v)
            out.append(Record(locations_key(i // 50, i % 50), seq, V.VALUE, location_value(i % 7, 1024 + 40 * i + v)))
    return out


@pytest.mark.parametrize("opts", [
    w.TableOptions(),
    w.TableOptions(compression=rf.Compression.SNAPPY, format_version=5, index_restart_interval=16),
    w.TableOptions(compression=rf.Compression.NONE, checksum_type=rf.ChecksumType.CRC32C, format_version=4,
                   index_restart_interval=3),
    w.TableOptions(checksum_type=rf.ChecksumType.XXH3, format_version=6, index_restart_interval=16),
    w.TableOptions(checksum_type=rf.ChecksumType.XXHASH64, format_version=3, block_size=4096),
], ids=["lz4-v2", "snappy-v5-delta16", "none-crc32c-v4", "xxh3-v6", "xxh64-v3-4k"])
def test_multi_block_tables_read_back_every_record_and_find_every_key(opts: w.TableOptions):
    recs = _records(3000, versions=2)
    data = w.build_sst(recs, w.TableOptions(**{**opts.__dict__, "block_size": min(opts.block_size, 4096)}))
    t = SstFile("t.sst", data)
    assert len(t.index_handles) > 10 and t.format_version == opts.format_version
    assert list(t.records()) == recs
    for r in recs[::2]:                     # the newer version of each key comes first
        assert t.get(r.user_key) == r
    assert t.get(locations_key(10 ** 6, 0)) is None and t.get(locations_key(0, 50)) is None and t.get(b"") is None


def test_v6_footer_and_block_checksums_carry_the_context():
    opts = w.TableOptions(format_version=6)
    data = bytearray(w.build_sst(_records(10), opts))
    t = SstFile("t.sst", bytes(data))
    assert t.footer.base_context_checksum == opts.base_context_checksum and t.footer.index is None
    # The same block moved to another offset fails: the stored checksum includes its offset.
    h = t.index_handles[0]
    plain = rf.builtin_checksum(opts.checksum_type, bytes(data[h.offset:h.offset + h.size + 1]))
    stored = rf.BLOCK_TRAILER.parse(bytes(data[h.offset + h.size:h.end])).checksum
    assert stored == (plain + rf.context_modifier(opts.base_context_checksum, h.offset)) & 0xFFFFFFFF != plain
    data[-rf.FOOTER_SIZE + 20] ^= 1          # inside the footer's reserved area: its checksum catches it
    with pytest.raises(FormatError) as e:
        SstFile("t.sst", bytes(data))
    assert e.value.path == "t.sst" and e.value.offset == len(data) - rf.FOOTER_SIZE


def test_log_records_span_blocks_and_skip_short_block_trailers():
    payloads = [b"a" * 100_000, b"", b"b" * (rf.LOG_BLOCK_SIZE - 2 * rf.LOG_HEADER_SIZE - 3), b"c" * 10]
    data = w.frame_log(payloads)
    got = read_log(data, path="x.log")
    assert [r.payload for r in got.records] == payloads and got.tail is None
    assert got.records[1].offset > rf.LOG_BLOCK_SIZE * 3     # the first record took four blocks
    rec = read_log(w.frame_log(payloads, log_number=77), path="r.log", log_number=77)
    assert [r.payload for r in rec.records] == payloads
    old = read_log(w.frame_log(payloads, log_number=76), path="r.log", log_number=77)
    assert old.records == [] and old.tail.reason == "record of an older log (recycled file)"


def test_golden_manifest_header_checksums_are_masked_crc32c_of_type_and_payload():
    data = (LOCATIONS0 / "MANIFEST-000010").read_bytes()
    got = read_log(data, path="m")
    assert got.tail is None and len(got.records) == 6
    first = got.records[1]
    h = rf.LOG_HEADER.parse(data[first.offset:first.offset + rf.LOG_HEADER_SIZE])
    crc = crc32c.crc32c(data[first.offset + 6:first.offset + rf.LOG_HEADER_SIZE + h.length])
    assert h.checksum == ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _edit(*fields: tuple[int, bytes]) -> bytes:
    return b"".join(rf.VARINT.build(t) + body for t, body in fields)


def test_version_edits_add_and_delete_files_per_level():
    vi = rf.VARINT.build
    ikey = w.length_prefixed(rf.internal_key(b"k", 5, V.VALUE))
    v = Version("m")
    apply_edit(v, _edit((rf.Tag.COMPARATOR, w.length_prefixed(b"leveldb.BytewiseComparator")),
                        (rf.Tag.LOG_NUMBER, vi(12)), (rf.Tag.NEXT_FILE_NUMBER, vi(20)),
                        (rf.Tag.LAST_SEQUENCE, vi(99))), path="m", base=0)
    apply_edit(v, _edit((rf.Tag.NEW_FILE4, vi(0) + vi(13) + vi(4000) + ikey + ikey + vi(1) + vi(5)
                         + vi(rf.NewFileTag.EPOCH_NUMBER) + w.length_prefixed(vi(3)) + vi(rf.NewFileTag.TERMINATE)),
                        (rf.Tag.NEW_FILE2, vi(1) + vi(14) + vi(10) + ikey + ikey + vi(1) + vi(5))), path="m", base=7)
    apply_edit(v, _edit((rf.Tag.DELETED_FILE, vi(0) + vi(13)), (rf.Tag.DB_ID, w.length_prefixed(b"id"))),
               path="m", base=90)
    assert (v.log_number, v.next_file_number, v.last_sequence, v.db_id) == (12, 20, 99, "id")
    assert {n: (f.level, f.size) for n, f in v.files.items()} == {14: (1, 10)} and v.deleted == [(0, 13)]
    with pytest.raises(FormatError) as e:
        apply_edit(v, _edit((77, b"")), path="m", base=300)
    assert (e.value.path, e.value.offset) == ("m", 300) and "tag 77" in str(e.value)
    apply_edit(v, _edit((rf.TAG_SAFE_IGNORE_BIT | 99, w.length_prefixed(b"future"))), path="m", base=0)


def _copy_db(tmp_path: Path) -> Path:
    d = tmp_path / "locations"
    shutil.copytree(LOCATIONS0, d)
    for p in d.iterdir():
        p.chmod(0o644)
    return d


def test_wal_replay_newest_sequence_wins_and_deletions_hide(tmp_path: Path):
    d = _copy_db(tmp_path)
    k = [locations_key(0, e) for e in range(6)]
    batches = [w.write_batch(52, [(V.VALUE, k[0], location_value(9, 4))]),                  # overwrites an SST value
               w.write_batch(53, [(V.DELETION, k[1], b""), (V.VALUE, locations_key(77, 0), location_value(1, 8))]),
               w.write_batch(55, [(V.RANGE_DELETION, k[2], k[4])]),                          # hides entries 2 and 3
               w.write_batch(56, [(V.VALUE, k[3], location_value(5, 5))])]                   # newer than the range
    (d / "000009.log").write_bytes(w.frame_log(batches))
    with ExitStack() as st:
        db = open_db(d, st)
        assert db.problems == [] and len(db.wals[0].batches) == 4
        items = dict(db.items())
        assert parse_location(k[0], items[k[0]]).packed == (9 << 32) | 4
        assert k[1] not in items and k[2] not in items and db.get(k[2]) is None
        assert parse_location(k[3], items[k[3]]).packed == (5 << 32) | 5 == parse_location(k[3], db.get(k[3])).packed
        assert k[4] in items and locations_key(77, 0) in items
        assert len(items) == 51 - 2 + 1


def test_a_torn_wal_tail_keeps_whole_batches_and_reports_what_is_lost(tmp_path: Path):
    d = _copy_db(tmp_path)
    batches = [w.write_batch(52 + i, [(V.VALUE, locations_key(90, i), location_value(1, i))]) for i in range(3)]
    data = w.frame_log(batches)
    (d / "000009.log").write_bytes(data[:-5])
    with ExitStack() as st:
        db = open_db(d, st)
        (p,) = db.problems
        assert p.kind == "wal-torn-tail" and p.path.endswith("000009.log")
        assert p.offset == len(data) - (rf.LOG_HEADER_SIZE + len(batches[2])) and p.lost_bytes > 0
        assert [b.sequence for b in db.wals[0].batches] == [52, 53]
        assert locations_key(90, 1) in dict(db.items()) and locations_key(90, 2) not in dict(db.items())


def test_write_batch_errors_name_the_record():
    good = w.write_batch(7, [(V.VALUE, b"k", b"v")])
    assert decode_batch(good, path="l", offset=40).records == (Record(b"k", 7, V.VALUE, b"v"),)
    with pytest.raises(FormatError) as e:
        decode_batch(good[:-1], path="l", offset=40)
    assert e.value.path == "l" and e.value.offset >= 40
    with pytest.raises(FormatError):
        decode_batch(w.write_batch(7, [(V.VALUE, b"k", b"v")])[:12] + bytes([0x66]), path="l", offset=0)


def test_levels_merge_newest_sequence_first_and_tombstones_in_tables_hide_older_levels(tmp_path: Path):
    old = [Record(locations_key(1, e), 10 + e, V.VALUE, location_value(0, 100 + e)) for e in range(20)]
    new = [Record(locations_key(1, 3), 50, V.VALUE, location_value(1, 3)),
           Record(locations_key(1, 4), 51, V.DELETION, b""),
           Record(locations_key(2, 0), 52, V.VALUE, location_value(1, 8))]
    wal = [w.write_batch(60, [(V.VALUE, locations_key(1, 5), location_value(2, 5)),
                              (V.SINGLE_DELETION, locations_key(1, 6), b"")])]
    w.write_db(tmp_path / "db", [(0, new), (1, old)], wal=wal)
    with ExitStack() as st:
        db = open_db(tmp_path / "db", st)
        assert db.problems == [] and [lv for lv, _n, _t in db.tables] == [0, 1]
        assert db.version.last_sequence == 52 and db.version.log_number == 12
        items = {parse_location(k, v).entry_id if k[:8] == locations_key(1, 0)[:8] else "l2": parse_location(k, v)
                 for k, v in db.items()}
        assert items[3].packed == (1 << 32) | 3 and 4 not in items and 6 not in items
        assert items[5].packed == (2 << 32) | 5 and items[7].packed == 107 and items["l2"].packed == (1 << 32) | 8
        assert len(items) == 20 - 2 + 1
        assert db.get(locations_key(1, 4)) is None and db.get_record(locations_key(1, 4)).vtype == V.DELETION


def test_hot_path_twins_agree_with_the_declarations():
    import construct as cs
    for ikey in (rf.internal_key(b"", 0, 0), rf.internal_key(b"abc", rf.MAX_SEQUENCE, 0x7F),
                 rf.internal_key(locations_key(5, 6), 123456789, V.RANGE_DELETION)):
        assert rf.unpack_internal_key(ikey) == rf.split_internal_key(ikey)
    for ctype, ck in ((0, 0), (4, 0xDEADBEEF), (7, 2 ** 32 - 1)):
        t = rf.BLOCK_TRAILER.build(dict(compression_type=ctype, checksum=ck))
        c = rf.BLOCK_TRAILER.parse(t)
        assert rf.unpack_trailer(b"abc" + t, 3) == (ctype, ck) == (c.compression_type, c.checksum)
    raw = b"".join(rf.RESTART.build(x) for x in (0, 17, 40000, 2 ** 32 - 1))
    assert rf.unpack_restarts(b"xy" + raw, 2, 4) == list(rf.RESTART[4].parse(raw))
    for n in (0, 1, 127, 128, 300, 2 ** 35, 2 ** 64 - 1):
        b = rf.VARINT.build(n)
        assert rf.read_varint(b + b"\xff", 0, len(b) + 1) == (n, len(b))
    with pytest.raises(FormatError):
        rf.read_varint(b"\xff" * 11, 0, 11)
    with pytest.raises(cs.ConstructError):
        rf.VARINT.parse(b"\xff")


def _python_entries(raw: bytes, limit: int):
    from bkdisk.rocksdbfiles.block import Block
    return [(k, v) for k, v, _at in Block(raw, limit, [0], False).entries()]


def _kernel_entries(raw: bytes, limit: int):
    import numpy as np

    from bkdisk.rocksdbfiles.kernels import decode_entries
    arena, koff, klen, voff, vlen = decode_entries(np.frombuffer(raw, np.uint8), limit)
    return [(arena[o:o + n].tobytes(), raw[vo:vo + vn]) for o, n, vo, vn in zip(koff, klen, voff, vlen)]


def test_the_jitted_block_decoder_agrees_with_its_python_twin():
    tables = [SstFile(str(p), p.read_bytes()) for p in GOLDEN_SSTS]
    tables.append(SstFile("w", w.build_sst(_records(2000, 2), w.TableOptions(block_size=2048))))
    blocks = 0
    for t in tables:
        for i in range(len(t.index_handles)):
            b = t.data_block(i)
            assert _kernel_entries(b.raw, b.limit) == _python_entries(b.raw, b.limit)
            blocks += 1
    assert blocks > 40


def test_jitted_locations_equal_the_reference_reader(tmp_path: Path):
    from bkdisk.rocksdbfiles.dbindex import read_locations, read_locations_reference
    d = _copy_db(tmp_path)
    k = [locations_key(0, e) for e in range(6)]
    (d / "000009.log").write_bytes(w.frame_log([
        w.write_batch(52, [(V.VALUE, k[0], location_value(9, 4)), (V.DELETION, k[1], b"")]),
        w.write_batch(54, [(V.RANGE_DELETION, k[2], k[4]), (V.VALUE, locations_key(3, 3), location_value(1, 1))])]))
    for db in (d, LOCATIONS0, GOLDEN / "cluster-3" / "bookies" / "bk-3.rack-b" / "ledgers" / "current" / "locations"):
        with ExitStack() as st:
            fast, p1 = read_locations(db, st)
            slow, p2 = read_locations_reference(db, st)
        assert fast == slow and p1 == p2 == [] and len(fast) > 40


def test_key_words_sort_rows_bytewise():
    import numpy as np
    rows = [b"\x00" * 11, b"\x00" * 10 + b"\x01", b"\x01" + b"\x00" * 10, b"\xff" * 11, b"\x80" + b"\x00" * 10]
    keys = np.frombuffer(b"".join(rows), np.uint8).reshape(-1, 11)
    order = np.lexsort(tuple(reversed(rf.key_words(keys))))
    assert [rows[i] for i in order] == sorted(rows)


def test_jitted_locations_merge_overlapping_tables_newest_first(tmp_path: Path):
    # Two tables holding versions of the same keys (and one table already in order): the fast path that
    # skips the sort must only be taken when rows already run key ascending, then sequence descending.
    from bkdisk.rocksdbfiles.dbindex import read_locations, read_locations_reference
    old = [Record(locations_key(1, e), 1 + e, V.VALUE, location_value(0, 100 + e)) for e in range(50)]
    new = [Record(locations_key(1, e), 100 + e, V.VALUE, location_value(1, 200 + e)) for e in range(0, 50, 2)]
    for tables in ([(0, new), (1, old)], [(1, old), (0, new)], [(1, old)]):
        d = tmp_path / f"db{len(list(tmp_path.iterdir()))}"
        w.write_db(d, tables)
        with ExitStack() as st:
            fast, p1 = read_locations(d, st)
            slow, p2 = read_locations_reference(d, st)
        assert fast == slow and p1 == p2 == [] and len(fast) == 50
        if len(tables) == 2:
            assert {x.entry_id: x.log_id for x in fast} == {e: 1 - e % 2 for e in range(50)}
