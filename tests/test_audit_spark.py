"""The Spark audit on a real local[2] session: the golden cluster-3 untouched and with faults, a
writer-built cluster of 6 bookies with faults checked against the ground truth of what was
written, repeatability, scan-disk files, and the disk-by-disk tables without Spark."""
from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from dataclasses import replace

import pytest
from spark_session import scan_hosts, shared_spark

from bkdisk.audit.job import FAULT_TABLES, read_tables, run_audit
from bkdisk.audit.metadata_source import MetadataDirSource
from bkdisk.audit.rows import DiskInput, RunInfo, scan_disk, split_tables
from bkdisk.bookie.cluster import metadata_file_name, sample_cluster, write_cluster
from bkdisk.bookie.metadata_dir import load_metadata_dir
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats.digests import DigestType
from bkdisk.formats.entry import package_entry
from bkdisk.formats.ids import to_signed64
from bkdisk.formats.index import unpack_location
from bkdisk.formats.paths import entry_log_name

pytestmark = pytest.mark.slow   # real Spark audits of whole clusters

BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
VOLATILE = {"run_id", "host", "scan_seconds"}


@pytest.fixture(scope="module")
def spark():
    return shared_spark()   # one session for every module that audits in-process


def audit(spark, disks, md_dir, out, scan_files=(), run_id="run-1", scans_per_host=None):
    run_audit(spark, disks, list(scan_files), MetadataDirSource(str(md_dir)), str(out), RunInfo.new(run_id),
              scans_per_host=scans_per_host)
    return read_tables(str(out))


def rows(table, drop=VOLATILE) -> list[tuple]:
    """A table as sorted tuples (lists made tuples), without the columns that vary by run."""
    def freeze(v):
        if isinstance(v, list):
            return tuple(freeze(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, freeze(x)) for k, x in v.items()))
        return v
    return sorted((tuple((k, freeze(v)) for k, v in r.items() if k not in drop) for r in table.to_pylist()),
                  key=repr)


@pytest.fixture(scope="module")
def golden3(golden, spark, tmp_path_factory):
    root = golden / "cluster-3"
    disks = [DiskInput(str(root / "bookies" / b)) for b in BOOKIES]
    out = tmp_path_factory.mktemp("audit") / "c3"
    return root, disks, audit(spark, disks, root / "metadata", out)


def test_untouched_cluster_3_has_every_replica_at_its_manifest_bookies(golden3):
    root, _disks, t = golden3
    man = json.loads((root / "manifest.json").read_text())
    where = defaultdict(set)
    for r in t["replicas"].to_pylist():
        # a DUMMY entry carries no digest: not verified (null); every other copy verified
        assert r["digest_ok"] is (None if r["digest_type"] == "DUMMY" else True), r
        where[(r["ledger_id"], r["entry_id"])].add(r["bookie_id"])
    assert dict(where) == {(int(e["ledger_id"]), e["entry_id"]): set(e["bookies"]) for e in man["entries"]}
    assert t["replicas"].num_rows == 720
    for name in FAULT_TABLES:
        assert t[name].num_rows == 0, (name, t[name].to_pylist())
    hist = t["replication_histogram"].to_pylist()
    assert sum(h["entries"] for h in hist) == 315 and all(h["copies_intact"] == h["copies_expected"] for h in hist)


def test_every_row_carries_the_tool_version_the_run_id_and_the_host_that_scanned_it(golden3):
    from bkdisk.audit.rows import tool_version
    _root, _disks, t = golden3
    for name in ("disks", "findings", "replicas"):
        assert t[name].num_rows > 0, name
        assert set(t[name]["run_id"].to_pylist()) == {"run-1"}, name
        assert set(t[name]["tool_version"].to_pylist()) == {tool_version()} != {"unknown"}, name
        assert set(t[name]["host"].to_pylist()) <= scan_hosts() and None not in t[name]["host"].to_pylist(), name
        assert None not in t[name]["bookie_id"].to_pylist(), name


def test_the_dbledgerstorage_bookie_is_scanned_from_its_entry_logs_and_the_report_says_so(golden3):
    root, _disks, t = golden3
    disks = {d["bookie_id"]: d for d in t["disks"].to_pylist()}
    assert {d["status"] for d in disks.values()} == {"ok"}
    db = disks["bk-3.rack-b"]
    assert db["storage_class"].startswith("DbLedgerStorage (replicas from its entry logs; ") and db["entries"] == 236
    # Its replicas are the entries of its entry logs, whether or not fsck read its RocksDB index.
    man = json.loads((root / "bookies" / "bk-3.rack-b" / "manifest.json").read_text())
    held = [(r["ledger_id"], r["entry_id"]) for r in t["replicas"].to_pylist() if r["bookie_id"] == "bk-3.rack-b"]
    assert sorted(held) == sorted((int(e["ledger_id"]), e["entry_id"]) for e in man["entries"])
    codes = [f["code"] for f in t["findings"].to_pylist() if f["bookie_id"] == "bk-3.rack-b"]
    assert ("STORAGE_CHECKS_NOT_RUN" in codes) is (not db["index_read"])


def test_the_same_input_gives_the_same_tables_and_the_disk_by_disk_rows(golden3, spark, tmp_path):
    root, disks, first = golden3
    # Again, one scan at a time on this host (the host-wide scan slots).
    again = audit(spark, disks, root / "metadata", tmp_path / "again", run_id="run-2", scans_per_host=1)
    for name in first:
        assert rows(again[name]) == rows(first[name]), name
    md, _ = load_metadata_dir(str(root / "metadata"))
    direct = defaultdict(list)
    for d in disks:
        for name, table in split_tables(scan_disk(d, md, RunInfo("x", "y", "z"))).items():
            direct[name] += rows(table, VOLATILE | {"tool_version"})
    for name, got in direct.items():
        assert rows(first[name], VOLATILE | {"tool_version"}) == sorted(got, key=repr), name


def test_scan_disk_files_and_disks_mixed_give_the_same_tables(golden3, spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    root, disks, first = golden3
    md, _ = load_metadata_dir(str(root / "metadata"))
    files = []
    for d in disks[:2]:
        f = tmp_path / (os.path.basename(d.path) + ".parquet")
        pq.write_table(pa.Table.from_batches(scan_disk(d, md, RunInfo.new("run-1"))), f)
        files.append(str(f))
    t = audit(spark, disks[2:], root / "metadata", tmp_path / "mixed", scan_files=files)
    for name in first:
        assert rows(t[name]) == rows(first[name]), name
    # The disk's task wrote its own file; Spark added the files' copies beside it.
    names = os.listdir(tmp_path / "mixed" / "replicas")
    assert "disk-00000.parquet" in names and not any(n.startswith(".disk-") for n in names)   # no temporary left
    disk_file = pq.read_table(tmp_path / "mixed" / "replicas" / "disk-00000.parquet")
    assert set(disk_file["bookie_id"].to_pylist()) == {BOOKIES[2]}
    replicas = first["replicas"]
    assert rows(disk_file) == rows(replicas.filter(pa.compute.equal(replicas["bookie_id"], BOOKIES[2])))


def flip_and_drop_metadata(src, root) -> tuple[dict, int, list[str]]:
    """A copy of cluster-3 at ``root`` with a flipped payload byte of ledger 16 on bk-1 and ledger 17's
    metadata removed; the cluster's manifest, the damaged entry and its write set."""
    shutil.copytree(src, root)
    man = json.loads((src / "manifest.json").read_text())
    # A flipped payload byte of ledger 16 (CRC32, 8-byte digest) on bk-1.
    bk1 = json.loads((src / "bookies" / "bk-1.rack-a" / "manifest.json").read_text())
    rec = next(r for r in bk1["entry_log_records"] if r["ledger_id"] == "16" and r["size"] > 60)
    log = root / "bookies" / "bk-1.rack-a" / rec["ledger_dir"] / "current" / rec["entry_log_file"]
    with open(log, "r+b") as f:
        f.seek(rec["offset"] + 4 + 32 + 8 + 5)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x01]))
    eid = rec["entry_id"]
    ws = next(e["write_set"] for e in man["entries"] if e["ledger_id"] == "16" and e["entry_id"] == eid)
    # Ledger 17's metadata removed: its entries on every bookie become orphans.
    for n in os.listdir(root / "metadata"):
        if n.startswith("11."):
            os.unlink(root / "metadata" / n)
    return man, eid, ws


def test_faults_in_a_copy_of_cluster_3_give_exactly_their_rows(golden, spark, tmp_path):
    root = tmp_path / "c3"
    man, eid, ws = flip_and_drop_metadata(golden / "cluster-3", root)
    disks = [DiskInput(str(root / "bookies" / b)) for b in BOOKIES]
    t = audit(spark, disks, root / "metadata", tmp_path / "out")
    others = sorted(b for b in ws if b != "bk-1.rack-a")
    assert rows(t["corrupt_copies"]) == rows_of([{"ledger_scope": 0, "ledger_id": 16, "entry_id": eid,
                                                  "bookie_id": "bk-1.rack-a", "reason": "digest mismatch",
                                                  "intact_on": others}])
    assert rows(t["under_replicated"]) == rows_of([{
        "ledger_scope": 0, "ledger_id": 16, "first_entry_id": eid, "last_entry_id": eid, "copies_expected": 2,
        "copies_intact": 1, "bookies_missing": ["bk-1.rack-a"], "bookies_with_copy": others,
        "bookies_not_audited": [], "bookies_not_indexed": []}])
    l17 = [e for e in man["entries"] if e["ledger_id"] == "17"]
    assert rows(t["orphans"]) == rows_of([{"ledger_scope": 0, "ledger_id": 17, "bookie_id": b, "entries": len(l17),
                                           "bytes": sum(e["stored_length"] + 4 for e in l17)} for b in BOOKIES])
    assert t["divergent"].num_rows == 0 and t["missing_ledgers"].num_rows == 0
    status = {d["bookie_id"]: d["status"] for d in t["disks"].to_pylist()}
    assert status["bk-1.rack-a"] == "errors"


def rows_of(dicts: list[dict]) -> list[tuple]:
    import pyarrow as pa
    return rows(pa.Table.from_pylist(dicts))


@pytest.fixture(scope="module")
def faulted(spark, tmp_path_factory):
    """A writer-built cluster of 6 bookies with one fault per bookie, and the truth of what remains."""
    base = tmp_path_factory.mktemp("cluster6")
    f = faulted_cluster6(base)
    return dict(f, t=audit(spark, f["disks"], f["w"].metadata_dir, base / "out"))


def faulted_cluster6(base) -> dict:
    """The fixture's cluster under ``base``, damaged, without its audit."""
    spec = sample_cluster(6, entries=40, max_payload=6000)
    w = write_cluster(spec, str(base))
    ids = sorted(w.bookie_roots)
    held = {b: {k for k, ws in w.placement.items() if b in ws} for b in ids}
    # 1. An entry log deleted on the bookie with the most logs.
    b_log = max(ids, key=lambda b: len(w.bookies[b].entry_log_files))
    gone_log = w.bookies[b_log].entry_log_files[0]
    os.unlink(gone_log)
    held[b_log] -= {k for k, loc in w.bookies[b_log].locations.items() if unpack_location(loc)[0] == 0}
    # 2. A ledger's data removed from a bookie its ensemble names (the disk rewritten without it).
    b_led = next(b for b in ids if b != b_log)
    led = next(l for l in spec.ledgers if any(k[0] == l.lid for k in held[b_led]))
    kept = [l for l in w.bookies[b_led].spec.ledgers if l.lid != led.lid]
    shutil.rmtree(w.bookie_roots[b_led])
    write_bookie(replace(w.bookies[b_led].spec, ledgers=kept), w.bookie_roots[b_led])
    held[b_led] = {k for k in held[b_led] if k[0] != led.lid}
    # 3. One copy rewritten with another payload and a valid digest (a divergent entry).
    b_div = next(b for b in ids if b not in (b_log, b_led))
    (lid, eid) = min(k for k in held[b_div] if len(spec_ledger(spec, k[0]).payloads[k[1]]) > 8)
    l = spec_ledger(spec, lid)
    new_payload = bytes(x ^ 0x5A for x in l.payloads[eid])
    e = package_entry(ledger_id=l.ledger_id, entry_id=eid, last_add_confirmed=eid - 1,
                      length=sum(len(p) for p in l.payloads[:eid + 1]), payload=new_payload,
                      digest_type=l.digest_type, password=l.password, scope_id=l.scope_id).to_bytes()
    log_id, pos = unpack_location(w.bookies[b_div].locations[(lid, eid)])
    path = next(p for p in w.bookies[b_div].entry_log_files if os.path.basename(p) == entry_log_name(log_id))
    assert len(e) == len(w.bookies[b_div].entries[(lid, eid)])
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(e)
    # 4. A disk that cannot be read (an empty mount point in its place).
    b_gone = next(b for b in ids if b not in (b_log, b_led, b_div))
    present = {b: set(held[b]) for b in ids}   # copies on disk; ``held``: intact copies
    # 5. A flipped payload byte (the entry's last) on the fifth bookie, in a ledger with a real digest.
    b_bad = next(b for b in ids if b not in (b_log, b_led, b_div, b_gone))
    bad = min(k for k in held[b_bad] if k[0] not in (led.lid, lid) and len(spec_ledger(spec, k[0]).payloads[k[1]]) > 8
              and spec_ledger(spec, k[0]).digest_type != DigestType.DUMMY)
    log_id, pos = unpack_location(w.bookies[b_bad].locations[bad])
    path = next(p for p in w.bookies[b_bad].entry_log_files if os.path.basename(p) == entry_log_name(log_id))
    with open(path, "r+b") as f:
        f.seek(pos + len(w.bookies[b_bad].entries[bad]) - 1)
        x = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([x[0] ^ 0x80]))
    held[b_bad] -= {bad}
    # 6. A disk whose scan fails after it gave the copies of its first entry logs: its last log is a
    #    FIFO. The disk is not audited, and the copies it gave before failing are not counted.
    b_fail = next(b for b in ids if b not in (b_log, b_led, b_div, b_gone, b_bad))
    logs = w.bookies[b_fail].entry_log_files
    assert len(logs) >= 2
    last = max(logs, key=lambda p: (os.path.dirname(os.path.dirname(p)), int(os.path.basename(p)[:-4], 16)))
    os.unlink(last)
    os.mkfifo(last)
    held[b_fail] = set()
    # 7. A ledger's metadata removed (another ledger, on disks of audited bookies): orphans.
    gone_md = next(l for l in spec.ledgers if l.lid not in (led.lid, lid, bad[0])
                   and any(k[0] == l.lid for b in ids if b not in (b_gone, b_fail) for k in present[b]))
    os.unlink(os.path.join(w.metadata_dir, metadata_file_name(gone_md.lid)))
    empty = base / "empty-mount"
    empty.mkdir()
    held[b_gone] = set()
    disks = [DiskInput(str(empty), b) if b == b_gone else DiskInput(w.bookie_roots[b]) for b in ids]
    return {"spec": spec, "w": w, "held": held, "present": present, "b_log": b_log, "b_led": b_led,
            "led": led, "b_div": b_div, "b_gone": b_gone, "div": (lid, eid), "disks": disks, "b_bad": b_bad,
            "bad": bad, "gone_md": gone_md, "b_fail": b_fail, "failed_log": last}


def spec_ledger(spec, lid):
    return next(l for l in spec.ledgers if l.lid == lid)


def test_under_replicated_ranges_are_exactly_the_entries_that_lost_copies(faulted):
    f = faulted
    spec, w, held, t = f["spec"], f["w"], f["held"], f["t"]
    audited = [b for b in held if b not in (f["b_gone"], f["b_fail"])]
    want = {}
    for l in spec.ledgers:
        if l is f["gone_md"]:
            continue   # no metadata: its entries are orphans, never under-replicated
        last = len(l.payloads) - 1 if l.state == "CLOSED" else max(
            (e for b in audited for (x, e) in held[b] if x == l.lid), default=-1)
        for e in range(last + 1):
            ws = w.placement[(l.lid, e)]
            missing = tuple(sorted(b for b in ws if (l.lid, e) not in held[b]))
            if missing:
                want[(l.lid.scope, l.lid.ledger, e)] = (missing, tuple(sorted(set(ws) - set(missing))), len(ws))
    got = {}
    for r in t["under_replicated"].to_pylist():
        assert r["copies_intact"] == len(r["bookies_with_copy"])
        assert r["bookies_not_audited"] == sorted({f["b_gone"], f["b_fail"]} & set(r["bookies_missing"]))
        for e in range(r["first_entry_id"], r["last_entry_id"] + 1):
            key = (r["ledger_scope"] % (1 << 64), r["ledger_id"], e)
            assert key not in got
            got[key] = (tuple(r["bookies_missing"]), tuple(r["bookies_with_copy"]), r["copies_expected"])
    assert got == want
    assert any(f["b_log"] in m for m, _c, _q in want.values()) and any(f["b_gone"] in m for m, _c, _q in want.values())
    assert any(f["b_fail"] in m for m, _c, _q in want.values())
    bad = f["bad"]
    assert f["b_bad"] in want[(bad[0].scope, bad[0].ledger, bad[1])][0]
    # Scoped (128-bit) ledgers are placed too: some of their entries lost copies with the unreadable disk.
    assert any(scope != 0 for scope, _l, _e in want)


def test_missing_ledgers_divergent_and_unreadable_disk_rows(faulted):
    f = faulted
    spec, w, held, t = f["spec"], f["w"], f["held"], f["t"]
    want_missing = set()
    for b in held:
        if b in (f["b_gone"], f["b_fail"]):
            continue
        for l in spec.ledgers:
            if l is f["gone_md"]:
                continue
            expected = [e for (x, e), ws in w.placement.items() if x == l.lid and b in ws]
            if expected and not any(x == l.lid for x, _e in held[b]):
                want_missing.add((l.lid.ledger, b))
    assert (f["led"].lid.ledger, f["b_led"]) in want_missing
    assert {(r["ledger_id"], r["bookie_id"]) for r in t["missing_ledgers"].to_pylist()} == want_missing
    lid, eid = f["div"]
    (div,) = t["divergent"].to_pylist()
    assert (div["ledger_scope"] % (1 << 64), div["ledger_id"], div["entry_id"]) == (lid.scope, lid.ledger, eid)
    by_fp = {c["payload_sha256"]: set(c["bookies"]) for c in div["copies"]}
    assert len(by_fp) == 2 and {f["b_div"]} in by_fp.values()
    assert set().union(*by_fp.values()) == {b for b in held if (lid, eid) in held[b]}
    disks = {d["bookie_id"]: d for d in t["disks"].to_pylist()}
    assert disks[f["b_gone"]]["status"] == "unreadable" and disks[f["b_log"]]["status"] == "errors"
    for b in (f["b_gone"], f["b_fail"]):
        assert b not in set(t["replicas"]["bookie_id"].to_pylist())
        assert b not in {x for r in t["under_replicated"].to_pylist() for x in r["bookies_with_copy"]}
    failed = disks[f["b_fail"]]
    assert failed["status"] == "not_audited" and f"{f['failed_log']}: not a regular file" in failed["error"]
    # (the failing disk did give replicas before it failed: the audit dropped them)
    alone = split_tables(scan_disk(DiskInput(f["w"].bookie_roots[f["b_fail"]]), {}, RunInfo("x", "y", "z")))
    assert alone["replicas"].num_rows > 0 and alone["disks"]["status"].to_pylist() == ["not_audited"]


def test_a_scan_disk_file_of_a_disk_not_audited_adds_none_of_its_copies(faulted, spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    f = faulted
    w = f["w"]
    md, _ = load_metadata_dir(w.metadata_dir)
    failing = tmp_path / "failing.parquet"
    pq.write_table(pa.Table.from_batches(scan_disk(DiskInput(w.bookie_roots[f["b_fail"]]), md, RunInfo.new("r"))),
                   failing)
    assert pq.read_table(failing).to_pydict()["table"].count("replicas") > 0   # it has copies, not counted
    good = next(b for b in w.bookie_roots if b not in (f["b_gone"], f["b_fail"]))
    t = audit(spark, [DiskInput(w.bookie_roots[good])], w.metadata_dir, tmp_path / "out", scan_files=[str(failing)])
    status = {d["bookie_id"]: d["status"] for d in t["disks"].to_pylist()}
    assert status[f["b_fail"]] == "not_audited" and status[good] in ("ok", "errors")
    assert set(t["replicas"]["bookie_id"].to_pylist()) == {good}


def test_the_flipped_byte_is_a_corrupt_copy_and_the_ledger_without_metadata_is_orphans(faulted):
    f = faulted
    w, held, present, t = f["w"], f["held"], f["present"], f["t"]
    audited = [b for b in held if b not in (f["b_gone"], f["b_fail"])]
    lid, eid = f["bad"]
    assert rows(t["corrupt_copies"]) == rows_of([{
        "ledger_scope": to_signed64(lid.scope), "ledger_id": lid.ledger, "entry_id": eid, "bookie_id": f["b_bad"],
        "reason": "digest mismatch", "intact_on": sorted(b for b in audited if (lid, eid) in held[b])}])
    gone = f["gone_md"].lid
    want = []
    for b in audited:
        mine = [k for k in present[b] if k[0] == gone]
        if mine:
            want.append({"ledger_scope": to_signed64(gone.scope), "ledger_id": gone.ledger, "bookie_id": b,
                         "entries": len(mine), "bytes": sum(len(w.bookies[b].entries[k]) + 4 for k in mine)})
    assert want and rows(t["orphans"]) == rows_of(want)


def test_a_bookie_named_by_metadata_but_never_given_is_not_audited(faulted, spark, tmp_path):
    f = faulted
    md_dir = f["w"].metadata_dir
    skipped = f["b_div"]
    disks = [d for d in f["disks"] if d.bookie_id != f["b_gone"] and os.path.basename(d.path) != skipped]
    t = audit(spark, disks, md_dir, tmp_path / "out")
    status = {d["bookie_id"]: d["status"] for d in t["disks"].to_pylist()}
    assert status[skipped] == "not_audited" and status[f["b_gone"]] == "not_audited"
    assert all(skipped not in r["bookies_with_copy"] for r in t["under_replicated"].to_pylist())
    assert skipped not in {r["bookie_id"] for r in t["missing_ledgers"].to_pylist()}


def test_a_writer_built_cluster_with_dbledgerstorage_bookies_audits_clean(spark, tmp_path):
    """Mixed storage kinds: 5 bookies, the last two DbLedgerStorage (writer-built RocksDB indexes);
    every replica at exactly its write set, every fault table empty, those disks read as such."""
    w = write_cluster(sample_cluster(5, entries=24, max_payload=1500, db_bookies=2), str(tmp_path / "c"))
    t = audit(spark, [DiskInput(r) for r in w.bookie_roots.values()], w.metadata_dir, tmp_path / "out")
    where = defaultdict(set)
    for r in t["replicas"].to_pylist():
        where[(r["ledger_scope"] & (2**64 - 1), r["ledger_id"] & (2**64 - 1), r["entry_id"])].add(
            r["bookie_id"])
    assert dict(where) == {(lid.scope, lid.ledger, e): set(ws) for (lid, e), ws in w.placement.items()}
    for name in FAULT_TABLES:
        assert t[name].num_rows == 0, (name, t[name].to_pylist())
    disks = {d["bookie_id"]: d for d in t["disks"].to_pylist()}
    assert {d["status"] for d in disks.values()} == {"ok"} and len(disks) == 5
    for bid in ("bk-4.rack-b", "bk-5.rack-a"):
        assert disks[bid]["storage_class"] == ("DbLedgerStorage (replicas from its entry logs; RocksDB index "
                                               "checked by fsck)") and disks[bid]["index_read"] is True
    assert disks["bk-1.rack-a"]["storage_class"] == "InterleavedLedgerStorage/SortedLedgerStorage"


def test_an_audit_without_any_copy_still_writes_the_replicas_table_with_its_columns(spark, tmp_path):
    from bkdisk.audit.rows import table_schema
    (tmp_path / "no-metadata").mkdir()
    t = audit(spark, [DiskInput(str(tmp_path / "no-such-bookie"))], tmp_path / "no-metadata", tmp_path / "out")
    assert [d["status"] for d in t["disks"].to_pylist()] == ["unreadable"]
    assert t["replicas"].num_rows == 0 and t["replicas"].schema == table_schema("replicas")
