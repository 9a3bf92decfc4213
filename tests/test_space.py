"""``bkdisk space`` on copies of the golden bookies BookKeeper wrote: every log's live and garbage
bytes against the manifest's entry records, each garbage-collector action, OPEN and over-replicated
ledgers, Pulsar topics from custom metadata, DbLedgerStorage's ledgers index and RocksDB files."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import GOLDEN, REPO, golden_copy
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.formats.metadata import parse_metadata, serialize_metadata
from bkdisk.space_cli import space

CORPORA = ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage", "dbstorage-v6-bookieid"]
SCHEMA = REPO / "specs" / "schemas" / "space.schema.json"


def run(args: list[str], ok=(0,)) -> list[dict]:
    r = CliRunner().invoke(space, args + ["--json"])
    assert r.exit_code in ok, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for row in rows:
        validator.validate(row)
    return rows


def kind(rows: list[dict], k: str) -> list[dict]:
    return [r for r in rows if r["kind"] == k]


def remove_metadata(root: Path, ledgers: set[int]) -> None:
    md = root / "metadata"
    for p in md.iterdir():
        if int(p.name.split(".")[0], 16) in ledgers:
            p.unlink()


def expected_bytes(manifest: dict, garbage: set[int]) -> dict[tuple[str, int], tuple[int, int]]:
    """(ledger dir, log id) -> (live, garbage) entry bytes: each entry record's size plus its 4-byte length."""
    out: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for r in manifest["entry_log_records"]:
        key = (r["ledger_dir"], int(r["entry_log_file"][:-4], 16))
        out[key][int(r["ledger_id"]) in garbage] += r["size"] + 4
    return {k: tuple(v) for k, v in out.items()}


def ledger_ids(manifest: dict) -> list[int]:
    return sorted(int(x["ledger_id"]) for x in manifest["ledgers"])


@pytest.mark.parametrize("scan", [False, True], ids=["ledgers-map", "scan"])
@pytest.mark.parametrize("corpus", CORPORA)
def test_live_and_garbage_bytes_equal_the_manifests_entry_records(tmp_path, corpus, scan):
    root = golden_copy(tmp_path, corpus)
    manifest = json.loads((root / "manifest.json").read_text())
    gone = set(ledger_ids(manifest)[::2])   # every other ledger's metadata removed
    remove_metadata(root, gone)
    rows = run([str(root), "--metadata-dir", str(root / "metadata")] + (["--scan"] if scan else []))
    want = expected_bytes(manifest, gone)
    logs = kind(rows, "log")
    written = {(r["ledger_dir"], r["log_id"]): (r["live_bytes"], r["garbage_bytes"]) for r in logs if r["size"]}
    assert written == {k: v for k, v in want.items()}
    for r in logs:
        total = r["live_bytes"] + r["garbage_bytes"]
        assert r["usage"] == (r["live_bytes"] / total if total else 0.0)
    by_ledger = {r["ledger"]: r for r in kind(rows, "ledger")}
    for lid in ledger_ids(manifest):
        assert by_ledger[str(lid)]["state"] == ("deleted" if lid in gone else "live")
    summary = kind(rows, "summary")[0]
    assert summary["garbage_bytes"] == sum(g for _l, g in want.values()) > 0
    assert summary["metadata"].endswith(str(root / "metadata"))


def test_without_metadata_the_bookies_index_decides_and_says_so(tmp_path):
    root = golden_copy(tmp_path, "interleaved-v6-hostport")
    manifest = json.loads((root / "manifest.json").read_text())
    idx = next(root.glob("ledgers*/current/0/ff/ff.idx"))
    idx.unlink()   # ledger 255's index gone
    rows = run([str(root)])
    want = expected_bytes(manifest, {255})
    assert {(r["ledger_dir"], r["log_id"]): (r["live_bytes"], r["garbage_bytes"])
            for r in kind(rows, "log") if r["size"]} == want
    assert {r["ledger"]: r["state"] for r in kind(rows, "ledger")}["255"] == "not-indexed"
    s = kind(rows, "summary")[0]
    assert s["metadata"] is None and s["liveness"].startswith("no ledger metadata given")
    text = CliRunner().invoke(space, [str(root)]).stdout
    assert "no ledger metadata given" in text


def _write_conf(root: Path, ledger_dirs: list[str], **settings) -> Path:
    conf = root / "bk_server.conf"
    lines = ["journalDirectories=journal", "ledgerDirectories=" + ",".join(ledger_dirs)]
    lines += [f"{k}={v}" for k, v in settings.items()]
    conf.write_text("\n".join(lines) + "\n")
    return conf


def expected_action(live: int, garbage: int, live_ledgers: int, current: bool, minor: float | None,
                    major: float | None) -> str:
    """The rule of specs/space.md, from the manifest's numbers (None: that compaction disabled)."""
    if current:
        return "current"
    if live_ledgers == 0:
        return "delete"
    u = live / (live + garbage)
    if minor is not None and u < minor:
        return "compact-minor"
    if major is not None and u < major:
        return "compact-major"
    return "keep"


@pytest.mark.parametrize("minor_on,major_on", [(True, True), (False, True), (True, False)])
def test_each_gc_action_follows_the_thresholds_and_the_current_log(tmp_path, minor_on, major_on):
    root = golden_copy(tmp_path, "interleaved-v4-smallpage")
    manifest = json.loads((root / "manifest.json").read_text())
    gone = {0x100000000, 1, 0x1234}
    remove_metadata(root, gone)
    minor, major = 0.25, 0.4
    conf = _write_conf(root, ["ledgers"], minorCompactionThreshold=minor, majorCompactionThreshold=major,
                       minorCompactionInterval=3600 if minor_on else 0,
                       majorCompactionInterval=86400 if major_on else 0)
    rows = run(["--conf", str(conf), "--metadata-dir", str(root / "metadata")])
    logs = {r["log_id"]: r for r in kind(rows, "log")}
    live_ledgers: dict[int, set] = defaultdict(set)
    for r in manifest["entry_log_records"]:
        if int(r["ledger_id"]) not in gone:
            live_ledgers[int(r["entry_log_file"][:-4], 16)].add(r["ledger_id"])
    want = expected_bytes(manifest, gone)
    top = max(logs)
    # The highest log is preallocated (empty); the one before it was never rolled: both still written.
    assert logs[top]["size"] == 0
    current = {top, top - 1}
    for log_id, r in logs.items():
        live, garbage = want.get(("ledgers", log_id), (0, 0))
        assert r["action"] == expected_action(live, garbage, len(live_ledgers[log_id]), log_id in current,
                                              minor if minor_on else None, major if major_on else None), log_id
    actions = {r["action"] for r in logs.values()}
    if minor_on and major_on:
        assert actions == {"delete", "compact-minor", "compact-major", "keep", "current"}
    s = kind(rows, "summary")[0]
    assert s["gc_frees_bytes"] == sum(r["size"] for r in logs.values() if r["action"] == "delete") > 0
    assert s["minor_compaction_frees_bytes"] == sum(r["garbage_bytes"] for r in logs.values()
                                                    if r["action"] == "compact-minor")
    assert s["major_compaction_frees_bytes"] == (sum(r["garbage_bytes"] for r in logs.values() if r["action"] in
                                                     ("compact-minor", "compact-major")) if major_on else 0)
    assert s["settings"]["source"] == str(conf)


def test_settings_the_bookie_would_refuse_are_one_line_exit_8(tmp_path):
    root = golden_copy(tmp_path, "interleaved-v4-smallpage")
    conf = _write_conf(root, ["ledgers"], minorCompactionThreshold=0.9, majorCompactionThreshold=0.5)
    r = CliRunner().invoke(space, ["--conf", str(conf)])
    assert r.exit_code == 8
    assert "must be below major" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def _rewrite(root: Path, lid: int, **changes) -> None:
    for p in (root / "metadata").glob(f"{lid:x}.*"):
        md = parse_metadata(p.read_bytes())
        p.write_bytes(serialize_metadata(dataclasses.replace(md, **changes)))


CLUSTER_BOOKIE = "bk-1.rack-a"


def cluster_copy(tmp_path: Path) -> tuple[Path, Path]:
    src = GOLDEN / "cluster-3"
    shutil.copytree(src / "bookies" / CLUSTER_BOOKIE, tmp_path / CLUSTER_BOOKIE)
    shutil.copytree(src / "metadata", tmp_path / "metadata")
    return tmp_path / CLUSTER_BOOKIE, tmp_path / "metadata"


def test_open_ledgers_pin_their_logs_and_only_closed_ones_are_over_replicated(tmp_path):
    root, md = cluster_copy(tmp_path)
    others = ("bk-2.rack-a", "bk-3.rack-b", "bk-4.rack-c")

    def away(ensembles):   # the same ledger, with this bookie replaced in every ensemble
        return tuple((first, tuple(others[2] if b == CLUSTER_BOOKIE else b for b in members))
                     for first, members in ensembles)

    for lid in (0x1000, 0x10):
        m = parse_metadata((md / f"{lid:x}.bin").read_bytes())
        _rewrite(tmp_path, lid, ensembles=away(m.ensembles))
    rows = run([str(root), "--metadata-dir", str(md)])
    ledgers = {r["ledger"]: r for r in kind(rows, "ledger")}
    opened = ledgers[str(0x1000)]
    assert opened["metadata_state"] == "OPEN" and opened["state"] == "live"
    assert opened["garbage_bytes"] == 0 and opened["pinned_logs"] >= 1
    closed = ledgers[str(0x10)]
    assert closed["metadata_state"] == "CLOSED" and closed["state"] == "over-replicated"
    assert closed["live_bytes"] == 0 and closed["garbage_bytes"] == closed["bytes"] > 0
    # The over-replicated check off (gcOverreplicatedLedgerWaitTime=0): the bookie keeps it.
    conf = _write_conf(root, ["ledgers0", "ledgers1"], gcOverreplicatedLedgerWaitTime=0)
    rows = run(["--conf", str(conf), "--metadata-dir", str(md)])
    assert {r["ledger"]: r["state"] for r in kind(rows, "ledger")}[str(0x10)] == "live"


def test_topics_come_from_pulsar_managed_ledger_custom_metadata(tmp_path):
    root, md = cluster_copy(tmp_path)
    names = {0x10: b"public/default/persistent/orders", 0x11: b"public/default/persistent/orders",
             0xABCDEF: b"acme/billing/persistent/a%20b"}
    for lid, name in names.items():
        m = parse_metadata((md / f"{lid:x}.bin").read_bytes())
        _rewrite(tmp_path, lid, custom_metadata=m.custom_metadata + (("pulsar/managed-ledger", name),))
    rows = run([str(root), "--metadata-dir", str(md)])
    ledgers = {r["ledger"]: r for r in kind(rows, "ledger")}
    assert ledgers[str(0x10)]["topic"] == ledgers[str(0x11)]["topic"] == "persistent://public/default/orders"
    assert ledgers[str(0xABCDEF)]["topic"] == "persistent://acme/billing/a b"
    assert ledgers[str(0x1000)]["topic"] is None
    topics = {t["topic"]: t for t in kind(rows, "topic")}
    orders = topics["persistent://public/default/orders"]
    assert orders["ledgers"] == 2
    assert orders["bytes"] == ledgers[str(0x10)]["bytes"] + ledgers[str(0x11)]["bytes"]
    by_ledger_topic = {lid: ledgers[lid]["topic"] for lid in ledgers}
    for log in kind(rows, "log"):
        if log["oldest_live_ledger"] is not None:
            assert log["oldest_live_topic"] == by_ledger_topic[log["oldest_live_ledger"]]
    assert any(log["oldest_live_topic"] for log in kind(rows, "log"))


def test_dbledgerstorage_liveness_per_dir_and_sst_files_holding_only_deleted_ledgers(tmp_path):
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    manifest = json.loads((root / "manifest.json").read_text())
    in_dir0 = {int(x["ledger_id"]) for x in manifest["ledgers"] if x["ledger_dir"] == "ledgers0"}
    remove_metadata(root, in_dir0)
    rows = run([str(root), "--metadata-dir", str(root / "metadata")])
    for log in kind(rows, "log"):
        if log["ledger_dir"] == "ledgers0" and log["size"]:
            assert log["live_bytes"] == 0 and log["garbage_bytes"] > 0
            assert log["action"] in ("delete", "current")
        elif log["size"]:
            assert log["garbage_bytes"] == 0
    dbs = {d["ledger_dir"]: d for d in kind(rows, "summary")[0]["rocksdb"]}
    stale0 = {(t["database"], t["file"]) for t in dbs["ledgers0"]["stale_sst"]}
    assert {db for db, _f in stale0} == {"locations", "ledgers"}
    assert len(stale0) == dbs["ledgers0"]["locations_sst_files"] + dbs["ledgers0"]["ledgers_sst_files"]
    assert dbs["ledgers1"]["stale_sst"] == []
    for d in dbs.values():
        for db in ("locations", "ledgers"):
            folder = root / d["ledger_dir"] / "current" / db
            assert d[f"{db}_bytes"] == sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def test_an_sst_file_the_manifest_lists_and_the_folder_lacks_is_said(tmp_path):
    """RocksDB's open checks every live file (paranoid_checks): a locations table deleted leaves a database
    the bookie cannot open. The count stays the MANIFEST's; one warning names the file."""
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    db = root / "ledgers0" / "current" / "locations"
    [sst] = list(db.glob("*.sst"))
    sst.unlink()
    r = CliRunner().invoke(space, [str(root)])
    assert r.exit_code == 0, r.output
    assert r.stderr == (f"bkdisk: warning: {db}: its MANIFEST lists 1 SST file the folder lacks ({sst.name}): "
                        "RocksDB will not open this database, and the bookie will not start\n")


def test_an_unreadable_entry_log_is_one_line_exit_8(tmp_path):
    root = golden_copy(tmp_path, "sorted-v5-bookieid")
    log = root / "ledgers" / "current" / "1.log"
    log.unlink()
    os.mkfifo(log)
    r = CliRunner().invoke(space, [str(root)])
    assert r.exit_code == 8, r.output
    assert "1.log" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_metadata_from_the_service_gives_the_rows_the_folder_gives(tmp_path):
    from metaservice_fixture import served

    from bkdisk.metaservice.sqlite_store import SqliteStore
    root = golden_copy(tmp_path, "sorted-v5-bookieid")
    manifest = json.loads((root / "manifest.json").read_text())
    remove_metadata(root, set(ledger_ids(manifest)[1::2]))
    store = SqliteStore(tmp_path / "meta.db")
    for p in sorted((root / "metadata").glob("*.bin")):
        store.create(0, int(p.name[:-4], 16), p.read_bytes())
    with served(store, token=None) as (_client, port):
        by_service = run([str(root), "--metadata", f"grpc://127.0.0.1:{port}"])
    by_folder = run([str(root), "--metadata-dir", str(root / "metadata")])
    def strip(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "metadata"} for r in rows]
    assert strip(by_service) == strip(by_folder)
    assert any(r["state"] == "deleted" for r in kind(by_service, "ledger"))


@given(live=st.lists(st.integers(0, 1 << 30), min_size=1, max_size=20), data=st.data(),
       minor=st.floats(0, 1), major=st.floats(0, 1), minor_iv=st.sampled_from([0, 3600]),
       major_iv=st.sampled_from([0, 86400]))
@settings(max_examples=200, deadline=None)
def test_log_actions_follow_the_rule_for_any_usage_and_settings(live, data, minor, major, minor_iv, major_iv):
    import numpy as np

    from bkdisk.bookie.gc_policy import ACTIONS, GcSettings, log_actions
    garbage = data.draw(st.lists(st.integers(0, 1 << 30), min_size=len(live), max_size=len(live)))
    ledgers = data.draw(st.lists(st.integers(0, 3), min_size=len(live), max_size=len(live)))
    current = data.draw(st.lists(st.booleans(), min_size=len(live), max_size=len(live)))
    s = GcSettings(minorCompactionThreshold=minor, majorCompactionThreshold=major, minorCompactionInterval=minor_iv,
                   majorCompactionInterval=major_iv)
    got = log_actions(np.array(live), np.array(live) + np.array(garbage), np.array(ledgers), np.array(current), s)
    for i in range(len(live)):
        total = live[i] + garbage[i]
        want = expected_action(live[i], garbage[i] if total else 1, ledgers[i], current[i],
                               minor if minor_iv and minor > 0 else None, major if major_iv and major > 0 else None)
        assert ACTIONS[got[i]] == want


def test_a_damaged_ledgers_map_is_a_warning_and_the_log_is_counted_from_its_entries(tmp_path):
    from bkdisk.formats.entrylog import parse_header
    root = golden_copy(tmp_path, "interleaved-v4-smallpage")
    manifest = json.loads((root / "manifest.json").read_text())
    log = root / "ledgers" / "current" / "0.log"
    data = bytearray(log.read_bytes())
    at = parse_header(bytes(data[:1024])).ledgers_map_offset
    data[at:at + 4] = (len(data)).to_bytes(4, "big")   # the map's first batch says it runs past the file's end
    log.chmod(0o644)
    log.write_bytes(bytes(data))
    r = CliRunner().invoke(space, [str(root), "--json"])
    assert r.exit_code == 0, r.output
    assert "0.log" in r.stderr and "warning" in r.stderr
    row = next(x for x in map(json.loads, r.stdout.splitlines()) if x["kind"] == "log" and x["log_id"] == 0)
    assert row["source"] == "scan"
    assert (row["live_bytes"], row["garbage_bytes"]) == expected_bytes(manifest, set())[("ledgers", 0)]


def _bookkeeper_log_metadata(corpus: str) -> dict[tuple[str | None, int], tuple[int, float, dict[int, int]]]:
    """BookKeeper's own `readlogmetadata` of every log: (dir or None, log id) -> (total, usage, per ledger)."""
    import re
    out = {}
    for p in sorted((GOLDEN / corpus / "tool-output").glob("readlogmetadata-*.txt")):
        text = p.read_text()
        head = re.search(r"entryLogId: (\d+), remaining size: (\d+), total size: (\d+), usage: ([\d.]+)", text)
        per = {int(l): int(n) for l, n in re.findall(r"Lid=(-?\d+), TotalSizeOfEntriesOfLedger=(\d+)", text)}
        d = re.match(r"readlogmetadata-(ledgers\d+)-\d+\.txt", p.name)
        out[(d.group(1) if d else None, int(head.group(1)))] = (int(head.group(3)), float(head.group(4)), per)
    return out


@pytest.mark.parametrize("corpus", CORPORA)
def test_each_log_holds_what_bookkeepers_own_readlogmetadata_says(corpus):
    from bkdisk.bookie.layout import discover
    from bkdisk.bookie.space import read_bookie_logs
    want = _bookkeeper_log_metadata(corpus)
    assert want
    rows = {(r["ledger_dir"], r["log_id"]): r for r in kind(run([str(GOLDEN / corpus)]), "log")}
    logs = {(lg.ledger_dir, lg.log_id): lg for lg in read_bookie_logs(discover(str(GOLDEN / corpus)))}
    for (d, log_id), (total, use, per) in want.items():
        key = next(k for k in rows if k[1] == log_id and (d is None or k[0] == d))
        assert rows[key]["live_bytes"] + rows[key]["garbage_bytes"] == total
        assert rows[key]["usage"] == use   # every ledger live: the bookie's index holds them all
        lg = logs[key]
        assert dict(zip(lg.ledger.astype("int64").tolist(), lg.nbytes.tolist())) == per


def _refused(args: list[str], *words: str) -> str:
    r = CliRunner().invoke(space, args)
    assert r.exit_code == 8 and r.stdout == "", r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
    return r.stderr


def test_two_copies_of_one_bookie_under_one_folder_are_refused_as_fsck_finds_them(tmp_path):
    from bkdisk.fsck_cli import fsck_command
    parent = tmp_path / "disks"
    for name in ("a", "b"):
        shutil.copytree(GOLDEN / "interleaved-v6-hostport", parent / name, symlinks=True)
    for extra in ([], ["--json"], ["--metadata-dir", str(parent / "a" / "metadata")]):
        _refused([str(parent), *extra], "COOKIE_MISMATCH", "not one bookie's", str(parent / "a"), str(parent / "b"),
                 "the number of dirs")
    checked = CliRunner().invoke(fsck_command, [str(parent), "--json"])
    assert "COOKIE_MISMATCH" in {f["code"] for f in json.loads(checked.output)["findings"]}
    for name in ("a", "b"):   # each copy alone is one bookie's report
        rows = run([str(parent / name)])
        assert kind(rows, "summary")[0]["logs"] == 4


def test_two_different_bookies_under_one_folder_are_refused_naming_each_and_its_folder(tmp_path):
    parent = tmp_path / "disks"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", parent / "a", symlinks=True)
    shutil.copytree(GOLDEN / "sorted-v5-bookieid", parent / "b", symlinks=True)
    _refused([str(parent)], "holds 2 bookies", f"127.0.0.1:3181 in {parent / 'a'}",
             f"bookie-1.rack-a in {parent / 'b'}")
    for p in (parent / "b").rglob("VERSION"):   # a bookie without cookies is no longer told apart by its id
        p.unlink()
    _refused([str(parent)], "COOKIE_MISMATCH", "not one bookie's", str(parent / "a"), str(parent / "b"))


def test_a_ledger_dir_with_another_bookies_cookie_is_refused_with_conf(tmp_path):
    root = golden_copy(tmp_path, "interleaved-v6-hostport")
    conf = _write_conf(root, ["ledgers0", "ledgers1"])
    run(["--conf", str(conf)])
    other = (GOLDEN / "interleaved-v6-hostport" / "cookies" / "VERSION.custom-bookieid").read_bytes()
    version = root / "ledgers1" / "current" / "VERSION"
    version.chmod(0o644)
    version.write_bytes(other)
    _refused(["--conf", str(conf)], "COOKIE_MISMATCH", "bookie id", str(version))


def _map_pairs(log: Path) -> list[tuple[int, int, int]]:
    """(offset of the size, ledger, size) of each pair in the first batch of a log's ledgers map."""
    from bkdisk.formats.entrylog import parse_header
    data = log.read_bytes()
    at = parse_header(data[:1024]).ledgers_map_offset
    count = int.from_bytes(data[at + 20:at + 24], "big")
    pairs = []
    for i in range(count):
        p = at + 24 + 16 * i
        pairs.append((p + 8, int.from_bytes(data[p:p + 8], "big"), int.from_bytes(data[p + 8:p + 16], "big")))
    return pairs


def _set_map_sizes(log: Path, sizes: dict[int, int]) -> None:
    data = bytearray(log.read_bytes())
    for at, ledger, _size in _map_pairs(log):
        if ledger in sizes:
            data[at:at + 8] = sizes[ledger].to_bytes(8, "big")
    log.chmod(0o644)
    log.write_bytes(bytes(data))


def _warnings_naming(stderr: str, log: Path) -> list[str]:
    return [line for line in stderr.splitlines() if str(log) in line and "ledgers map" in line]


def test_a_ledgers_map_claiming_more_bytes_than_its_log_holds_is_a_warning_and_counted_from_the_entries(tmp_path):
    root = golden_copy(tmp_path, "interleaved-v4-smallpage")
    manifest = json.loads((root / "manifest.json").read_text())
    log = root / "ledgers" / "current" / "0.log"
    (_at, ledger, size), *_ = _map_pairs(log)
    _set_map_sizes(log, {ledger: size + log.stat().st_size})   # more than the whole file
    r = CliRunner().invoke(space, [str(root), "--json"])
    assert r.exit_code == 0, r.output
    [w] = _warnings_naming(r.stderr, log)
    assert f"ledger {ledger}: map {size + log.stat().st_size}, entries {size}" in w, w
    assert "more than the log holds" in w and "LEDGERS_MAP_MISMATCH" in w
    row = next(x for x in map(json.loads, r.stdout.splitlines()) if x["kind"] == "log" and x["log_id"] == 0)
    assert row["source"] == "scan"
    assert (row["live_bytes"], row["garbage_bytes"]) == expected_bytes(manifest, set())[("ledgers", 0)]
    assert row["live_bytes"] + row["garbage_bytes"] <= row["size"]


def test_a_ledgers_map_giving_a_ledger_negative_bytes_is_a_warning_and_counted_from_the_entries(tmp_path):
    """(A negative size makes the map's total smaller, so no claim goes beyond the log: still false.)"""
    root = golden_copy(tmp_path, "interleaved-v4-smallpage")
    manifest = json.loads((root / "manifest.json").read_text())
    log = root / "ledgers" / "current" / "0.log"
    (_at, ledger, size), *_ = _map_pairs(log)
    data = bytearray(log.read_bytes())
    data[_at:_at + 8] = (-1).to_bytes(8, "big", signed=True)
    log.chmod(0o644)
    log.write_bytes(bytes(data))
    r = CliRunner().invoke(space, [str(root), "--json"])
    assert r.exit_code == 0, r.output
    [w] = _warnings_naming(r.stderr, log)
    assert f"ledger {ledger}: map -1, entries {size}" in w and "LEDGERS_MAP_MISMATCH" in w, w
    row = next(x for x in map(json.loads, r.stdout.splitlines()) if x["kind"] == "log" and x["log_id"] == 0)
    assert row["source"] == "scan" and row["garbage_bytes"] >= 0
    assert (row["live_bytes"], row["garbage_bytes"]) == expected_bytes(manifest, set())[("ledgers", 0)]


def test_with_scan_a_disagreeing_ledgers_map_names_each_ledger_once(tmp_path):
    root = golden_copy(tmp_path, "interleaved-v4-smallpage")
    log = root / "ledgers" / "current" / "0.log"
    pairs = _map_pairs(log)
    assert len(pairs) >= 2
    changed = {ledger: size - 1 for _at, ledger, size in pairs[:2]}   # less than the log holds: trusted unscanned
    _set_map_sizes(log, changed)
    quiet = CliRunner().invoke(space, [str(root)])
    assert quiet.exit_code == 0 and _warnings_naming(quiet.stderr, log) == [], quiet.stderr
    r = CliRunner().invoke(space, [str(root), "--scan"])
    assert r.exit_code == 0, r.output
    [w] = _warnings_naming(r.stderr, log)
    for ledger, size in changed.items():
        assert w.count(f"ledger {ledger}:") == 1 and f"ledger {ledger}: map {size}, entries {size + 1}" in w, w
    assert "more than the log holds" not in w


def test_a_locations_database_whose_manifest_cannot_be_read_says_so_in_the_text_report(tmp_path):
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    current = root / "ledgers0" / "current" / "locations" / "CURRENT"
    current.chmod(0o644)
    current.write_bytes(b"")   # cut short: which MANIFEST is live is unknown
    r = CliRunner().invoke(space, [str(root)])
    assert r.exit_code == 0, r.output
    assert f"{current}: offset 0: expected 'MANIFEST-<number>'" in r.stderr, r.stderr
    [line] = [x for x in r.stdout.splitlines() if x.startswith("RocksDB in ledgers0")]
    assert "None" not in line and "locations 58.8 KiB (its MANIFEST cannot be read: SST files not counted" in line
    [other] = [x for x in r.stdout.splitlines() if x.startswith("RocksDB in ledgers1")]
    assert "(1 SST files)" in other


def test_fsck_names_the_closed_ledgers_space_counts_over_replicated_as_info(tmp_path):
    from bkdisk.fsck_cli import fsck_command
    root, md = cluster_copy(tmp_path)
    others = ("bk-2.rack-a", "bk-3.rack-b", "bk-4.rack-c")
    clean = CliRunner().invoke(fsck_command, [str(root), "--metadata-dir", str(md), "--json"])
    assert "LEDGER_OVER_REPLICATED" not in clean.output
    for lid in (0x1000, 0x10):   # an open ledger and a closed one, this bookie replaced in every ensemble
        m = parse_metadata((md / f"{lid:x}.bin").read_bytes())
        _rewrite(tmp_path, lid, ensembles=tuple((first, tuple(others[2] if b == CLUSTER_BOOKIE else b for b in members))
                                                for first, members in m.ensembles))
    r = CliRunner().invoke(fsck_command, [str(root), "--metadata-dir", str(md), "--json"])
    assert r.exit_code == clean.exit_code == 0, r.output
    found = [f for f in json.loads(r.output)["findings"] if f["code"] == "LEDGER_OVER_REPLICATED"]
    assert [(f["ledger"], f["severity"], f["pass"]) for f in found] == [(0x10, "info", 7)]
    assert "garbage" in found[0]["message"] and "gcOverreplicatedLedgerWaitTime" in found[0]["message"]
    counted = {r["ledger"] for r in kind(run([str(root), "--metadata-dir", str(md)]), "ledger")
               if r["state"] == "over-replicated"}
    assert counted == {str(f["ledger"]) for f in found}


def test_fsck_warns_of_metadata_bookkeepers_client_cannot_load_and_checks_no_entry_against_it(tmp_path):
    """A ledger whose metadata breaks LedgerMetadataBuilder's rules (write quorum above the ensemble size; an
    ensemble short of the ensemble size) cannot be opened by any reader; fsck says so (a warning) instead of
    computing write sets from it."""
    from bkdisk.fsck_cli import fsck_command
    root, md = cluster_copy(tmp_path)
    a, b = (parse_metadata((md / f"{lid:x}.bin").read_bytes()) for lid in (0x10, 0x11))
    _rewrite(tmp_path, 0x10, write_quorum=a.ensemble_size + 1, ack_quorum=a.ensemble_size + 1)
    _rewrite(tmp_path, 0x11, ensembles=((0, b.ensembles[0][1][:-1]),))
    r = CliRunner().invoke(fsck_command, [str(root), "--metadata-dir", str(md), "--json"])
    findings = json.loads(r.output)["findings"]
    found = [f for f in findings if f["code"] == "METADATA_UNLOADABLE"]
    assert [(f["ledger"], f["severity"], f["pass"]) for f in found] == [(0x10, "warning", 7), (0x11, "warning", 7)]
    assert (f"write quorum {a.ensemble_size + 1} is larger than the ensemble size {a.ensemble_size}"
            in found[0]["message"])
    assert "bookies, the ensemble size is" in found[1]["message"]
    assert not [f for f in findings if f.get("ledger") in (0x10, 0x11) and f["code"] in ("ENTRY_MISSING",
                                                                                         "ENTRIES_MISSING")]


@pytest.mark.parametrize("corpus", [c for c in CORPORA if not c.startswith("dbstorage")])
def test_the_ledgers_a_check_walked_in_the_index_are_those_space_lists(tmp_path, corpus):
    import dataclasses as dc

    from bkdisk.bookie.layout import discover
    from bkdisk.bookie.space import SpaceError, indexed_ledgers, listed_ledgers
    from bkdisk.diskio.failures import LIST, OPEN, IoFailure
    from bkdisk.indexfiles.scan import walk_index_dirs
    root = golden_copy(tmp_path, corpus)
    dirs = discover(str(root))
    idx = sorted(p for d in dirs.effective_index_dirs for p in Path(d, "current").rglob("*.idx"))
    idx[0].rename(str(idx[0]) + ".rloc")   # the bookie renames it back into place: still its ledger
    (idx[-1].parent / "notes.txt").write_text("not an index")
    want, _warnings = indexed_ledgers(dirs)
    inv = walk_index_dirs(dirs.effective_index_dirs)
    assert listed_ledgers(inv) == want and len(want[0]) == len(idx)
    unread = IoFailure(str(idx[-1]), OPEN, 13, "Permission denied")   # listed, not read: its ledger is known
    assert listed_ledgers(dc.replace(inv, io_failures=[unread])) == want
    unlisted = IoFailure(str(idx[-1].parent), LIST, 13, "Permission denied")
    with pytest.raises(SpaceError, match="cannot list the index folder .*which ledgers the bookie keeps is unknown"):
        listed_ledgers(dc.replace(inv, io_failures=[unread, unlisted]))


def test_a_folder_of_a_cluster_s_ledgers_is_read_as_the_bookie_needs_it(tmp_path):
    """The ledgers of other bookies in the folder are read and let go, not held: with 20,000 of them
    beside the bookie's own, the same rows, and the command's traced memory grows by less than 200 bytes
    a foreign ledger (the whole folder loaded as objects held 0.6 KB each)."""
    import tracemalloc

    from bench.metadata_gen import write_shaped_folder
    root = golden_copy(tmp_path, "interleaved-v6-hostport")
    md = tmp_path / "md"
    shutil.copytree(root / "metadata", md)
    alone = run([str(root), "--metadata-dir", str(md)])
    write_shaped_folder(str(md), 20_000, ["far-a:1", "far-b:2", "far-c:3", "far-d:4"])
    tracemalloc.start()
    try:
        crowded = run([str(root), "--metadata-dir", str(md)])
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert crowded == alone
    assert peak < 200 * 20_000, f"{peak / 20_000:.0f} bytes a foreign ledger"


def test_dbledgerstorage_logs_in_its_second_dir_only_are_looked_up_in_that_dir_s_index(tmp_path):
    """(one entry-logger group, not the first: its ledgers are live by the second dir's index, not the first's)"""
    from bkdisk.bookie.gc_policy import GcSettings
    from bkdisk.bookie.layout import discover
    from bkdisk.bookie.space import account_bookie
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    whole = account_bookie(discover(str(root)), None, GcSettings())
    for log in (root / "ledgers0" / "current").glob("*.log"):
        log.unlink()
    only1 = account_bookie(discover(str(root)), None, GcSettings())
    assert {lg["ledger_dir"] for lg in only1.logs} == {"ledgers1"}
    want = {r["ledger"]: r["state"] for r in whole.ledgers if any(x["ledger_dir"] == "ledgers1" for x in r["logs"])}
    got = {r["ledger"]: r["state"] for r in only1.ledgers}
    assert got == want and set(got.values()) == {"live"}


def test_the_logs_arrays_are_let_go_once_joined():
    """(a million ledgers' rows are held once, not also in each log's arrays)"""
    import weakref

    import numpy as np

    from bkdisk.bookie.space import LogLedgers, joined_rows
    logs = [LogLedgers("d", 0, i, f"{i}.log", 100, np.arange(3, dtype=np.uint64), np.arange(3, dtype=np.uint64) + i,
                       np.full(3, 7, np.int64), "scan", True) for i in range(2)]
    held = [weakref.ref(getattr(lg, name)) for lg in logs for name in ("scope", "ledger", "nbytes")]
    scope, ledger, nbytes = joined_rows(logs)
    assert ledger.tolist() == [0, 1, 2, 1, 2, 3] and nbytes.sum() == 42 and len(scope) == 6
    assert all(r() is None for r in held)


@pytest.mark.parametrize("damage", ["deleted", "checksum"])
def test_a_ledgers_index_read_in_part_is_unknown_not_a_reason_to_collect(tmp_path, damage):
    """A table of the ledgers index missing or failing its checksums may hide ledgers the bookie keeps:
    their logs would look like garbage. Which ledgers are kept is unknown: exit 8, no advice to delete."""
    root = golden_copy(tmp_path, "dbstorage-v6-bookieid")
    sst = root / "ledgers0" / "current" / "ledgers" / "000008.sst"
    if damage == "deleted":
        sst.unlink()
    else:
        sst.chmod(0o644)
        with open(sst, "r+b") as fh:
            fh.seek(50)
            fh.write(b"\xff\xff\xff\xff")
    r = CliRunner().invoke(space, [str(root)])
    assert r.exit_code == 8 and r.stdout == "", r.output
    assert f"{root / 'ledgers0' / 'current' / 'ledgers'}: the ledgers index can be read only in part (" in r.stderr
    assert "which ledgers the bookie keeps is unknown" in r.stderr


def test_a_symlink_in_the_index_that_leads_nowhere_is_unknown_not_a_reason_to_collect(tmp_path):
    """A loop where an index folder was: the index files below it are out of sight, so their ledgers'
    logs would look like garbage. Which ledgers are kept is unknown: exit 8."""
    root = golden_copy(tmp_path, "interleaved-v6-hostport")
    folder = root / "ledgers1" / "current" / "0"
    for p in sorted(folder.rglob("*"), reverse=True):
        p.chmod(0o755)
    folder.chmod(0o755)
    shutil.rmtree(folder)
    folder.symlink_to("0")
    r = CliRunner().invoke(space, [str(root)])
    assert r.exit_code == 8 and r.stdout == "", r.output
    assert f"{folder}: a symbolic link in the index that leads nowhere (Too many levels of symbolic links)" in r.stderr
