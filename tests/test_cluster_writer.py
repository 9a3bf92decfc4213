"""The cluster writer places entries as BookKeeper does (checked against the real cluster-3) and
writes bookies whose entry logs hold exactly their write sets, with metadata that parses back."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from bkdisk.bookie.cluster import (
    ClusterLedger,
    ClusterSpec,
    sample_cluster,
    write_cluster,
    write_set,
)
from bkdisk.bookie.inventory import scan_bookie
from bkdisk.bookie.layout import bookie_id_of, discover
from bkdisk.bookie.metadata_dir import digest_plan, load_metadata_dir
from bkdisk.bookie.model import BookieSpec
from bkdisk.digests.kernels import DIGEST_BAD, DIGEST_OK
from bkdisk.formats.digests import DigestType
from bkdisk.formats.ids import LedgerId


def test_write_sets_match_every_entry_of_the_real_cluster_3(golden):
    m = json.loads((golden / "cluster-3" / "manifest.json").read_text())
    ledgers = {l["ledger_id"]: l for l in m["ledgers"]}
    assert len(m["entries"]) == 315
    for e in m["entries"]:
        l = ledgers[e["ledger_id"]]
        ens = tuple((x["first_entry_id"], tuple(x["bookies"])) for x in l["ensembles"])
        assert list(write_set(ens, l["write_quorum_size"], e["entry_id"])) == e["write_set"], e


def test_write_sets_match_the_metadata_bookkeeper_serialized(golden):
    md, errors = load_metadata_dir(str(golden / "cluster-3" / "metadata"))
    assert not errors
    m = json.loads((golden / "cluster-3" / "manifest.json").read_text())
    for e in m["entries"]:
        meta = md[LedgerId(0, int(e["ledger_id"]))]
        assert list(write_set(meta.ensembles, meta.write_quorum, e["entry_id"])) == e["write_set"]


def test_a_later_ensemble_takes_over_at_its_first_entry():
    ens = ((0, ("a", "b", "c")), (5, ("a", "d", "c")))
    assert write_set(ens, 2, 4) == ("b", "c")
    assert write_set(ens, 2, 5) == ("c", "a")
    assert write_set(ens, 2, 7) == ("d", "c")
    with pytest.raises(KeyError):
        write_set(((3, ("a",)),), 1, 2)


def _held(root: str, plan) -> dict[tuple[LedgerId, int], list[tuple[int, bool]]]:
    out = defaultdict(list)
    for rows in scan_bookie(discover(root), plan):
        assert not isinstance(rows, str), rows
        e, d = rows.entries, rows.digests
        for s, l, eid, ln, st in zip(e["scope"].tolist(), e["ledger"].tolist(), e["entry"].tolist(),
                                     e["length"].tolist(), d["status"].tolist()):
            assert st != DIGEST_BAD
            out[(LedgerId(s, l), eid)].append((ln, st == DIGEST_OK))
    return out


@pytest.mark.parametrize("db_bookies", [0, 2])
def test_a_written_cluster_holds_each_entry_on_exactly_its_write_set(tmp_path, db_bookies: int):
    spec = sample_cluster(5, entries=30, max_payload=800, db_bookies=db_bookies)
    assert any(l.scope_id for l in spec.ledgers) and any(len(l.ensembles) > 1 for l in spec.ledgers)
    assert {l.digest_type for l in spec.ledgers} == set(DigestType)
    w = write_cluster(spec, str(tmp_path))
    md, errors = load_metadata_dir(w.metadata_dir)
    assert not errors and set(md) == {l.lid for l in spec.ledgers}
    plan = digest_plan(md)
    found: dict[tuple[LedgerId, int], set[str]] = defaultdict(set)
    for bid, root in w.bookie_roots.items():
        assert bookie_id_of(discover(root)) == bid
        for key, copies in _held(root, plan).items():
            assert len(copies) == 1
            found[key].add(bid)
    assert {k: set(v) for k, v in w.placement.items()} == dict(found)
    for l in spec.ledgers:
        meta = md[l.lid]
        assert meta.state == l.state and meta.ensembles == l.ensembles and meta.write_quorum == l.write_quorum
        assert meta.effective_last_entry_id == (len(l.payloads) - 1 if l.state == "CLOSED" else -1)


def test_every_replica_carries_the_ledger_wide_length_and_a_valid_digest(tmp_path):
    a, b, c, d = (BookieSpec([], bookie_id=f"b{i}") for i in range(4))
    pays = [bytes([i]) * (i * 10) for i in range(12)]
    led = ClusterLedger(7, pays, ((0, ("b0", "b1", "b2")), (6, ("b3", "b1", "b2"))), 2, 2, DigestType.CRC32, b"x",
                        scope_id=0xABC)
    w = write_cluster(ClusterSpec([a, b, c, d], [led]), str(tmp_path))
    md, _ = load_metadata_dir(w.metadata_dir)
    lengths = {}
    for root in w.bookie_roots.values():
        for (lid, eid), copies in _held(root, digest_plan(md)).items():
            assert lid == LedgerId(0xABC, 7) and copies[0][1]
            lengths[eid] = copies[0][0]
    assert lengths == {e: sum(len(p) for p in pays[:e + 1]) for e in range(12)}
    # b0 left the ensemble at entry 6: it keeps what it got before.
    assert {e for (_l, e), ws in w.placement.items() if "b0" in ws} == {0, 2, 3, 5}
    assert {e for (_l, e), ws in w.placement.items() if "b3" in ws} == {6, 8, 9, 11}


def test_an_ensemble_naming_an_unknown_bookie_is_refused(tmp_path):
    led = ClusterLedger(1, [b"x"], ((0, ("b0", "zz")),), 2, 2)
    with pytest.raises(ValueError, match="zz"):
        write_cluster(ClusterSpec([BookieSpec([], bookie_id="b0")], [led]), str(tmp_path))


def test_dbledgerstorage_bookies_of_a_cluster_hold_their_entries_in_rocksdb_and_check_clean(tmp_path):
    """The last bookies of a mixed cluster are DbLedgerStorage: their locations and ledgers databases
    point at every copy they hold (fsck's RocksDB passes and the locations cross-check find nothing),
    and no scoped ledger is placed on them."""
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    from bkdisk.rocksdbfiles.dbindex import read_ledger_dir
    spec = sample_cluster(5, entries=30, max_payload=800, db_bookies=2)
    w = write_cluster(spec, str(tmp_path))
    db = {b.bookie_id for b in spec.bookies if b.storage == "rocksdb"}
    assert db == {"bk-4.rack-b", "bk-5.rack-a"}
    for bid, root in w.bookie_roots.items():
        dirs = discover(root)
        assert dirs.storage_kind == ("rocksdb" if bid in db else "index-files")
        report = check_bookie(dirs, CheckOptions(metadata_dir=w.metadata_dir))
        assert report.exit_code == 0 and [f.line() for f in report.findings if f.severity.value != "info"] == []
        if bid in db:
            assert not w.bookies[bid].index_files
            idx = read_ledger_dir(f"{dirs.ledger_dirs[0]}/current")
            held = {(lid.ledger, e) for (lid, e), ws in w.placement.items() if bid in ws}
            assert {(x.ledger_id, x.entry_id) for x in idx.locations} == held and not idx.problems
            assert report.stats["db_locations"] == len(held) > 0
    for l in spec.ledgers:
        if l.scope_id:
            assert not {m for _f, ms in l.ensembles for m in ms} & db


def test_a_dbledgerstorage_bookie_takes_one_ledger_dir_and_scope_0_ledgers(tmp_path):
    from bkdisk.bookie.model import LedgerSpec
    from bkdisk.bookie.writer import write_bookie
    with pytest.raises(ValueError, match="one ledger dir"):
        write_bookie(BookieSpec([], storage="rocksdb", ledger_dirs=["a", "b"]), str(tmp_path / "two"))
    scoped = LedgerSpec(7, [b"x"], DigestType.CRC32C, b"", 5)
    with pytest.raises(ValueError, match="64-bit id"):
        write_bookie(BookieSpec([scoped], storage="rocksdb"), str(tmp_path / "scoped"))
