"""The per-disk task without Spark: one disk scanned in-process gives the disks, findings and
replicas rows, the same rows `bkdisk scan-disk` writes; a disk that cannot be read is one row."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bkdisk.audit.cli import AuditUsageError, read_disks_file
from bkdisk.audit.rows import TASK_SCHEMA, DiskInput, RunInfo, iter_disk, scan_disk, split_tables
from bkdisk.bookie.inventory import scan_bookie
from bkdisk.bookie.layout import discover
from bkdisk.bookie.metadata_dir import digest_plan, load_metadata_dir
from bkdisk.fsck.api import check_bookie
from bkdisk.fsck.context import CheckOptions

BKDISK = str(Path(sys.executable).with_name("bkdisk"))
BOOKIES = ("bk-1.rack-a", "bk-2.rack-a", "bk-3.rack-b")
RUN = RunInfo("run-1", "0.1.0", "host-a")


@pytest.fixture(scope="module")
def cluster3(golden):
    md, errors = load_metadata_dir(str(golden / "cluster-3" / "metadata"))
    assert not errors
    return golden / "cluster-3", md


@pytest.mark.parametrize("bookie", BOOKIES)
def test_a_disk_gives_its_manifest_replicas_and_fsck_findings(cluster3, bookie):
    root, md = cluster3
    t = split_tables(scan_disk(DiskInput(str(root / "bookies" / bookie)), md, RUN))
    man = json.loads((root / "bookies" / bookie / "manifest.json").read_text())
    got = {(r["ledger_id"], r["entry_id"]): (r["payload_sha256"], r["digest_ok"]) for r in t["replicas"].to_pylist()}
    # a DUMMY entry carries no digest: not verified (null); every other copy verified
    want = {(int(e["ledger_id"]), e["entry_id"]): (e["payload_sha256"], None if e["digest_type"] == "DUMMY" else True)
            for e in man["entries"]}
    assert got == want and t["replicas"].num_rows == len(want)
    (disk,) = t["disks"].to_pylist()
    report = check_bookie(discover(str(root / "bookies" / bookie)), CheckOptions(metadata=md))
    assert disk["bookie_id"] == bookie and disk["status"] == "ok" and disk["fsck_exit_code"] == report.exit_code
    assert disk["entries"] == len(want)
    assert sorted(r["code"] for r in t["findings"].to_pylist()) == sorted(f.code for f in report.findings)
    for table in t.values():
        assert set(table["run_id"].to_pylist()) == {"run-1"} and set(table["host"].to_pylist()) == {"host-a"}
        assert set(table["tool_version"].to_pylist()) == {"0.1.0"}
    # The index counts as read when fsck's index passes ran (DbLedgerStorage: over its RocksDB databases).
    index_ran = not any(p.skipped for p in report.passes if p.number in (2, 3, 5))
    assert disk["index_read"] is index_ran
    if man["storage_class"].endswith("DbLedgerStorage"):
        assert disk["storage_class"] == ("DbLedgerStorage (replicas from its entry logs; RocksDB index "
                                         + ("checked by fsck)" if index_ran else "not read)"))
    else:
        assert disk["index_read"] is True and disk["storage_class"] == "InterleavedLedgerStorage/SortedLedgerStorage"


def _inventory_and_replicas(dirs, md) -> tuple[list, list]:
    inv = [r for rows in scan_bookie(dirs, digest_plan(md), payload_hash="sha256") for r in rows.arrow().to_pylist()]
    t = split_tables(scan_disk(DiskInput(dirs.root), md, RUN))["replicas"].to_pylist()
    return ([(r["ledger"], r["entry"], r["offset"], r["log_id"], r["ledger_dir"], r["payload_sha256"], r["digest_ok"],
              r["digest_type"], r["size"], r["payload_len"]) for r in inv],
            [(r["ledger_id"], r["entry_id"], r["offset"], r["log_id"], r["ledger_dir"], r["payload_sha256"],
              r["digest_ok"], r["digest_type"], r["size"], r["payload_len"]) for r in t])


@pytest.mark.parametrize("bookie", BOOKIES)
def test_replica_rows_are_the_inventory_rows(cluster3, bookie):
    # The task takes its replicas from fsck's scan of each entry log: the rows the inventory gives.
    root, md = cluster3
    inv, replicas = _inventory_and_replicas(discover(str(root / "bookies" / bookie)), md)
    assert len(inv) > 0 and replicas == inv


def test_replica_rows_of_a_damaged_disk_are_the_inventory_rows(tmp_path):
    from fsck_helpers import flip_payload, make_disk
    disk = make_disk(str(tmp_path))
    md, errors = load_metadata_dir(disk.md_dir)
    assert not errors
    lid = next(iter(sorted(md)))
    flip_payload(disk.written, lid, 1)
    del md[lid]   # no metadata: its digest type is sniffed
    inv, replicas = _inventory_and_replicas(disk.dirs, md)
    assert replicas == inv
    bad = [r for r in replicas if r[6] is False]
    assert [(r[0], r[1]) for r in bad] == [(lid.ledger, 1)]


def test_the_task_reads_each_entry_log_once(cluster3, monkeypatch):
    import bkdisk.bookie.inventory
    import bkdisk.fsck.scans
    root, md = cluster3
    dirs = discover(str(root / "bookies" / "bk-1.rack-a"))
    scanned: list[str] = []
    for module in (bkdisk.fsck.scans, bkdisk.bookie.inventory):
        real = module.scan_entry_log

        def counted(path, *a, _real=real, **kw):
            scanned.append(os.fspath(path))
            return _real(path, *a, **kw)
        monkeypatch.setattr(module, "scan_entry_log", counted)
    # In this process (guard=False): the scan of a guarded task runs in a forked child, out of reach of the count.
    t = split_tables(list(iter_disk(DiskInput(dirs.root), md, RUN, guard=False)))
    logs = sorted(os.path.join(d, "current", n) for d in dirs.ledger_dirs
                  for n in os.listdir(os.path.join(d, "current")) if n.endswith(".log"))
    assert len(logs) > 0 and sorted(scanned) == logs
    assert t["replicas"].num_rows > 0


def test_an_entry_log_that_cannot_be_read_leaves_the_disk_not_audited(tmp_path, cluster3):
    import shutil
    root, md = cluster3
    disk = tmp_path / "bk-1"
    shutil.copytree(root / "bookies" / "bk-1.rack-a", disk, symlinks=True)
    log = sorted(disk.rglob("*.log"))[0]
    log.unlink()
    os.mkfifo(log)   # opened without blocking and refused: not a regular file
    t = split_tables(scan_disk(DiskInput(str(disk)), md, RUN))
    (row,) = t["disks"].to_pylist()
    assert row["status"] == "not_audited" and str(log) in row["error"] and "not a regular file" in row["error"]


def test_a_disk_that_cannot_be_read_is_one_unreadable_row(tmp_path, cluster3):
    _root, md = cluster3
    (tmp_path / "empty").mkdir()
    batches = scan_disk(DiskInput(str(tmp_path / "empty"), "bk-9"), md, RUN)
    t = split_tables(batches)
    (disk,) = t["disks"].to_pylist()
    assert disk["status"] == "unreadable" and disk["bookie_id"] == "bk-9" and str(tmp_path) in disk["error"]
    assert t["replicas"].num_rows == 0 and t["findings"].num_rows == 0


def test_scan_disk_writes_the_task_rows_to_one_parquet_file(tmp_path, cluster3):
    root, md = cluster3
    disk = str(root / "bookies" / "bk-1.rack-a")
    out = tmp_path / "bk1.parquet"
    p = subprocess.run([BKDISK, "scan-disk", disk, "--out", str(out), "--metadata-dir",
                        str(root / "metadata"), "--run-id", "run-1"],
                       capture_output=True, text=True, check=False, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "bk-1.rack-a: ok, 244 entries" in p.stderr
    f = pq.read_table(out)
    assert f.schema.equals(TASK_SCHEMA)
    want = split_tables(scan_disk(DiskInput(disk), md, RunInfo("run-1", RUN.tool_version, f["host"][0].as_py())))
    got = split_tables(f)
    for name in ("replicas", "findings"):
        assert got[name].equals(want[name])
    assert got["disks"].drop(["scan_seconds"]).equals(want["disks"].drop(["scan_seconds"]))


def test_scan_disk_at_a_tiny_memory_limit_writes_the_same_rows_in_bounded_row_groups(tmp_path, cluster3):
    """The replicas go from the scan's process to the file in batches of a share of --memory-limit:
    each a row group of the file, and the rows those of a scan with the default limit."""
    from bkdisk.audit.rows import replica_batch_rows
    from bkdisk.diskio.spill import MemoryLimit
    root, _md = cluster3
    disk = str(root / "bookies" / "bk-1.rack-a")
    files = []
    for extra in ([], ["--memory-limit", "1"]):
        files.append(tmp_path / f"bk1{len(extra)}.parquet")
        p = subprocess.run([BKDISK, "scan-disk", disk, "--out", str(files[-1]), "--metadata-dir",
                            str(root / "metadata"), "--run-id", "run-1", *extra],
                           capture_output=True, text=True, check=False, timeout=300)
        assert p.returncode == 0, p.stderr
    whole, tiny = (split_tables(pq.read_table(f)) for f in files)
    for name in ("replicas", "findings", "space"):
        assert tiny[name].equals(whole[name])
    assert tiny["disks"].drop(["scan_seconds"]).equals(whole["disks"].drop(["scan_seconds"]))
    meta = pq.ParquetFile(files[1]).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    most = replica_batch_rows(MemoryLimit(1))
    assert max(groups) <= most < whole["replicas"].num_rows
    assert pq.ParquetFile(files[0]).metadata.num_row_groups < meta.num_row_groups


def test_scan_disk_of_a_missing_disk_says_so_and_exits_4(tmp_path):
    out = tmp_path / "x.parquet"
    p = subprocess.run([BKDISK, "scan-disk", str(tmp_path / "nope"), "--out", str(out)],
                       capture_output=True, text=True, check=False, timeout=300)
    assert p.returncode == 4 and "unreadable" in p.stderr
    (disk,) = split_tables(pq.read_table(out))["disks"].to_pylist()
    assert disk["status"] == "unreadable" and f"unreadable ({disk['error']})" in p.stderr


def test_scan_disk_without_metadata_says_how_many_copies_it_could_not_verify(tmp_path, cluster3):
    root, md = cluster3
    disk = str(root / "bookies" / "bk-2.rack-a")
    replicas = split_tables(scan_disk(DiskInput(disk), {}, RUN))["replicas"]
    unverified = replicas["digest_ok"].null_count
    assert unverified > 0   # bk-2 holds copies of an HMAC ledger: its password is in the metadata only
    for extra, warned in (([], True), (["--metadata-dir", str(root / "metadata")], False)):
        p = subprocess.run([BKDISK, "scan-disk", disk, "--out", str(tmp_path / "x.parquet"), *extra],
                           capture_output=True, text=True, check=False, timeout=300)
        assert p.returncode == 0, p.stderr
        assert (f"{disk}: {unverified} copies not verified" in p.stderr) is warned, p.stderr


def test_disks_file_takes_paths_tagged_paths_and_hosts(tmp_path):
    f = tmp_path / "disks.tsv"
    f.write_text("# cluster A\n/mnt/a\n\nbk-2\t/mnt/b\nbk-3\t/mnt/c\thost-3.example\n")
    assert read_disks_file(str(f)) == [DiskInput("/mnt/a"), DiskInput("/mnt/b", "bk-2"),
                                       DiskInput("/mnt/c", "bk-3", "host-3.example")]
    for bad in ("a\tb\tc\td\n", "bk-1\t/mnt/a\t\n", "bk-1\t\thost\n"):
        f.write_text(bad)
        with pytest.raises(AuditUsageError, match="line 1: expected 'path', 'bookie_id<TAB>path' or"):
            read_disks_file(str(f))


@pytest.mark.parametrize("argv, message", [
    (["/x", "--metadata-dir", "/nonexistent-md"], "/nonexistent-md: cannot list the metadata folder"),
    (["--metadata-dir", "{md}"], "nothing to audit"),
    (["/x", "--metadata-dir", "{md}", "--scan-files", "/nonexistent.parquet"], "/nonexistent.parquet: no such"),
])
def test_audit_input_errors_are_one_line_and_exit_8_before_spark_starts(argv, message, cluster3, tmp_path):
    root, _md = cluster3
    out = tmp_path / "out"
    argv = [a.replace("{md}", str(root / "metadata")) for a in argv] + ["--out", str(out)]
    p = subprocess.run([BKDISK, "audit", *argv], capture_output=True, text=True, check=False, timeout=120)
    assert p.returncode == 8 and p.stderr.splitlines() == [f"bkdisk: {p.stderr.split('bkdisk: ')[1].strip()}"]
    assert message in p.stderr and not out.exists()


def test_audit_refuses_an_output_folder_that_is_not_an_audits(cluster3, tmp_path):
    root, _md = cluster3
    (tmp_path / "keep.txt").write_text("precious")
    p = subprocess.run([BKDISK, "audit", str(root / "bookies" / "bk-1.rack-a"), "--metadata-dir",
                        str(root / "metadata"), "--out", str(tmp_path)],
                       capture_output=True, text=True, check=False, timeout=120)
    assert p.returncode == 8 and "is not a previous audit's output" in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["keep.txt"]


def test_tasks_move_an_unwritable_numba_cache_to_a_writable_folder(monkeypatch, tmp_path):
    from bkdisk.audit.job import numba_cache_writable
    monkeypatch.setenv("BKDISK_NUMBA_CACHE_DIR", "")   # (undone at the end: it is set here)
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/proc/not-writable")
    chosen = numba_cache_writable()
    assert chosen and chosen != "/proc/not-writable" and os.access(chosen, os.W_OK)
    assert os.environ["BKDISK_NUMBA_CACHE_DIR"] == chosen
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BKDISK_NUMBA_CACHE_DIR")
    assert numba_cache_writable() == str(tmp_path / "cache") and (tmp_path / "cache").is_dir()


def test_tasks_keep_numbas_cache_beside_a_writable_install(monkeypatch):
    """The cache warm-up filled beside the package: a task that moved it to a folder of its own would
    compile every kernel again, and pass that folder on to every process it starts."""
    import bkdisk.entrylogs
    from bkdisk.audit.job import numba_cache_writable
    monkeypatch.setenv("BKDISK_NUMBA_CACHE_DIR", "")   # (undone at the end: it is set here)
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    assert os.access(os.path.dirname(bkdisk.entrylogs.__file__), os.W_OK)   # (this checkout)
    # As installed: the project's folders are bkdisk's subpackages, none a module of its own on the path.
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "entrylogs"))])
    assert numba_cache_writable() is None
    assert not os.environ.get("BKDISK_NUMBA_CACHE_DIR")


def test_scan_slots_bound_the_disks_read_at_once_on_a_host(tmp_path):
    import os as _os

    from bkdisk.audit.job import try_scan_slot
    a = try_scan_slot(2, str(tmp_path))
    b = try_scan_slot(2, str(tmp_path))
    assert a is not None and b is not None
    assert try_scan_slot(2, str(tmp_path)) is None      # a third scan waits for a slot
    _os.close(a)
    c = try_scan_slot(2, str(tmp_path))
    assert c is not None and try_scan_slot(2, str(tmp_path)) is None
    # Another process (another executor of the host) sees the same slots taken.
    probe = f"from bkdisk.audit.job import try_scan_slot; print(try_scan_slot(2, {str(tmp_path)!r}))"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert p.stdout.strip() == "None"
    _os.close(b)
    _os.close(c)
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert p.stdout.strip() != "None"


def test_a_disk_given_by_its_bk_server_conf_gives_the_same_replicas(cluster3, tmp_path):
    root, md = cluster3
    bk = root / "bookies" / "bk-1.rack-a"
    conf = tmp_path / "bk_server.conf"
    conf.write_text(f"journalDirectories={bk / 'journal'}\nledgerDirectories={bk / 'ledgers0'},{bk / 'ledgers1'}\n")
    by_conf = split_tables(scan_disk(DiskInput(str(conf)), md, RUN))
    by_root = split_tables(scan_disk(DiskInput(str(bk)), md, RUN))
    assert by_conf["replicas"].num_rows == 244 and by_conf["replicas"].equals(by_root["replicas"])
    (disk,) = by_conf["disks"].to_pylist()
    assert disk["path"] == str(conf) and disk["bookie_id"] == "bk-1.rack-a" and disk["status"] in ("ok", "errors")


def test_a_foreign_or_damaged_scan_file_is_refused_before_spark(tmp_path, cluster3):
    import pyarrow as pa
    root, _md = cluster3
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"foo": [1, 2]}), foreign)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet at all")
    two = tmp_path / "two.parquet"
    one = scan_disk(DiskInput(str(root / "bookies" / "bk-1.rack-a")), _md, RUN)
    pq.write_table(pa.Table.from_batches(one + one, TASK_SCHEMA), two)
    for f, words in ((foreign, "not a bkdisk scan-disk file: expected its column(s) table"),
                     (garbage, "not a readable Parquet file"), (two, "expected the rows of one disk"),
                     (tmp_path / "none.parquet", "no such scan-disk file")):
        p = subprocess.run([BKDISK, "audit", "--scan-files", str(f), "--metadata-dir", str(root / "metadata"),
                            "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
        assert p.returncode == 8 and p.stderr.count("\n") == 1, p.stderr[-2000:]
        assert p.stderr.startswith(f"bkdisk: {f}: ") and words in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_a_previous_audits_tables_and_reports_go_before_a_new_run(tmp_path):
    from bkdisk.audit.cli import MARKER, prepare_out
    out = tmp_path / "out"
    (out / "replicas").mkdir(parents=True)
    (out / "replicas" / "part-0.parquet").write_bytes(b"old")
    for name in (MARKER, "summary.json", "report.html", "notes.txt"):
        (out / name).write_text("old")
    prepare_out(str(out))
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "notes.txt"])
    other = tmp_path / "other"
    other.mkdir()
    (other / "summary.json").write_text("someone else's")
    with pytest.raises(AuditUsageError, match="not a previous audit's output"):
        prepare_out(str(other))
    assert (other / "summary.json").read_text() == "someone else's"


def test_a_disk_named_otherwise_than_its_cookie_or_not_named_at_all_is_not_audited(tmp_path, cluster3):
    import shutil
    root, md = cluster3
    disk = str(root / "bookies" / "bk-1.rack-a")
    t = split_tables(scan_disk(DiskInput(disk, "bk-9"), md, RUN))
    (row,) = t["disks"].to_pylist()
    assert (row["status"], row["bookie_id"]) == ("not_audited", "bk-9")
    assert row["error"] == "given as bookie bk-9, its cookie says bk-1.rack-a"
    assert t["replicas"].num_rows == 0
    # the same name as the cookie's is fine
    assert split_tables(scan_disk(DiskInput(disk, "bk-1.rack-a"), md, RUN))["disks"]["status"].to_pylist() == ["ok"]
    bare = tmp_path / "bare"
    shutil.copytree(disk, bare, symlinks=True)
    for cookie in bare.rglob("VERSION"):
        cookie.unlink()
    t = split_tables(scan_disk(DiskInput(str(bare)), md, RUN))
    (row,) = t["disks"].to_pylist()
    assert row["status"] == "not_audited" and row["bookie_id"] is None and row["error"].startswith("no bookie id")
    assert t["replicas"].num_rows == 0
    tagged = split_tables(scan_disk(DiskInput(str(bare), "bk-1.rack-a"), md, RUN))
    # named by the operator, it is audited: fsck reports the missing cookies, its copies all count
    assert tagged["disks"]["status"].to_pylist() == ["errors"] and tagged["replicas"].num_rows == 244


def test_a_disk_scanned_without_space_rows_gives_the_same_other_rows(cluster3, monkeypatch):
    import bkdisk.audit.rows as rows
    root, md = cluster3
    disk = DiskInput(str(root / "bookies" / "bk-1.rack-a"))
    full = split_tables(list(iter_disk(disk, md, RUN, guard=False)))
    accounted: list[str] = []
    real = rows.space_rows
    monkeypatch.setattr(rows, "space_rows", lambda *a, **k: (accounted.append("space"), real(*a, **k))[1])
    bare = split_tables(list(iter_disk(disk, md, RUN, guard=False, space=False)))
    # a salvage's disk task: a row a ledger that nobody reads is neither computed nor held
    assert full["space"].num_rows > 0 and bare["space"].num_rows == 0 and accounted == []
    for name in ("disks", "findings", "replicas"):
        assert bare[name].drop_columns(["scan_seconds"] if name == "disks" else []).equals(
            full[name].drop_columns(["scan_seconds"] if name == "disks" else [])), name


def test_a_disk_s_space_rows_go_in_parts_of_bounded_rows_the_same_rows(cluster3, monkeypatch):
    import bkdisk.audit.rows as rows
    root, md = cluster3
    disk = DiskInput(str(root / "bookies" / "bk-1.rack-a"))
    whole = split_tables(list(iter_disk(disk, md, RUN, guard=False)))["space"]
    assert whole.num_rows > 5
    real = rows.space_rows
    monkeypatch.setattr(rows, "space_rows", lambda *a, **k: real(*a, **k, part_rows=2))
    batches = [b for b in iter_disk(disk, md, RUN, guard=False) if b.num_rows and b["table"][0].as_py() == "space"]
    # a disk of a million ledgers builds a part of its rows at a time, never one list of all of them
    assert [b.num_rows for b in batches] == [2] * (whole.num_rows // 2) + [whole.num_rows % 2] * (whole.num_rows % 2)
    parted = split_tables(batches)["space"]
    assert parted.equals(whole)


def test_a_disk_s_findings_go_in_batches_of_bounded_rows_the_same_rows(cluster3, monkeypatch):
    """(against no metadata every ledger the disk holds is an orphan: a disk of a million of them has as many
    findings, made into rows a batch at a time)"""
    import bkdisk.audit.rows as rows
    root, _md = cluster3
    disk = DiskInput(str(root / "bookies" / "bk-1.rack-a"))
    whole = split_tables(list(iter_disk(disk, {}, RUN, guard=False)))["findings"]
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    from bkdisk.fsck.context import CheckOptions
    report = check_bookie(discover(disk.path), CheckOptions(metadata={}))
    report.close()
    codes = whole["code"].to_pylist()   # (the check's findings, each a row)
    assert codes == [str(f.code) for f in report.findings] and "ORPHAN_LEDGER" in codes
    assert whole.num_rows % 5   # (the last batch a short one)
    monkeypatch.setattr(rows, "FINDINGS_BATCH", 5)
    batches = [b for b in iter_disk(disk, {}, RUN, guard=False) if b.num_rows and b["table"][0].as_py() == "findings"]
    assert [b.num_rows for b in batches] == [5] * (whole.num_rows // 5) + [whole.num_rows % 5]
    assert split_tables(batches)["findings"].equals(whole)



def test_a_disk_s_findings_are_let_go_before_its_keys_and_space_and_its_row_still_counts_them(cluster3, tmp_path,
                                                                                              monkeypatch):
    """(a disk of a million orphan ledgers holds as many Finding objects: the ledger keys and the space
    accounting that follow them must not stand on them)"""
    import gc
    import shutil

    import bkdisk.audit.rows as rows
    from bkdisk.fsck.findings import Finding
    root, md = cluster3
    disk_dir = tmp_path / "bk-1"
    shutil.copytree(root / "bookies" / "bk-1.rack-a", disk_dir)
    man = json.loads((disk_dir / "manifest.json").read_text())
    rec = next(r for r in man["entry_log_records"] if r["size"] > 80)
    log = disk_dir / rec["ledger_dir"] / "current" / rec["entry_log_file"]
    data = bytearray(log.read_bytes())
    data[rec["offset"] + rec["size"] - 2] ^= 0x10   # (a payload byte: its digest fails, an error)
    log.write_bytes(bytes(data))
    alive = []
    real_keys, real_space = rows.key_batches, rows.space_rows

    def live_findings() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, Finding))

    def keys(*a, **k):
        alive.append(("keys", live_findings()))
        return real_keys(*a, **k)

    def space(*a, **k):
        alive.append(("space", live_findings()))
        return real_space(*a, **k)
    monkeypatch.setattr(rows, "key_batches", keys)
    monkeypatch.setattr(rows, "space_rows", space)
    tables = split_tables(list(iter_disk(DiskInput(str(disk_dir)), md, RUN, guard=False)))
    assert "DIGEST_MISMATCH" in tables["findings"]["code"].to_pylist()
    assert alive == [("keys", 0), ("space", 0)]
    d = tables["disks"].to_pylist()[0]
    assert d["status"] == "errors" and d["fsck_exit_code"] == 4 and tables["space"].num_rows > 0
