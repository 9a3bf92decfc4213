"""The jitted .idx decoding and hierarchy walk against the reference walk, the golden corpora and the writer."""
from __future__ import annotations

import errno
import json
import os
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.diskio.failures import LIST, OPEN
from bkdisk.formats.digests import DigestType
from bkdisk.formats.errors import FormatError
from bkdisk.formats.ids import LedgerId
from bkdisk.formats.index import IndexHeader
from bkdisk.formats.paths import index_relpath
from bkdisk.indexfiles.listing import list_index_tree, stream_index_tree
from bkdisk.indexfiles.reference_reader import read_index
from bkdisk.indexfiles.reference_walk import walk_index_dirs_reference
from bkdisk.indexfiles.scan import read_index_locations, walk_index_dirs
from bkdisk.indexfiles.writer import index_bytes

SINGLE = ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage", "dbstorage-v6-bookieid"]
CORPORA = [GOLDEN / c for c in SINGLE] + (sorted((GOLDEN / "cluster-3" / "bookies").glob("*"))
                                           or [GOLDEN / "cluster-3" / "bookies" / "<missing>"])
IDS = [str(c.relative_to(GOLDEN)) for c in CORPORA]


def assert_same_inventory(got, want) -> None:
    assert got.dirs == want.dirs
    assert got.paths == want.paths and got.relpaths == want.relpaths
    assert got.files.dtype == want.files.dtype and got.files.tolist() == want.files.tolist()
    assert got.headers == want.headers
    assert [(type(e), str(e)) for e in got.errors] == [(type(e), str(e)) for e in want.errors]
    assert got.locations.dtype == want.locations.dtype and got.locations.tolist() == want.locations.tolist()
    assert got.strays == want.strays
    assert got.io_failures == want.io_failures


def _walks(dirs: list[str], batch: int):
    """The walk listing as it reads, and reading in the order of a listing made beforehand."""
    yield walk_index_dirs(dirs, batch_bytes=batch)
    listed = walk_index_dirs(dirs, batch_bytes=batch, listing=list_index_tree(dirs))
    assert listed.symlinks == walk_index_dirs(dirs).symlinks
    yield listed
    parts: list = []   # a listing streamed in blocks of 3 files, read as they come
    parts.append(stream_index_tree(dirs, parts.append, 3))
    streamed = walk_index_dirs(dirs, batch_bytes=batch, listing=iter(parts))
    assert streamed.symlinks == listed.symlinks
    yield streamed


def _manifest(corpus: Path) -> dict:
    assert (corpus / "manifest.json").is_file(), f"golden corpus missing: {corpus}"
    return json.loads((corpus / "manifest.json").read_text())


def test_golden_corpora_are_present():
    assert GOLDEN.is_dir(), f"golden folder missing: {GOLDEN}"
    assert all((c / "manifest.json").is_file() for c in CORPORA) and len(CORPORA) == 7


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_walk_equals_reference_and_manifest_locations_on_golden_dirs(corpus: Path):
    doc = _manifest(corpus)
    dirs = [str(corpus / d) for d in doc["ledger_dirs"]]
    ref = walk_index_dirs_reference(dirs)
    for batch in (1 << 20, 3000):
        for got in _walks(dirs, batch):
            assert_same_inventory(got, ref)
    if "DbLedgerStorage" in doc["storage_class"]:
        assert len(got.files) == 0 and got.strays == []
        return
    # every entry log record is indexed at (log id, offset + 4), and nothing else is
    want = {(int(r["ledger_id"]), r["entry_id"]): (int(r["entry_log_file"][:-4], 16), r["offset"] + 4)
            for r in doc["entry_log_records"]}
    have = {}
    for loc in got.locations:
        f = got.files[int(loc["file"])]
        have[(int(f["ledger"]), int(loc["entry"]))] = (int(loc["log"]), int(loc["pos"]))
    assert have == want
    fenced = {int(l["ledger_id"]) for l in doc["ledgers"] if l["fenced"]}
    for f, h in zip(got.files, got.headers):
        assert f["header_ok"] and f["version"] == doc["file_info_format_version"]
        assert h.fenced == (int(f["ledger"]) in fenced)
        assert f["depth"] == 2 and f["named"]


@pytest.mark.parametrize("corpus", CORPORA[:3], ids=IDS[:3])
def test_read_index_locations_equals_the_reference_reader(corpus: Path):
    files = sorted(corpus.glob("ledgers*/current/*/*/*.idx"))
    assert files
    for p in files:
        ref = read_index(p)
        got = read_index_locations(p)
        assert got.header == ref.header and got.header_error is None
        assert (got.size, got.present, got.last_entry, got.trailing_bytes) == \
            (ref.size, len(ref.present), ref.last_entry, ref.trailing_bytes)
        nz = ref.present
        assert got.locations["entry"].tolist() == nz.tolist()
        assert ((got.locations["log"].astype(np.uint64) << np.uint64(32)) | got.locations["pos"]).tolist() == \
            ref.locations[nz].tolist()
        again = read_index_locations(p, data=p.read_bytes())
        assert (again.header, again.present, again.last_entry) == (got.header, got.present, got.last_entry)
        assert again.locations.tolist() == got.locations.tolist()


LEDGER = st.builds(
    LedgerSpec,
    ledger_id=st.integers(0, 2 ** 63 - 1) | st.integers(0, 600),
    payloads=st.integers(0, 300).map(lambda n: [b"p"] * n),
    digest_type=st.sampled_from(list(DigestType)),
    scope_id=st.sampled_from([0, 0, 0, 1, 0x1234, 2 ** 64 - 1]),
    fenced=st.booleans(),
    explicit_lac=st.sampled_from([None, 0]),
    first_entry=st.sampled_from([0, 0, 3, 1000]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ledgers=st.lists(LEDGER, min_size=0, max_size=8, unique_by=lambda l: l.lid), dirs=st.integers(1, 3),
       page=st.sampled_from([64, 1024, 8192]), version=st.sampled_from([5, 6]))
def test_walk_equals_reference_and_writer_on_generated_bookies(ledgers, dirs, page, version):
    spec = BookieSpec(ledgers, ledger_dirs=[f"l{i}" for i in range(dirs)], page_size=page, journal_version=version,
                      index_version=1 if version >= 6 else 0, entry_log_size_limit=1 << 20, write_journal=False)
    with tempfile.TemporaryDirectory() as d:
        wb = write_bookie(spec, d)
        paths = [os.path.join(d, x) for x in spec.ledger_dirs]
        ref = walk_index_dirs_reference(paths)
        for got in _walks(paths, random.Random(len(ledgers)).choice([2048, 1 << 20])):
            assert_same_inventory(got, ref)
        have = {}
        for loc in got.locations:
            f = got.files[int(loc["file"])]
            have[(LedgerId(int(f["scope"]), int(f["ledger"])), int(loc["entry"]))] = \
                (int(loc["log"]) << 32) | int(loc["pos"])
        assert have == wb.locations
        assert sorted(got.paths) == sorted(wb.index_files.values())
        for f in got.files:
            assert f["depth"] == (4 if f["scope"] else 2) and f["named"] and f["header_ok"]


def _damaged_tree(d: str) -> list[str]:
    rng = random.Random(5)
    ledgers = [LedgerSpec(i * 977, [b"x"] * rng.randint(0, 1500), scope_id=0 if i % 3 else 0x77 + i, fenced=i % 2 == 0)
               for i in range(1, 16)]
    wb = write_bookie(BookieSpec(ledgers, ledger_dirs=["l0", "l1"], page_size=1024, write_journal=False), d)
    fs = sorted(wb.index_files.values())
    Path(fs[0]).write_bytes(b"XXXX" + Path(fs[0]).read_bytes()[4:])              # bad magic
    with open(fs[1], "r+b") as f:
        f.truncate(500)                                                          # short header
    with open(fs[2], "ab") as f:
        f.write(b"\1\2\3")                                                       # trailing partial slot
    with open(fs[3], "r+b") as f:
        f.seek(8)
        f.write((2000).to_bytes(4, "big"))                                       # master key too long
    Path(os.path.dirname(fs[4]), "junk.txt").write_text("x")                     # stray
    Path(fs[5] + ".rloc").write_bytes(b"x")                                      # relocation leftover
    os.symlink("/nonexistent/x", os.path.join(os.path.dirname(fs[6]), "dead.idx"))  # unreadable
    os.symlink(os.path.dirname(fs[7]), os.path.join(d, "l0", "current", "linked"))  # symlinked dir: not walked
    os.makedirs(os.path.join(d, "l0", "current", "ledgers", "x"))                 # RocksDB dirs: not walked
    Path(d, "l0", "current", "ledgers", "x", "1.idx").write_bytes(b"")
    Path(d, "l1", "current", "ff.idx").write_bytes(b"BKLE" + bytes(1020) + (5).to_bytes(8, "big"))
    Path(d, "l1", "current", "12", "0.idx").mkdir(parents=True)                   # a folder named like an index
    Path(d, "l1", "current", "00000000000000000000000000000005.idx").write_bytes(b"")  # scope-0 qualified name
    Path(d, "l1", "current", "12", "07b.idx").write_bytes(Path(fs[8]).read_bytes())  # hex with a leading zero
    Path(d, "l1", "current", "12", "0Ac.idx").write_bytes(Path(fs[8]).read_bytes())  # upper case and a leading zero
    Path(d, "l1", "current", "12", "0.idx", "0.idx").write_bytes(Path(fs[9]).read_bytes())
    return [os.path.join(d, "l0"), os.path.join(d, "l1"), os.path.join(d, "missing")]


def test_damaged_and_stray_files_are_reported_like_the_reference():
    with tempfile.TemporaryDirectory() as d:
        dirs = _damaged_tree(d)
        ref = walk_index_dirs_reference(dirs)
        for batch in (1 << 20, 2048):
            for got in _walks(dirs, batch):
                assert_same_inventory(got, ref)
        errors = [str(e) for e in got.errors if e is not None]
        # bad magic, short, key too long, dangling link, empty file, and a folder named like an index file
        assert len(errors) == 6
        assert [e for e in errors if e.endswith(": not a regular file")] == [
            f"{os.path.join(dirs[1], 'current', '12', '0.idx')}: not a regular file"]
        assert any("cannot read" in e for e in errors) and any("1024-byte index header" in e for e in errors)
        whys = sorted(w for _, w in got.strays)
        assert "leftover of an index relocation" in whys and "not an index file" in whys
        # the missing dir and the dangling link are failures with their errno, not strays
        [dead] = [p for p in got.paths if p.endswith("dead.idx")]
        folder = os.path.join(dirs[1], "current", "12", "0.idx")
        assert [(f.path, f.op, f.errno) for f in got.io_failures] == sorted(
            [(os.path.join(dirs[2], "current"), LIST, errno.ENOENT), (dead, OPEN, errno.ENOENT), (folder, OPEN, None)],
            key=lambda t: t[0])
        assert not any("cannot" in w for w in whys)
        assert int(got.files["trailing"].max()) == 3
        named = dict(zip(got.relpaths, zip(got.files["named"].tolist(), got.files["scope"].tolist(),
                                           got.files["ledger"].tolist())))
        # names are read as Long.parseLong(stem, 16) reads them: leading zeros and upper case too
        assert named[os.path.join("12", "07b.idx")] == (True, 0, 0x7B)
        assert named[os.path.join("12", "0Ac.idx")] == (True, 0, 0xAC)
        assert named["00000000000000000000000000000005.idx"] == (True, 0, 5)
        assert named[os.path.join("12", "0.idx", "0.idx")] == (True, 0, 0)


def test_names_outside_ascii_are_listed_in_python_order():
    with tempfile.TemporaryDirectory() as d:
        ledgers = [LedgerSpec(i, [b"x"] * 3) for i in (1, 2, 258)]
        write_bookie(BookieSpec(ledgers, write_journal=False), d)
        leaf = Path(d, "ledgers", "current", "0", "1")
        for name in ("é.idx", "z.txt", "\udcff.bin", "Ω"):
            (leaf / name).write_bytes(b"")
        dirs = [os.path.join(d, "ledgers")]
        assert_same_inventory(walk_index_dirs(dirs), walk_index_dirs_reference(dirs))


def test_walk_covers_a_two_and_four_level_hierarchy_of_many_files():
    with tempfile.TemporaryDirectory() as d:
        hdr = IndexHeader(1, bytes(20), 0, None)
        lids = [LedgerId(0, 70_000 + i * 37) for i in range(1500)] + [LedgerId(1 + i % 3, i * 101) for i in range(1500)]
        for i, lid in enumerate(lids):
            p = os.path.join(d, "current", index_relpath(lid))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            locs = (np.arange(1, 1 + i % 9, dtype=np.uint64) << np.uint64(32)) | np.uint64(1028)
            Path(p).write_bytes(index_bytes(hdr, locs, 64))
        ref = walk_index_dirs_reference([d])
        got = walk_index_dirs([d])
        assert_same_inventory(got, ref)
        assert len(got.files) == 3000
        assert sorted(got.files["depth"].tolist()) == [2] * 1500 + [4] * 1500
        assert len(got.locations) == sum(i % 9 for i in range(3000))


HEADER_FIELD = st.sampled_from(["magic", "version", "key_length", "state", "lac_length", "none"])


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from([0, 1]), key=st.binary(max_size=40), lac=st.sampled_from([b"", bytes(16), bytes(40)]),
       field=HEADER_FIELD, value=st.integers(-(2 ** 31), 2 ** 31 - 1), size=st.sampled_from([1024, 1023, 2000]))
def test_the_header_kernel_agrees_with_parse_header_on_damaged_headers(version, key, lac, field, value, size):
    """decode.check_header (jitted) and formats.index.parse_header (its twin) accept the same headers,
    and read the same fields from them."""
    from bkdisk.formats import index as fi
    from bkdisk.indexfiles import decode as D

    data = bytearray(fi.build_header(IndexHeader(version, key, 1, lac or None)) + bytes(max(0, size - 1024)))
    del data[size:]
    at = {"magic": 0, "version": fi.VERSION_OFFSET, "key_length": fi.KEY_LENGTH_OFFSET,
          "state": fi.KEY_OFFSET + len(key), "lac_length": fi.HEADER_FIXED_SIZE[0] + len(key)}.get(field)
    if at is not None and at + 4 <= len(data):
        data[at:at + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
    buf = np.frombuffer(bytes(data), np.uint8)
    ok, v, key_len, state, lac_len = D.check_header(buf, 0, len(buf))
    try:
        h = fi.parse_header(bytes(data))
    except FormatError:
        h = None
    assert bool(ok) == (h is not None)
    if h is not None:
        assert (v, key_len, state) == (h.version, len(h.master_key), h.state_bits)
        assert lac_len == len(h.explicit_lac_body or b"")


def test_the_constants_the_kernels_use_are_those_of_the_spec_tables():
    """specs/index.md's offsets (tied to INDEX_HEADER_FIELDS by test_specs_match_declarations) are the
    constants formats/index.py derives for the kernels and passes."""
    from bkdisk.formats import index as fi

    text = (Path(__file__).resolve().parents[1] / "specs" / "index.md").read_text()
    v1 = text[text.index("INDEX_HEADER_FIELDS version=1"):]
    rows = {r.split("|")[3].strip(" `"): r.split("|")[1].strip() for r in v1.splitlines()[3:10] if r.startswith("|")}
    assert rows["version"] == str(fi.VERSION_OFFSET) and rows["master_key_length"] == str(fi.KEY_LENGTH_OFFSET)
    assert rows["master_key"] == str(fi.KEY_OFFSET) and rows["state_bits"] == f"{fi.KEY_OFFSET}+L"
    assert rows["explicit_lac_length"] == f"{fi.HEADER_FIXED_SIZE[0]}+L"
    assert rows["explicit_lac"] == f"{fi.HEADER_FIXED_SIZE[1]}+L"
    assert f"`{fi.HEADER_SIZE} + {fi.SLOT_SIZE}·e`" in text and fi.slot_offset(3) == fi.HEADER_SIZE + 3 * fi.SLOT_SIZE
    assert fi.MAGIC_VALUE.to_bytes(4, "big") == fi.INDEX_MAGIC


@pytest.mark.parametrize("share", [0.0, 0.05, 0.3, 0.6, 0.95, 2.0])
def test_locations_given_to_a_sink_that_spills_are_those_held(tmp_path, share):
    """The walk keeps its locations until they pass the sink's budget, then hands them over (it spills):
    in any case the same rows, in the same order, as the walk without a sink."""
    from bkdisk.diskio.chunked_array import ChunkedArray
    from bkdisk.diskio.spill import MemoryLimit, SpillFolder
    from bkdisk.indexfiles.arrays import LOCATION_DTYPE

    ledgers = [LedgerSpec(i, [b"e" * (i % 7 + 1)] * (i % 40 + 1)) for i in range(60)]
    root = tmp_path / "b"
    write_bookie(BookieSpec(ledgers), str(root))
    dirs = [str(root / "ledgers")]
    held = walk_index_dirs(dirs, batch_bytes=4096)
    budget = int(share * held.locations.nbytes)
    with SpillFolder(MemoryLimit(1, str(tmp_path))) as folder:
        sink = ChunkedArray(LOCATION_DTYPE, budget, folder, "locations")
        got = walk_index_dirs(dirs, batch_bytes=4096, sink=sink)
        assert (got.locations is sink) == sink.spilled
        assert sink.spilled if share <= 0.6 else True   # (near 1 the last batch decides)
        assert not sink.spilled if share > 1 else True
        assert got.locations[0:len(got.locations)].tolist() == held.locations.tolist()
        assert got.files.tolist() == held.files.tolist() and len(held.locations) > 600


def test_the_errors_kept_for_bad_files_do_not_keep_the_walk_reader_and_its_buffer(monkeypatch, tmp_path):
    import weakref

    from bkdisk.indexfiles.reading import Reader
    readers = []
    made = Reader.__init__

    def noted(self, *args, **kwargs):
        made(self, *args, **kwargs)
        readers.append(weakref.ref(self))
    monkeypatch.setattr(Reader, "__init__", noted)
    inv = walk_index_dirs(_damaged_tree(str(tmp_path)))
    assert any(isinstance(e, FormatError) for e in inv.errors)   # (bad headers, kept with the inventory)
    assert readers and all(r() is None for r in readers)
