"""Ledger metadata read as distributed data: the driver's chunk files (folder names, service id
ranges), a metadata task's segment, known-key and per-bookie files, a disk task's view of its
bookie's ledgers, and fsck's streamed read of a metadata folder (without Spark); the orphans table
over the known keys (with Spark)."""
from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from conftest import GOLDEN

from bench.metadata_gen import write_folder, write_sqlite
from bkdisk.audit.metadata_source import MetadataDirSource, MetadataServiceSource, write_chunks
from bkdisk.audit.metadata_tables import bookie_metadata, read_chunk_task
from bkdisk.bookie.metadata_dir import bookie_metadata_dir, load_metadata_dir, places_entries_on
from bkdisk.formats.ids import LedgerId
from bkdisk.metaservice.client import MetadataClient
from bkdisk.metaservice.server import serve
from bkdisk.metaservice.sqlite_store import SqliteStore

C3 = GOLDEN / "cluster-3"
C3_BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")


def stage(source, tmp_path, per_chunk=None) -> tuple[list[dict], str, str]:
    """The metadata stage's tasks run one after another in this process."""
    if per_chunk is not None:
        source.units_per_chunk = per_chunk
    chunks = write_chunks(source, str(tmp_path / "chunks"))
    seg, near, known = str(tmp_path / "seg"), str(tmp_path / "near"), str(tmp_path / "known")
    os.makedirs(seg)
    os.makedirs(near)
    return [read_chunk_task(source, i, c, seg, near, known) for i, c in enumerate(chunks)], seg, near


def known_rows(seg: str) -> list[tuple]:
    """The known keys the stage wrote beside ``seg``."""
    d = os.path.join(os.path.dirname(seg), "known")
    return sorted(tuple(r.values()) for r in pq.read_table(d).to_pylist()) if os.path.isdir(d) else []


def segment_rows(seg: str) -> list[tuple]:
    t = pq.read_table(seg)
    return sorted(tuple(r.values()) for r in t.to_pylist())


def expected_segments(md) -> list[tuple]:
    """A row per ensemble, but a CLOSED ledger's ensembles starting past its last entry."""
    out = []
    for lid, m in md.items():
        ens = sorted(m.ensembles)
        for i, (first, members) in enumerate(ens):
            if m.is_closed and first > m.last_entry_id:
                continue
            out.append((lid.scope, lid.ledger, m.state, m.effective_last_entry_id if m.is_closed else None,
                        m.write_quorum, first, ens[i + 1][0] if i + 1 < len(ens) else None, list(members)))
    return sorted(out)


def test_folder_chunks_give_every_ledger_once_as_segments_and_per_bookie_ledgers(tmp_path):
    md, _ = load_metadata_dir(str(C3 / "metadata"))
    stats, seg, near = stage(MetadataDirSource(str(C3 / "metadata")), tmp_path, per_chunk=2)
    assert len(stats) > 2   # the .bin and .txt of a ledger may fall in different chunks: read once
    assert sum(s["ledgers"] for s in stats) == len(md) and not any(s["errors"] for s in stats)
    assert segment_rows(seg) == expected_segments(md)
    assert known_rows(seg) == expected_known(md)
    assert sorted({b for s in stats for b in s["bookies"]}) == list(C3_BOOKIES)
    for b in C3_BOOKIES:
        view = bookie_metadata(near, b, MetadataDirSource(str(C3 / "metadata")))
        assert dict(view) == {lid: m for lid, m in md.items() if places_entries_on(m, b)}
        for lid, m in md.items():   # every other ledger is still there, looked up
            assert lid in view and view[lid] == m
        assert LedgerId(0, 0xDEAD) not in view


def test_a_task_reports_unreadable_metadata_files(tmp_path):
    d = tmp_path / "md"
    d.mkdir()
    for f in (C3 / "metadata").glob("*.bin"):
        (d / f.name).write_bytes(f.read_bytes())
    (d / "77.bin").write_bytes(b"BookieMetadataFormatVersion\t3\nnot a message")
    stats, _seg, _near = stage(MetadataDirSource(str(d)), tmp_path / "s")
    assert sum(s["errors"] for s in stats) == 1
    assert "77.bin" in stats[0]["first_errors"][0]


@pytest.fixture()
def service(tmp_path):
    store = SqliteStore(tmp_path / "m.db")
    server, port = serve(store)
    yield f"127.0.0.1:{port}", store
    server.stop(0)
    store.close()


def test_service_ranges_tile_the_ids_and_read_every_ledger_once(service, tmp_path, monkeypatch):
    import bkdisk.audit.metadata_source as ms
    target, _store = service
    c = MetadataClient(target)
    want = {}
    for f in sorted((C3 / "metadata").glob("*.bin")):
        for scope in (0, 7):
            c.create(f.read_bytes(), scope=scope, ledger_id=int(f.stem, 16))
    want = MetadataServiceSource(f"grpc://{target}").load()
    assert len(want) == 12
    monkeypatch.setattr(ms, "CHUNK", 5)   # three ranges over two scopes
    src = MetadataServiceSource(f"grpc://{target}")
    units = list(src.units())
    assert len(units) == 3 and units[0].split()[0] == "0" and units[-1].split()[1] == str(1 << 128)
    bounds = [tuple(map(int, u.split())) for u in units]
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))   # contiguous, no overlap
    stats, seg, near = stage(src, tmp_path)
    assert sum(s["ledgers"] for s in stats) == 12
    from bkdisk.audit.rows import to_signed
    assert segment_rows(seg) == sorted((to_signed(r[0]),) + r[1:] for r in expected_segments(want))
    assert known_rows(seg) == sorted((to_signed(sc), lg) for sc, lg in expected_known(want))
    view = bookie_metadata(near, C3_BOOKIES[0], src)
    assert LedgerId(7, 0x2A) in view and view[LedgerId(7, 0x2A)] == want[LedgerId(7, 0x2A)]


def test_a_bookie_s_view_of_a_big_folder_holds_only_its_own_ledgers(tmp_path):
    md = tmp_path / "md"
    write_folder(str(md), 3000, 1 << 20, ["bk-x", "bk-y", "bk-z"])   # empty closed ledgers: no entries anywhere
    for f in (C3 / "metadata").glob("*.bin"):
        (md / f.name).write_bytes(f.read_bytes())
    own, _ = load_metadata_dir(str(C3 / "metadata"))
    view, errors = bookie_metadata_dir(str(md), C3_BOOKIES[0])
    assert not errors
    assert set(view) == {lid for lid, m in own.items() if places_entries_on(m, C3_BOOKIES[0])}
    assert LedgerId(0, (1 << 20) + 5) in view and len(view) < 10


def test_fsck_streams_a_metadata_folder_and_finds_what_the_whole_folder_gives(tmp_path):
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    md = tmp_path / "md"
    write_folder(str(md), 2000, 1 << 20, list(C3_BOOKIES))
    for f in (C3 / "metadata").glob("*"):
        (md / f.name).write_bytes(f.read_bytes())
    whole, _ = load_metadata_dir(str(md))
    for b in C3_BOOKIES:
        dirs = discover(str(C3 / "bookies" / b))
        streamed = check_bookie(dirs, CheckOptions(metadata_dir=str(md)))
        held = check_bookie(dirs, CheckOptions(metadata=whole))
        assert [f.to_json() for f in streamed.findings] == [f.to_json() for f in held.findings], b
        assert len(streamed.context.metadata) < 10


def test_the_sqlite_generator_fills_the_service_store(tmp_path):
    write_sqlite(str(tmp_path / "g.db"), 2500, 100, ["a", "b", "c"], batch=1000)
    store = SqliteStore(tmp_path / "g.db")
    try:
        assert store.ledger_ids(0, None, 10_000) == list(range(100, 2600))
    finally:
        store.close()


def test_fsck_with_a_bookie_view_asks_it_about_a_ledger_it_does_not_hold(tmp_path):
    """A ledger whose metadata no longer names this bookie, with entries in its logs and no index:
    the view does not hold it, but the cross-check asks it and still calls the index lost, as the
    whole folder does (not garbage awaiting compaction)."""
    import dataclasses
    import shutil

    from bkdisk.bookie.layout import discover
    from bkdisk.formats.metadata import parse_metadata, serialize_metadata
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    root = tmp_path / "bk-1"
    shutil.copytree(C3 / "bookies" / "bk-1.rack-a", root, symlinks=True)
    (root / "ledgers0" / "current" / "0" / "2a" / "2a.idx").unlink()
    md = tmp_path / "md"
    shutil.copytree(C3 / "metadata", md)
    for f in md.glob("2a.*"):
        f.unlink()
    m = parse_metadata((C3 / "metadata" / "2a.bin").read_bytes())
    others = tuple((first, tuple(b if b != "bk-1.rack-a" else "bk-9.rack-z" for b in members))
                   for first, members in m.ensembles)
    (md / "2a.bin").write_bytes(serialize_metadata(dataclasses.replace(m, ensembles=others)))
    whole, _ = load_metadata_dir(str(md))
    dirs = discover(str(root))
    streamed = check_bookie(dirs, CheckOptions(metadata_dir=str(md)))
    held = check_bookie(dirs, CheckOptions(metadata=whole))
    assert LedgerId(0, 0x2A) not in streamed.context.metadata.near
    # pass 5's findings; a held ledger's password is what verifies HMAC digests, so pass 4 differs
    cross = [[f.to_json() for f in r.findings if f.to_json()["pass"] == 5] for r in (streamed, held)]
    assert cross[0] == cross[1]
    assert any(f["code"] == "LEDGER_NOT_INDEXED" and f["ledger"] == 0x2A for f in cross[0]), cross[0]


def expected_known(md) -> list[tuple]:
    """The ledgers left without a segment row."""
    with_rows = {(r[0], r[1]) for r in expected_segments(md)}
    return sorted((lid.scope, lid.ledger) for lid in md if (lid.scope, lid.ledger) not in with_rows)


def closed_at(last: int, ensembles) -> bytes:
    from bkdisk.formats.digests import DigestType
    from bkdisk.formats.ledger_metadata import LedgerMetadata
    from bkdisk.formats.metadata import serialize_metadata
    return serialize_metadata(LedgerMetadata(
        format_version=3, write_quorum=2, ensemble_size=2, ack_quorum=2, length=0 if last < 0 else 10 * (last + 1),
        last_entry_id=last, state="CLOSED", ensembles=ensembles, digest_type=DigestType.CRC32C.name,
        password=b"", ctime=1, custom_metadata=(), ctoken=0))


def test_closed_ledgers_get_rows_only_for_ensembles_that_hold_entries_and_empty_ones_only_their_key(tmp_path):
    md = tmp_path / "md"
    write_folder(str(md), 40, 1 << 20, ["bk-x", "bk-y", "bk-z"])   # empty and closed: a key each
    (md / "300.bin").write_bytes(closed_at(5, ((0, ("bk-1", "bk-2")), (4, ("bk-1", "bk-3")),
                                               (6, ("bk-4", "bk-5")), (9, ("bk-6", "bk-7")))))
    (md / "301.bin").write_bytes(closed_at(-1, ((0, ("bk-8", "bk-9")),)))
    want, _ = load_metadata_dir(str(md))
    stats, seg, near = stage(MetadataDirSource(str(md)), tmp_path / "s", per_chunk=7)
    rows = segment_rows(seg)
    assert rows == expected_segments(want)
    assert [r[5:7] for r in rows if r[1] == 0x300] == [(0, 4), (4, 6)]   # the next ensemble still ends a row
    assert known_rows(seg) == expected_known(want)
    assert len(known_rows(seg)) == 41 and (0, 0x301) in known_rows(seg)
    # Every bookie an ensemble names is named, those of ensembles without a row too.
    assert {b for s in stats for b in s["bookies"]} == {f"bk-{c}" for c in "123456789xyz"}
    assert sorted(os.listdir(near)) == ["bk-1", "bk-2", "bk-3"]


def test_a_ledger_known_only_by_its_key_is_no_orphan(tmp_path):
    from spark_session import shared_spark

    from bkdisk.audit import tables
    from bkdisk.audit.metadata_tables import KNOWN_ARROW, SEGMENT_ARROW
    spark = shared_spark()
    from pyspark.sql.pandas.types import from_arrow_schema
    replicas = spark.createDataFrame(
        [(0, lg, e, "bk-1", 100) for lg in (5, 6, 7) for e in range(3)],
        "ledger_scope long, ledger_id long, entry_id long, bookie_id string, size long")
    segments = spark.createDataFrame([(0, 5, "CLOSED", 2, 1, 0, None, ["bk-1"])], from_arrow_schema(SEGMENT_ARROW))
    known = spark.createDataFrame([(0, 6), (0, 9)], from_arrow_schema(KNOWN_ARROW))
    got = tables.orphans(replicas, segments, known).orderBy("ledger_id").collect()
    assert [(r.ledger_id, r.entries) for r in got] == [(7, 3)]
    alone = tables.orphans(replicas, segments).orderBy("ledger_id").select("ledger_id").collect()
    assert [r.ledger_id for r in alone] == [6, 7]


def test_the_driver_lists_names_by_form_and_a_task_drops_one_above_64_bits(tmp_path):
    d = tmp_path / "md"
    d.mkdir()
    for f in (C3 / "metadata").iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    too_big = "1" + "0" * 19 + ".bin"   # 2^76: names no ledger (a scoped ledger's name has 32 digits)
    (d / too_big).write_bytes(next((C3 / "metadata").glob("*.bin")).read_bytes())
    (d / "notes.txt").write_text("not metadata")
    src = MetadataDirSource(str(d))
    assert too_big in set(src.units()) and "notes.txt" not in set(src.units())
    md, _ = load_metadata_dir(str(C3 / "metadata"))
    stats, seg, _near = stage(src, tmp_path / "s")
    assert sum(s["ledgers"] for s in stats) == len(md) and not any(s["errors"] for s in stats)
    assert segment_rows(seg) == expected_segments(md)


def test_a_bookie_view_of_no_known_bookie_keeps_every_ledger(tmp_path):
    """A bookie whose cookies are gone (no id): every ledger of the service may be its, as the folder's
    view keeps them (the service's kept none: an HMAC entry went unverified)."""
    from metaservice_fixture import served

    from bkdisk.metaservice.bookie_view import bookie_view
    from bkdisk.metaservice.sqlite_store import SqliteStore
    files = sorted((C3 / "metadata").glob("*.bin"))
    with served(SqliteStore(tmp_path / "m.db")) as (client, port):
        for f in files:
            client.create(f.read_bytes(), ledger_id=int(f.stem, 16))
        kept = bookie_view(f"127.0.0.1:{port}", None)
        stranger = bookie_view(f"127.0.0.1:{port}", "bk-9.rack-z:3181")
    assert len(list(kept)) == len(files) > 0 and list(stranger) == []
