"""``bkdisk inventory``: JSON lines against the golden manifests, digest sniffing, --conf, one-line errors."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import GOLDEN
from hypothesis import given, settings
from hypothesis import strategies as st

from bkdisk.bookie.model import BookieSpec, LedgerSpec
from bkdisk.bookie.writer import write_bookie
from bkdisk.formats.digests import DigestType
from bkdisk.formats.metadata import parse_metadata, serialize_metadata
from bkdisk.inventory_cli import inventory

REPO = Path(__file__).resolve().parents[1]
SINGLE = ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage", "dbstorage-v6-bookieid"]
CORPORA = [GOLDEN / c for c in SINGLE] + (sorted((GOLDEN / "cluster-3" / "bookies").glob("*"))
                                           or [GOLDEN / "cluster-3" / "bookies" / "<missing>"])
IDS = [str(c.relative_to(GOLDEN)) for c in CORPORA]
ROW_KEYS = {"bookie_id", "ledger_dir", "log_id", "offset", "scope", "ledger", "entry", "format", "size", "lac",
            "length", "payload_len", "digest_type", "digest_source", "digest_ok"}


def _manifest(corpus: Path) -> dict:
    assert (corpus / "manifest.json").is_file(), f"golden corpus missing: {corpus}"
    return json.loads((corpus / "manifest.json").read_text())


def _metadata_dir(corpus: Path) -> Path:
    return corpus / "metadata" if (corpus / "metadata").is_dir() else corpus.parents[1] / "metadata"


def run(*args: str):
    r = CliRunner().invoke(inventory, list(args))
    return r.exit_code, r.stdout, r.stderr


def rows_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_golden_corpora_are_present():
    assert GOLDEN.is_dir(), f"golden folder missing: {GOLDEN}"
    assert all((c / "manifest.json").is_file() for c in CORPORA) and len(CORPORA) == 7
    assert all(_metadata_dir(c).is_dir() for c in CORPORA)


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_jsonl_rows_equal_the_manifest_entries_with_metadata(corpus: Path):
    doc = _manifest(corpus)
    code, out, err = run(str(corpus), "--jsonl", "--payload-hash", "sha256",
                         "--metadata-dir", str(_metadata_dir(corpus)))
    assert code == 0, err
    assert err == ""
    rows = rows_of(out)
    assert all(set(r) == ROW_KEYS | {"payload_sha256"} for r in rows)
    got = sorted((r["ledger"], r["entry"], r["payload_len"], r["payload_sha256"]) for r in rows)
    want = sorted((int(e["ledger_id"]), e["entry_id"], e["payload_length"], e["payload_sha256"])
                  for e in doc["entries"])
    assert got == want
    types = {int(e["ledger_id"]): e["digest_type"] for e in doc["entries"]}
    # a DUMMY entry carries no digest: nothing was verified (null); every other entry verified
    assert all(r["digest_ok"] is (None if types[r["ledger"]] == "DUMMY" else True)
               and r["digest_source"] == "metadata" for r in rows)
    assert all(r["digest_type"] == types[r["ledger"]] for r in rows)
    assert {r["bookie_id"] for r in rows} == {doc["bookie_id"]}
    places = sorted((r["ledger_dir"], f"{r['log_id']:x}.log", r["offset"], r["ledger"], r["entry"]) for r in rows)
    assert places == sorted((x["ledger_dir"], x["entry_log_file"], x["offset"], int(x["ledger_id"]), x["entry_id"])
                            for x in doc["entry_log_records"])


@pytest.mark.parametrize("corpus", CORPORA, ids=IDS)
def test_without_metadata_crc_digests_are_sniffed_and_the_rest_is_unknown(corpus: Path):
    doc = _manifest(corpus)
    code, out, err = run(str(corpus), "--jsonl")
    assert code == 0, err
    rows = rows_of(out)
    assert all(set(r) == ROW_KEYS for r in rows) and len(rows) == len(doc["entries"])
    types = {int(e["ledger_id"]): e["digest_type"] for e in doc["entries"]}
    plen = {(int(e["ledger_id"]), e["entry_id"]): e["payload_length"] for e in doc["entries"]}
    for r in rows:
        kind = types[r["ledger"]]
        if kind in ("CRC32", "CRC32C"):
            assert (r["digest_type"], r["digest_ok"], r["digest_source"]) == (kind, True, "sniffed")
        else:  # HMAC without a password, and DUMMY, cannot be told apart from bytes: unknown
            assert (r["digest_type"], r["digest_ok"]) == (None, None)
        assert r["payload_len"] == plen[(r["ledger"], r["entry"])]
    assert {types[r["ledger"]] for r in rows if r["digest_ok"] is None} <= {"HMAC", "DUMMY"}


def test_hmac_is_sniffed_when_metadata_gives_only_the_password():
    corpus = GOLDEN / "interleaved-v6-hostport"
    doc = _manifest(corpus)
    hmac_ledgers = [l for l in doc["ledgers"] if l["digest_type"] == "HMAC"]
    assert hmac_ledgers
    with tempfile.TemporaryDirectory() as d:
        for l in hmac_ledgers:
            src = corpus / "metadata" / f"{l['ledger_id_hex']}.bin"
            md = dataclasses.replace(parse_metadata(src.read_bytes()), digest_type=None)
            Path(d, src.name).write_bytes(serialize_metadata(md))
        code, out, err = run(str(corpus), "--jsonl", "--metadata-dir", d)
    assert code == 0, err
    rows = [r for r in rows_of(out) if r["ledger"] in {int(l["ledger_id"]) for l in hmac_ledgers}]
    assert rows and all((r["digest_type"], r["digest_ok"], r["digest_source"]) == ("HMAC", True, "sniffed")
                        for r in rows)


def test_conf_gives_the_same_rows_as_the_root_folder():
    corpus = GOLDEN / "interleaved-v6-hostport"
    doc = _manifest(corpus)
    with tempfile.TemporaryDirectory() as d:
        conf = Path(d, "bk_server.conf")
        conf.write_text("# test\njournalDirectories=" + ",".join(str(corpus / j) for j in doc["journal_dirs"]) +
                        "\nledgerDirectories=" + ",".join(str(corpus / l) for l in doc["ledger_dirs"]) + "\n")
        a = run("--conf", str(conf), "--jsonl", "--payload-hash", "sha256")
    b = run(str(corpus), "--jsonl", "--payload-hash", "sha256")
    assert a[0] == b[0] == 0
    assert rows_of(a[1]) == rows_of(b[1]) and len(rows_of(a[1])) == len(doc["entries"])


def test_several_roots_keep_their_own_bookie_ids_and_sniffing():
    """cluster-3 and sorted-v5 reuse ledger ids with different digest types: sniffing is per bookie."""
    a, b = GOLDEN / "cluster-3" / "bookies" / "bk-1.rack-a", GOLDEN / "sorted-v5-bookieid"
    code, out, err = run(str(a), str(b), "--jsonl")
    assert code == 0, err
    rows = rows_of(out)
    for corpus in (a, b):
        doc = _manifest(corpus)
        mine = [r for r in rows if r["bookie_id"] == doc["bookie_id"]]
        assert len(mine) == len(doc["entries"])
        types = {int(e["ledger_id"]): e["digest_type"] for e in doc["entries"]}
        assert all(r["digest_ok"] is True for r in mine if types[r["ledger"]] in ("CRC32", "CRC32C"))


def test_summary_without_jsonl_counts_entries_and_digests():
    corpus = GOLDEN / "interleaved-v4-smallpage"
    doc = _manifest(corpus)
    code, out, err = run(str(corpus), "--metadata-dir", str(corpus / "metadata"))
    assert code == 0, err
    n = len(doc["entries"])
    assert f"bookie {doc['bookie_id']}: {n} entries in {len(doc['ledgers'])} ledgers" in out
    dummy = sum(1 for e in doc["entries"] if e["digest_type"] == "DUMMY")
    assert f"digests ok {n - dummy}, bad 0, unverifiable {dummy}; framing problems 0" in out


def test_damaged_log_warns_on_stderr_and_still_lists_every_intact_entry():
    with tempfile.TemporaryDirectory() as d:
        ledgers = [LedgerSpec(3, [os.urandom(500) for _ in range(20)], digest_type=DigestType.CRC32C)]
        wb = write_bookie(BookieSpec(ledgers), d)
        log = wb.entry_log_files[0]
        b = bytearray(Path(log).read_bytes())
        first = min(wb.locations.values()) & 0xFFFFFFFF
        victim = sorted(loc & 0xFFFFFFFF for loc in wb.locations.values())[5] - 4
        b[victim + 4 + 8] ^= 0x80
        b[first + 100] ^= 0xFF
        Path(log).write_bytes(bytes(b))
        code, out, err = run(d, "--jsonl")
    assert code == 4, "damage seen: exit 4, every readable row still listed"
    rows = rows_of(out)
    assert sorted(r["entry"] for r in rows) == [e for e in range(20) if e != 5]
    assert [r["digest_ok"] for r in rows].count(False) == 1
    assert f"offset {victim}: framing broken (bad_header)" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args,needle", [
    ((), "nothing to inventory"),
    (("/nonexistent/bookie",), "/nonexistent/bookie: no such folder"),
    (("--conf", "/nonexistent/bk_server.conf"), "cannot read"),
    ((str(GOLDEN / "interleaved-v6-hostport"), "--metadata-dir", "/nonexistent/md"), "cannot list the metadata folder"),
])
def test_errors_print_one_line_and_exit_non_zero(args, needle):
    code, out, err = run(*args)
    assert code != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bkdisk: ") and needle in lines[0]


def test_malformed_metadata_file_is_a_one_line_error():
    with tempfile.TemporaryDirectory() as d:
        Path(d, "ff.bin").write_bytes(b"BookieMetadataFormatVersion\t3\n\x05garbage")
        code, out, err = run(str(GOLDEN / "interleaved-v6-hostport"), "--metadata-dir", d)
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bkdisk: ") and "ff.bin" in lines[0]


def test_inventory_runs_from_the_bkdisk_command_line():
    corpus = GOLDEN / "sorted-v5-bookieid"
    r = subprocess.run([sys.executable, "-c", "from bkdisk.cli import main; main()", "inventory", str(corpus),
                        "--jsonl", "--metadata-dir", str(corpus / "metadata")],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert len(rows_of(r.stdout)) == len(_manifest(corpus)["entries"])


def test_parquet_holds_exactly_the_jsonl_rows(tmp_path):
    import pyarrow.parquet as pq
    corpus = GOLDEN / "interleaved-v6-hostport"
    md = str(corpus / "metadata")
    code, out, err = run(str(corpus), "--jsonl", "--payload-hash", "sha256", "--metadata-dir", md)
    assert code == 0, err
    target = tmp_path / "rows.parquet"
    code, _out, err = run(str(corpus), "--parquet", str(target), "--payload-hash", "sha256", "--metadata-dir", md)
    assert code == 0, err
    assert pq.read_table(target).to_pylist() == rows_of(out)
    assert [p.name for p in tmp_path.iterdir()] == ["rows.parquet"], "no temp file left behind"


def test_payload_hash_without_rows_to_carry_it_is_a_usage_error():
    r = subprocess.run([sys.executable, "-c", "from bkdisk.cli import main; main()", "inventory",
                        str(GOLDEN / "interleaved-v6-hostport"), "--payload-hash", "sha256"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 16 and "use it with --jsonl or --parquet" in r.stderr and r.stdout == ""


def test_ledger_options_limit_the_rows_to_that_ledger_in_either_spelling(tmp_path):
    from bkdisk.demo import sample_spec
    from bkdisk.formats.ids import LedgerId
    write_bookie(sample_spec(), str(tmp_path / "b"))
    code, out, err = run(str(tmp_path / "b"), "--jsonl")
    assert code == 0, err
    every = rows_of(out)
    lid = LedgerId(0x5EED0000CAFE, 0x42)
    want = [r for r in every if (r["scope"], r["ledger"]) == (lid.scope, lid.ledger)]
    assert want and len(want) < len(every)
    by_name = rows_of(run(str(tmp_path / "b"), "--jsonl", "--ledger-qualified-name", lid.qualified_name)[1])
    by_ids = rows_of(run(str(tmp_path / "b"), "--jsonl", "--ledger-scope-id", hex(lid.scope),
                         "--ledger-id", hex(lid.ledger))[1])
    assert by_name == want and by_ids == want


def test_the_commands_window_default_is_the_scanners_and_its_help_loads_no_scanner():
    from bkdisk.entrylogs.scan import DEFAULT_WINDOW
    from bkdisk.inventory_cli import WINDOW_DEFAULT
    assert WINDOW_DEFAULT == DEFAULT_WINDOW
    probe = ("import sys\nfrom bkdisk.cli import main\ntry:\n    main(['inventory', '--help'])\n"
             "except SystemExit:\n    pass\nprint(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'numba'}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def _rows_in_turn(dirs, plan=None, window=None):
    """(ledger dir, log id, scan) of each entry log scanned one after another with one plan."""
    from bkdisk.bookie import inventory as inv
    from bkdisk.digests.plan import DigestPlan
    from bkdisk.entrylogs.scan import scan_entry_log
    want, plan = [], plan or DigestPlan()
    for ld in dirs.ledger_dirs:
        for log_id, path in inv.entry_logs(ld)[0]:
            want.append((inv.ledger_dir_name(ld), log_id,
                         scan_entry_log(path, digests=plan, **({} if window is None else {"window": window}))))
    return want


def _same_rows(got, want):
    assert [(r.ledger_dir, r.log_id) for r in got] == [(d, i) for d, i, _ in want]
    for r, (_d, _i, s) in zip(got, want):
        assert (r.entries == s.entries).all() and (r.digests == s.digests).all()


def _same_rows_in_parts(got, want, rows):
    """``got``: each log's rows in parts of at most ``rows``, its warnings with its first part only."""
    logs = []
    for r in got:
        assert len(r) <= rows and (r.first or (not r.warnings and r.problems == 0))
        if r.first:
            logs.append([r])
        else:
            assert logs and (logs[-1][0].ledger_dir, logs[-1][0].log_id) == (r.ledger_dir, r.log_id)
            logs[-1].append(r)
    assert [(p[0].ledger_dir, p[0].log_id) for p in logs] == [(d, i) for d, i, _ in want]
    assert max(len(p) for p in logs) > 1, "no log came in parts"
    for parts, (_d, _i, s) in zip(logs, want):
        assert np.array_equal(np.concatenate([p.entries for p in parts]), s.entries)
        assert np.array_equal(np.concatenate([p.digests for p in parts]), s.digests)


def _in_parts(monkeypatch, tmp_path, scan_bookie, dirs, plan, **kw):
    """scan_bookie whose scans hand over a part a window of 4 KiB and spill every part (the share of
    the limit for rows smaller than a window's), its logs' rows given 5 at a time; with ``jobs`` above
    1, logs side by side (nothing set aside for the rest of a command, the rows of two logs within the
    limit): the first scan waits for a second to begin, so two are under way at once."""
    import threading

    from bkdisk.bookie import inventory as inv
    from bkdisk.diskio.scan_sink import ScanSink
    from bkdisk.diskio.spill import MemoryLimit, SpillFolder
    monkeypatch.setattr(ScanSink, "part_bytes", 1)
    monkeypatch.setattr(inv, "OTHER_MEMORY", 0)
    monkeypatch.setattr(inv, "ROWS_SHARE", 1 / 128)   # 64 bytes of 8 KiB: not one window's rows
    side_by_side = kw.get("jobs", 1) > 1
    started, most, running, lock, second, real = [0], [0], [0], threading.Lock(), threading.Event(), inv.scan_entry_log

    def counted(path, **scan_kw):
        with lock:
            started[0] += 1
            running[0] += 1
            most[0] = max(most[0], running[0])
            first = started[0] == 1
            if started[0] == 2:
                second.set()
        try:
            if first and side_by_side:
                second.wait(10)
            return real(path, **scan_kw)
        finally:
            with lock:
                running[0] -= 1
    monkeypatch.setattr(inv, "scan_entry_log", counted)
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir(exist_ok=True)
    with SpillFolder(MemoryLimit(1, str(spill_dir))) as spill:
        got = list(scan_bookie(dirs, plan, window=4096, memory_bytes=8 << 10, spill=spill, rows=5, **kw))
        assert spill.path is not None and os.listdir(spill.path) == []   # each log's files gone with its rows
    if side_by_side:
        assert most[0] > 1, "no two logs were scanned side by side"
    monkeypatch.setattr(inv, "scan_entry_log", real)
    return got


def test_logs_scanned_side_by_side_give_the_rows_of_scanning_each_in_turn_in_order(tmp_path, monkeypatch):
    """scan_bookie scans up to ``jobs`` entry logs at once on helper threads, ahead of the caller;
    the rows are those of scanning the logs one after another with one plan (ledgers span logs
    here, so the logs' sniffing meets), in log order, also when a later log's scan ends first."""
    import shutil
    import threading
    import time

    import bkdisk.entrylogs.scan as es
    from bkdisk.bookie import inventory as inv
    from bkdisk.bookie.layout import discover
    from bkdisk.digests.plan import DigestPlan
    root = tmp_path / "b"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root)
    dirs = discover(str(root))
    want = _rows_in_turn(dirs)
    assert len(want) >= 3 and len({w[0] for w in want}) == 2
    running, most, ended, real = set(), [0], [], es.scan_entry_log
    first = want[0][2].path

    def first_log_ends_last(path, **kw):
        running.add(path)
        most[0] = max(most[0], len(running))
        assert threading.current_thread().name.startswith("inventory-scan")
        try:
            time.sleep(0.4 if path == first else 0.05)   # the first log's scan ends after the second's
            return real(path, **kw)
        finally:
            running.discard(path)
            ended.append(path)

    monkeypatch.setattr(inv, "scan_entry_log", first_log_ends_last)
    got = list(inv.scan_bookie(dirs, DigestPlan(), jobs=2))
    assert most[0] == 2                          # two logs at once, never more
    assert ended.index(first) > ended.index(want[1][2].path)
    _same_rows(got, want)
    # A memory limit with no room for a second log's rows: one log at a time, the same rows.
    most[0] = 0
    got = list(inv.scan_bookie(dirs, DigestPlan(), jobs=2, memory_bytes=inv.OTHER_MEMORY + 1024))
    assert most[0] == 1
    _same_rows(got, want)
    # Scans that spill as they go, each log's rows a few at a time: the same rows.
    _same_rows_in_parts(_in_parts(monkeypatch, tmp_path, inv.scan_bookie, dirs, DigestPlan(), jobs=2),
                        _rows_in_turn(dirs, window=4096), 5)


@pytest.mark.parametrize("corrupt_log", [0, 1])
def test_logs_side_by_side_whose_ledger_was_sniffed_apart_give_the_rows_in_turn(tmp_path, corrupt_log):
    """Ledger 7 spans the first two logs, its entries in one of them all corrupt. Scanned in turn,
    the first log decides the ledger (as no type when its samples fail, as CRC32C when they verify)
    and the second log's entries follow that decision (unknown, or BAD); side by side, each log's
    fork sniffs the ledger alone and decides otherwise: the rows must still be those in turn."""
    from bkdisk.bookie import inventory as inv
    from bkdisk.bookie.layout import discover
    from bkdisk.digests.kernels import DIGEST_BAD, DIGEST_UNKNOWN
    from bkdisk.digests.plan import DigestPlan
    payloads = [bytes([i % 251]) * 300 for i in range(40)]
    spec = BookieSpec(ledgers=[LedgerSpec(7, payloads), LedgerSpec(9, payloads[:30])], entry_log_size_limit=8192,
                      interleave=False)
    root = tmp_path / "b"
    write_bookie(spec, str(root))
    dirs = discover(str(root))
    logs = inv.entry_logs(dirs.ledger_dirs[0])[0]
    assert len(logs) >= 3
    scan = _rows_in_turn(dirs)[corrupt_log][2]
    mine = scan.entries[scan.entries["ledger"] == 7]
    assert len(mine) >= 8
    with open(logs[corrupt_log][1], "r+b") as f:   # each digest's first byte, flipped
        for e in mine:
            at = int(e["offset"]) + 4 + 32   # after the size prefix and the V1 header
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0xFF]))
    plan = dict(max_samples=4)
    want = _rows_in_turn(dirs, DigestPlan(**plan))
    second = want[1][2]
    status = second.digests["status"][second.entries["ledger"] == 7]
    assert (status == (DIGEST_UNKNOWN if corrupt_log == 0 else DIGEST_BAD)).all()
    for jobs in (1, 2, 3):
        _same_rows(list(inv.scan_bookie(dirs, DigestPlan(**plan), jobs=jobs)), want)
    with pytest.MonkeyPatch.context() as mp:   # scans that spill, their rows in parts: checked again in parts
        _same_rows_in_parts(_in_parts(mp, tmp_path, inv.scan_bookie, dirs, DigestPlan(**plan), jobs=2),
                            _rows_in_turn(dirs, DigestPlan(**plan), window=4096), 5)


def test_logs_side_by_side_check_again_only_the_ledgers_their_forks_decided_otherwise(tmp_path, monkeypatch):
    """Ledgers spanning every log, as on a busy bookie, decided by the first log in turn: side by side,
    each later log's fork sniffs them too. Where a fork decided one alike (the same CRC, no failed sample
    first) its rows stand; the others are checked again. A later log's first entry of ledger 7 is
    corrupt (its sample fails, the next verifies), ledger 11 is CRC32: the rows are those in turn."""
    from bkdisk.bookie import inventory as inv
    from bkdisk.bookie import plan_forks
    from bkdisk.bookie.layout import discover
    from bkdisk.digests.kernels import DIGEST_BAD
    from bkdisk.digests.plan import DigestPlan
    from bkdisk.formats.digests import DigestType
    payloads = [bytes([i % 251]) * 1500 for i in range(24)]
    spec = BookieSpec(ledgers=[LedgerSpec(7, payloads), LedgerSpec(9, payloads),
                               LedgerSpec(11, payloads, digest_type=DigestType.CRC32)], entry_log_size_limit=24 << 10)
    root = tmp_path / "b"
    write_bookie(spec, str(root))
    dirs = discover(str(root))
    assert len(inv.entry_logs(dirs.ledger_dirs[0])[0]) >= 3
    second = _rows_in_turn(dirs)[1][2]
    first7 = second.entries[second.entries["ledger"] == 7][0]
    with open(second.path, "r+b") as f:   # its digest's first byte, flipped
        at = int(first7["offset"]) + 4 + 32
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))
    want = _rows_in_turn(dirs, window=4096)
    w = want[1][2]
    assert w.digests["status"][w.entries["ledger"] == 7][0] == DIGEST_BAD
    alike, again = [], []
    real_alike, real_again = plan_forks._decided_alike, plan_forks._check_again
    monkeypatch.setattr(plan_forks, "_decided_alike",
                        lambda *a: alike.append(r := real_alike(*a)) or r)
    monkeypatch.setattr(plan_forks, "_check_again", lambda scan, plan, ledgers: again.append(
        sorted(ledgers.tolist())) or real_again(scan, plan, ledgers))
    for jobs in (2, 3):
        _same_rows(list(inv.scan_bookie(dirs, DigestPlan(), jobs=jobs, window=4096)), want)
    assert any(a.any() for a in alike)   # rows that stood, not checked again
    assert [7] in again                  # (the fork that met the corrupt entry first: checked again)
    assert sum(len(a) for a in alike) > sum(len(g) for g in again)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**64 - 1)), min_size=1, max_size=40),
                min_size=1, max_size=5))
def test_the_summary_counts_each_scope_and_ledger_once_over_all_logs(logs):
    from bkdisk.entrylogs.arrays import ENTRY_DTYPE
    from bkdisk.inventory_cli import BookieSummary
    summary = BookieSummary(None)
    for pairs in logs:
        e = np.zeros(len(pairs), ENTRY_DTYPE)
        e["scope"], e["ledger"] = [p[0] for p in pairs], [p[1] for p in pairs]
        summary.add_ledgers(e)
    assert summary.ledger_count() == len({p for pairs in logs for p in pairs})


@pytest.mark.parametrize("byte, said", [(1, "claims"), (0, "gives a ledger fewer than zero bytes")])
def test_a_ledgers_map_true_of_no_entries_is_damage_exit_4(tmp_path, byte, said):
    """A flipped byte of the first ledger's size in the map (after the batch's size, -1, -2|-3, the count
    and its id): a terabyte in a log of 387 KiB, or a negative size. The map parses, but no entries can
    make it true. Every row is still listed; the damage is said and the exit is 4."""
    import shutil

    from bkdisk.entrylogs.scan import scan_entry_log
    src = GOLDEN / "interleaved-v6-hostport"
    root = tmp_path / "bk"
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("tool-output"))
    log = root / "ledgers1" / "current" / "0.log"
    log.chmod(0o644)
    at = scan_entry_log(str(log)).header.ledgers_map_offset
    code0, out0, _ = run(str(src), "--jsonl")
    with open(log, "r+b") as fh:
        fh.seek(at + 4 + 8 + 8 + 4 + 8 + byte)
        fh.write(b"\xff")
    code, out, err = run(str(root), "--jsonl")
    assert code0 == 0 and code == 4, err
    assert f"{log}: the ledgers map {said}" in err, err
    assert len(rows_of(out)) == len(rows_of(out0))


def test_a_journal_dir_that_cannot_be_listed_is_said_so_not_said_empty(tmp_path):
    """Run unprivileged (permission checks real): the journal dir's ``current`` mode 000 is a folder not
    looked in, not "no journal file in any journal dir" (which says acknowledged entries are gone)."""
    import shutil
    import subprocess

    from fsck_helpers import unprivileged
    root = tmp_path / "bk"
    shutil.copytree(GOLDEN / "interleaved-v6-hostport", root, ignore=shutil.ignore_patterns("tool-output"))
    cur = root / "journal" / "current"
    cur.chmod(0)
    try:
        r = subprocess.run(unprivileged([str(Path(sys.executable).parent / "bkdisk"), "inventory", str(root)]),
                           capture_output=True, text=True, timeout=120)
    finally:
        cur.chmod(0o755)
    assert r.returncode == 4, r.stderr
    assert r.stderr == f"bkdisk: warning: {cur}: cannot list (Permission denied): its journals were not looked for\n"
