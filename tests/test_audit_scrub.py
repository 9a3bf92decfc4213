"""The audit with a scrub state (``--state``) on a real Spark session: runs a day apart (``--as-of``)
deep-read each its share of the entry logs and every log within the interval; a payload byte flipped
in a log not due is found on its turn and not before; a log rewritten is deep-checked on the next
run; a deleted index file is found by the next light run; ``--deep-all`` gives the tables of the
audit without a state; a run killed mid-way leaves the last good state as it was."""
from __future__ import annotations

import datetime
import json
import os
import shutil
import signal

import pytest
from audit_process import audit_mid_scan
from spark_session import shared_spark

from bkdisk.audit.job import FAULT_TABLES, read_tables, run_audit
from bkdisk.audit.metadata_source import MetadataDirSource
from bkdisk.audit.report import summarize, write_reports
from bkdisk.audit.rows import DiskInput, RunInfo
from bkdisk.audit.scrub_run import ScrubRun
from bkdisk.audit.scrub_schedule import Schedule
from bkdisk.audit.scrub_state import read_state
from bkdisk.bookie.cluster import sample_cluster, write_cluster
from bkdisk.formats.digests import DigestType
from bkdisk.formats.index import unpack_location
from bkdisk.formats.paths import entry_log_name

pytestmark = pytest.mark.slow   # real Spark audits, several runs each

DAY = datetime.timedelta(days=1)
T0 = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.UTC)
VOLATILE = {"run_id", "host", "scan_seconds"}


@pytest.fixture(scope="module")
def spark():
    return shared_spark()


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Three bookies of about a dozen 256 KiB entry logs each."""
    return write_cluster(sample_cluster(3, entries=400, max_payload=3000), str(tmp_path_factory.mktemp("scrub") / "c"))


@pytest.fixture
def cluster(written, tmp_path):
    """A copy of the cluster a test may damage, and its disks."""
    root = tmp_path / "c"
    shutil.copytree(written.root, root)
    disks = [DiskInput(str(root / os.path.relpath(r, written.root))) for r in written.bookie_roots.values()]
    return root, disks


def audit(spark, disks, root, out, *, state=None, day=0, deep_all=False):
    """One audit (a scrub run at T0 + ``day`` days with ``state``); its tables and summary."""
    scrub = None if state is None else ScrubRun.open(str(state), Schedule(), T0 + day * DAY, deep_all)
    run_audit(spark, disks, [], MetadataDirSource(str(root / "metadata")), str(out), RunInfo.new(f"day-{day}"),
              scrub=scrub)
    summary = summarize(str(out), f"day-{day}", "test", scrub_interval=Schedule().interval if scrub else None)
    write_reports(str(out), summary)
    return read_tables(str(out)), summary


def rows(table) -> list[tuple]:
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items() if k not in VOLATILE)) for r in table.to_pylist())


def utc(t: datetime.datetime) -> datetime.datetime:
    """A timestamp of a table Spark wrote (read back without its zone, UTC)."""
    return t.replace(tzinfo=datetime.UTC) if t.tzinfo is None else t


def deep_on(state, disk: str, when: datetime.datetime) -> set[int]:
    return {lid for lid, s in read_state(str(state))[disk].logs.items() if s.last_deep == when}


def test_seven_runs_a_day_apart_each_deep_read_their_share_and_after_the_seventh_every_log(spark, cluster, tmp_path):
    root, disks = cluster
    state = tmp_path / "state"
    for day in range(7):
        t, summary = audit(spark, disks, root, tmp_path / "out", state=state, day=day)
        for d in t["disks"].to_pylist():
            n = d["logs_total"]
            assert n >= 10 and n // 7 - 1 <= d["logs_deep_checked"] <= -(-n // 7) + 1, (day, d)
            assert d["deep_bytes"] + d["light_bytes"] == d["payload_bytes"] > 0
            assert len(deep_on(state, d["path"], T0 + day * DAY)) == d["logs_deep_checked"]
        verified = summary["scrub"]["all_verified_within_interval"]
        assert verified is (day == 6), (day, summary["scrub"]["lagging"])
    for disk in read_state(str(state)).values():
        assert all(s.last_deep is not None and s.verdict == "ok" for s in disk.logs.values())
    js = json.loads((tmp_path / "out" / "summary.json").read_text())["scrub"]
    assert js["logs_deep_checked"] == sum(d["logs_deep_checked"] for d in t["disks"].to_pylist())
    assert js["oldest_deep_check"] == T0.isoformat()
    assert "every payload byte verified in the last 7 days: yes" in (tmp_path / "out" / "report.html").read_text()


def _flip_payload_byte(written, root, bookie: str, logs_not_due: set[int]) -> tuple:
    """Flip the last payload byte of an entry (real digest) in one of ``logs_not_due``, keeping the
    file's mtime (bit rot changes no identity); the entry and its log id."""
    wb = written.bookies[bookie]
    for key, loc in sorted(wb.locations.items()):
        log_id, pos = unpack_location(loc)
        ledger = next(x for x in written.bookies[bookie].spec.ledgers if x.lid == key[0])
        if log_id in logs_not_due and ledger.digest_type != DigestType.DUMMY:
            rel = next(os.path.relpath(p, written.root) for p in wb.entry_log_files
                       if os.path.basename(p) == entry_log_name(log_id))
            path = root / rel
            st = os.stat(path)
            with open(path, "r+b") as f:
                f.seek(pos + len(wb.entries[key]) - 1)
                x = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([x[0] ^ 0x80]))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            return key, log_id
    raise AssertionError("no entry in the logs not due")


def test_a_flipped_byte_in_a_log_not_due_is_found_on_its_turn_and_carried_after(spark, written, cluster, tmp_path):
    root, disks = cluster
    state = tmp_path / "state"
    audit(spark, disks, root, tmp_path / "out", state=state, day=0)
    bookie, disk = next(iter(written.bookie_roots)), disks[0].path
    logs = read_state(str(state))[disk].logs
    later = {lid for lid, s in logs.items() if s.due_at == T0 + 3 * DAY}   # its turn: the fourth run
    key, log_id = _flip_payload_byte(written, root, bookie, later)
    turn = (logs[log_id].due_at - T0) // DAY
    for day in range(1, turn + 2):
        t, _s = audit(spark, disks, root, tmp_path / "out", state=state, day=day)
        bad = [(r["bookie_id"], r["ledger_id"], r["entry_id"]) for r in t["corrupt_copies"].to_pylist()]
        found = (bookie, key[0].ledger, key[1]) in bad
        assert found is (day >= turn), (day, turn, bad)   # the light runs before its turn read no payload
        if day > turn:   # not deep-read again: carried from the state with the time it was found
            f = [r for r in t["findings"].to_pylist() if r["code"] == "DIGEST_MISMATCH"]
            assert f and all(utc(r["found_at"]) == T0 + turn * DAY for r in f), f
    assert read_state(str(state))[disk].logs[log_id].verdict == "corrupt"


def test_a_rewritten_log_is_deep_checked_next_run_and_a_deleted_index_file_found_by_the_next_light_run(
        spark, written, cluster, tmp_path):
    root, disks = cluster
    state = tmp_path / "state"
    t0, _s = audit(spark, disks, root, tmp_path / "out", state=state, day=0)
    disk = disks[1].path
    logs = read_state(str(state))[disk].logs
    changed = max(lid for lid, s in logs.items() if s.due_at >= T0 + 3 * DAY)
    path = next(os.path.join(dp, n) for dp, _d, ns in os.walk(disk) for n in ns if n == entry_log_name(changed))
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))   # as a rewrite does
    bookie = list(written.bookie_roots)[2]
    idx = next(os.path.join(root, os.path.relpath(p, written.root))
               for p in sorted(written.bookies[bookie].index_files.values()))
    os.unlink(idx)
    t1, _s = audit(spark, disks, root, tmp_path / "out", state=state, day=1)
    assert changed in deep_on(state, disk, T0 + DAY)
    missing = lambda t: {b for r in t["under_replicated"].to_pylist()   # noqa: E731
                         for b in (r["bookies_missing"] or []) + (r.get("bookies_not_indexed") or [])}
    assert bookie not in missing(t0) and bookie in missing(t1)


def test_deep_all_gives_the_fault_tables_of_the_audit_without_a_state(spark, cluster, tmp_path):
    root, disks = cluster
    plain, _s = audit(spark, disks, root, tmp_path / "plain")
    deep, summary = audit(spark, disks, root, tmp_path / "deep", state=tmp_path / "state", deep_all=True)
    for name in FAULT_TABLES + ("replicas",):
        drop = [c for c in VOLATILE if c in plain[name].column_names]
        assert deep[name].drop(drop).sort_by([(c, "ascending") for c in deep[name].drop(drop).column_names[:4]]) \
            .equals(plain[name].drop(drop).sort_by([(c, "ascending") for c in plain[name].drop(drop).column_names[:4]]))
    assert summary["scrub"]["logs_deep_checked"] == summary["scrub"]["logs_total"]
    assert summary["scrub"]["deep_bytes"] == summary["scrub"]["payload_bytes"]
    # The next run walks most logs light: the fault tables stay those of the audit that read every byte.
    light, summary = audit(spark, disks, root, tmp_path / "light", state=tmp_path / "state", day=1)
    assert 0 < summary["scrub"]["deep_bytes"] < summary["scrub"]["payload_bytes"] / 2
    for name in FAULT_TABLES:
        assert rows(light[name]) == rows(plain[name]), name


def test_a_run_killed_mid_way_leaves_the_last_good_state_and_the_next_completes_the_schedule(
        spark, cluster, tmp_path):
    """`bkdisk audit --state` killed (SIGKILL, as the OOM killer or a lost host does) while a disk's scan
    task runs: its scan held waiting for the host's scan slot, which the test holds."""
    root, disks = cluster
    state = tmp_path / "state"
    audit(spark, disks, root, tmp_path / "out", state=state, day=0)
    before = (state / "logs.parquet").read_bytes()
    with audit_mid_scan([*[d.path for d in disks], "--metadata-dir", str(root / "metadata"),
                         "--out", str(tmp_path / "killed"), "--state", str(state),
                         "--as-of", (T0 + DAY).isoformat()], tmp_path) as (p, _err):
        os.killpg(p.pid, signal.SIGKILL)
        assert p.wait(timeout=60) == -signal.SIGKILL
    assert (state / "logs.parquet").read_bytes() == before
    due = {path: {lid for lid, s in d.logs.items() if s.due_at == T0 + DAY}
           for path, d in read_state(str(state)).items()}
    assert all(due.values())
    audit(spark, disks, root, tmp_path / "out", state=state, day=1)   # the killed run's share, done by the next
    for path, lids in due.items():
        assert lids <= deep_on(state, path, T0 + DAY)
