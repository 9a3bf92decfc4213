"""specs/fsck.md agrees with the problem table; the CLI keeps e2fsck's exit codes and JSON schema."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLDEN

from bkdisk.fsck.problems import PROBLEMS
from bkdisk.fsck_cli import fsck_command
from tests.fsck_helpers import flip, make_disk

ROOT = Path(__file__).resolve().parents[1]


def test_fsck_spec_lists_every_code_with_its_severity_pass_and_repairability():
    text = (ROOT / "specs" / "fsck.md").read_text()
    assert "<!-- fsck-codes: fsck.problems.PROBLEMS -->" in text
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| (\w+) \| (\d) \| (yes|no) \|", text, re.M)
    assert rows, "no code rows found in specs/fsck.md"
    table = {c: (s, int(p), r == "yes") for c, s, p, r in rows}
    assert table == {p.code: (p.severity.value, p.pass_no, p.repairable) for p in PROBLEMS.values()}


def _invoke(args):
    return CliRunner().invoke(fsck_command, args, catch_exceptions=False)


def test_usage_errors_exit_16():
    assert subprocess.run([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", "--jobs", "0"],
                          capture_output=True).returncode == 16
    assert subprocess.run([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()"],
                          capture_output=True).returncode == 16


def test_missing_root_is_an_operational_error_exit_8_with_one_line(tmp_path):
    r = _invoke([str(tmp_path / "nope"), "--no-progress"])
    assert r.exit_code == 8
    assert len(r.output.strip().splitlines()) == 1 and "nope" in r.output


def test_json_report_follows_the_documented_schema(tmp_path):
    d = make_disk(str(tmp_path))
    r = _invoke([d.root, "--metadata-dir", d.md_dir, "--json", "--no-progress"])
    doc = json.loads(r.output)
    assert doc["schema"] == "bkdisk.fsck/1"
    assert set(doc) >= {"dirs", "summary", "passes", "stats", "findings"}
    assert [p["pass"] for p in doc["passes"]] == [1, 2, 3, 4, 5, 6, 7]
    assert doc["summary"]["exit_code"] == r.exit_code == 0
    assert doc["stats"]["entries"] == len(d.written.entries)


def test_without_metadata_pass_7_says_it_was_skipped(tmp_path):
    d = make_disk(str(tmp_path))
    doc = json.loads(_invoke([d.root, "--json", "--no-progress"]).output)
    p7 = doc["passes"][6]
    assert p7["skipped"] == "no ledger metadata given"
    assert any(f["code"] == "METADATA_SKIPPED" for f in doc["findings"])


def test_repair_without_yes_and_without_a_terminal_changes_nothing_and_exits_8(tmp_path):
    d = make_disk(str(tmp_path))
    idx = d.written.index_files[next(iter(d.written.index_files))]
    with open(idx, "r+b") as f:
        f.write(b"\0\0\0\0")
    before = open(idx, "rb").read()
    r = _invoke([d.root, "--repair", "--no-progress"])
    assert r.exit_code == 8
    assert open(idx, "rb").read() == before


def test_repair_refuses_while_another_process_holds_the_dirs(tmp_path):
    d = make_disk(str(tmp_path))
    idx = d.written.index_files[next(iter(d.written.index_files))]
    with open(idx, "r+b") as f:
        f.write(b"\0\0\0\0")
    holder = subprocess.Popen([sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); print('ready', flush=True);"
                               " time.sleep(60)", d.written.journal_files[0]], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        r = _invoke([d.root, "--repair", "--yes", "--no-progress"])
        assert r.exit_code == 8 and "not repairing without --force" in r.output
        r = _invoke([d.root, "--repair", "--yes", "--force", "--no-progress",
                     "--backup-dir", str(tmp_path / "bk")])
        assert r.exit_code == 1, r.output
    finally:
        holder.kill()
        holder.wait()


def test_ctrl_c_exits_32(tmp_path, monkeypatch):
    d = make_disk(str(tmp_path))
    import bkdisk.fsck.api as api  # bkdisk.fsck_cli reads the checker from fsck.api when a check runs

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(api, "check_bookie", interrupted)
    assert _invoke([d.root, "--no-progress"]).exit_code == 32


def test_repair_keeps_the_replaced_file_in_the_backup_folder(tmp_path):
    d = make_disk(str(tmp_path))
    idx = d.written.index_files[next(iter(d.written.index_files))]
    with open(idx, "r+b") as f:
        f.write(b"\0\0\0\0")
    damaged = open(idx, "rb").read()
    r = _invoke([d.root, "--repair", "--yes", "--no-progress", "--backup-dir", str(tmp_path / "bk")])
    assert r.exit_code == 1, r.output
    kept = list((tmp_path / "bk").iterdir())
    assert len(kept) == 1 and kept[0].read_bytes() == damaged


@pytest.mark.parametrize("corpus", ["interleaved-v6-hostport", "sorted-v5-bookieid", "interleaved-v4-smallpage",
                                    "dbstorage-v6-bookieid", "cluster-3/bookies/bk-1.rack-a",
                                    "cluster-3/bookies/bk-2.rack-a", "cluster-3/bookies/bk-3.rack-b"])
def test_every_golden_corpus_checks_without_errors_and_exit_0(corpus):
    assert GOLDEN.is_dir(), f"golden corpora missing at {GOLDEN}"
    md = GOLDEN / ("cluster-3" if corpus.startswith("cluster-3") else corpus) / "metadata"
    r = _invoke([str(GOLDEN / corpus), "--metadata-dir", str(md), "--json", "--no-progress"])
    doc = json.loads(r.output)
    assert r.exit_code == 0
    assert [f for f in doc["findings"] if f["severity"] == "error"] == []
    warn = {f["code"] for f in doc["findings"] if f["severity"] == "warning"}
    assert warn == {"COOKIE_DIR_ELSEWHERE"}
    assert all(p["skipped"] is None for p in doc["passes"])      # DbLedgerStorage too: every pass ran
    manifest = json.loads((GOLDEN / corpus / "manifest.json").read_text())
    assert doc["stats"]["entries"] == len(manifest["entry_log_records"])


def test_flipped_payload_in_a_copy_of_a_golden_corpus_is_found(tmp_path):
    import shutil
    src = GOLDEN / "interleaved-v6-hostport"
    dst = tmp_path / "c"
    shutil.copytree(src, dst)
    for dp, _dn, fn in os.walk(dst):
        os.chmod(dp, 0o755)
        for n in fn:
            os.chmod(os.path.join(dp, n), 0o644)
    m = json.loads((src / "manifest.json").read_text())
    rec = next(r for r in m["entry_log_records"] if r["ledger_id"] == "1" and r["entry_id"] == 2)
    path = dst / rec["ledger_dir"] / "current" / rec["entry_log_file"]
    flip(str(path), rec["offset"] + 4 + 32 + 4 + 5)
    doc = json.loads(_invoke([str(dst), "--metadata-dir", str(dst / "metadata"), "--json", "--no-progress"]).output)
    bad = [f for f in doc["findings"] if f["code"] == "DIGEST_MISMATCH"]
    assert [(f["ledger"], f["entry"], f["offset"], f["path"]) for f in bad] == [(1, 2, rec["offset"], str(path))]


def _run_in_terminal(args: list[str], answers: str, timeout: float = 120.0) -> tuple[int, str]:
    """Run bookie-fsck with a pseudo-terminal as stdin/stdout, typing ``answers`` at its prompts."""
    import pty
    import select
    import time
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", *args],
                         stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out, sent, deadline = b"", False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not sent and b"[y/N]" in out:
                os.write(master, answers.encode())
                sent = True
        elif p.poll() is not None:
            break
    p.wait(timeout=30)
    os.close(master)
    return p.returncode, out.decode(errors="replace")


def test_interactive_repair_asks_on_a_terminal_and_a_yes_repairs(tmp_path):
    d = make_disk(str(tmp_path))
    idx = d.written.index_files[next(iter(d.written.index_files))]
    with open(idx, "r+b") as f:
        f.write(b"\0\0\0\0")
    code, out = _run_in_terminal([d.root, "--repair", "--no-progress", "--backup-dir", str(tmp_path / "bk")], "y\n")
    assert "rebuild-index" in out and "[y/N]" in out
    assert code == 1, out


def test_interactive_repair_answered_no_leaves_the_error_and_exits_4(tmp_path):
    d = make_disk(str(tmp_path))
    idx = d.written.index_files[next(iter(d.written.index_files))]
    with open(idx, "r+b") as f:
        f.write(b"\0\0\0\0")
    before = open(idx, "rb").read()
    code, out = _run_in_terminal([d.root, "--repair", "--no-progress"], "n\n")
    assert code == 4, out
    assert open(idx, "rb").read() == before


def _conf(path: Path, journal: list[str], ledgers: list[str]) -> str:
    path.write_text("# bk_server.conf\n"
                    "bookiePort=3181\n"
                    f"journalDirectories={','.join(journal)}\n"
                    f"ledgerDirectories = {','.join(ledgers)}\n")
    return str(path)


def test_dirs_from_a_bookkeeper_server_conf(tmp_path):
    d = make_disk(str(tmp_path))
    conf = _conf(tmp_path / "bk_server.conf", d.dirs.journal_dirs, d.dirs.ledger_dirs)
    r = _invoke(["--conf", conf, "--metadata-dir", d.md_dir, "--json", "--no-progress"])
    doc = json.loads(r.output)
    assert r.exit_code == 0 and doc["dirs"]["ledger"] == d.dirs.ledger_dirs
    assert doc["stats"]["entries"] == len(d.written.entries)


def test_cookie_dirs_that_differ_from_the_conf_are_an_error_but_only_a_warning_when_found_by_root(tmp_path):
    d = make_disk(str(tmp_path))
    moved = tmp_path / "mnt"
    os.rename(d.root, moved)
    dirs = [str(moved / "journal")], [str(moved / "ledgers0"), str(moved / "ledgers1")]
    conf = _conf(tmp_path / "bk_server.conf", *dirs)
    doc = json.loads(_invoke(["--conf", conf, "--json", "--no-progress"]).output)
    assert {f["code"] for f in doc["findings"] if f["severity"] == "error"} == {"COOKIE_DIR_CONF_MISMATCH"}
    doc = json.loads(_invoke([str(moved), "--json", "--no-progress"]).output)
    assert "COOKIE_DIR_ELSEWHERE" in {f["code"] for f in doc["findings"] if f["severity"] == "warning"}
    assert doc["summary"]["exit_code"] == 0


def test_explicit_dirs_on_the_command_line(tmp_path):
    d = make_disk(str(tmp_path))
    args = [a for j in d.dirs.journal_dirs for a in ("--journal-dir", j)] + \
           [a for l in d.dirs.ledger_dirs for a in ("--ledger-dir", l)]
    r = _invoke([*args, "--json", "--no-progress"])
    assert r.exit_code == 0, r.output
    both = subprocess.run([sys.executable, "-c", "from bkdisk.fsck_cli import main; main()", d.root, *args],
                          capture_output=True, text=True)
    assert both.returncode == 16 and "exactly one of ROOT" in both.stderr   # ROOT and explicit dirs exclude each other


def test_without_metadata_digest_types_are_sniffed_and_hmac_and_dummy_ledgers_reported_unverified():
    corpus = GOLDEN / "interleaved-v6-hostport"
    from bkdisk.bookie.layout import discover
    from bkdisk.fsck.api import check_bookie
    rep = check_bookie(discover(str(corpus)))
    m = json.loads((corpus / "manifest.json").read_text())
    by_type = {}
    for l in m["ledgers"]:
        by_type.setdefault(l["digest_type"], set()).add(int(l["ledger_id"]))
    sniffed = {f.detail.split(" ")[0]: {k[1] for k in f.extra["ledgers"]}
               for f in rep.findings if f.code == "DIGEST_SNIFFED"}
    assert sniffed == {"CRC32": by_type["CRC32"], "CRC32C": by_type["CRC32C"]}
    unverified = {f.ledger for f in rep.findings if f.code == "DIGEST_NOT_VERIFIED"}
    assert unverified == by_type["HMAC"] | by_type["DUMMY"]
    stored: dict = {}   # each such ledger's entries in the entry logs, every one of them unverified
    for scan in rep.context.log_scans.values():
        for lid in scan.entries["ledger"].tolist():
            stored[lid] = stored.get(lid, 0) + 1
    for f in rep.findings:
        if f.code == "DIGEST_NOT_VERIFIED":
            assert f.detail.startswith(f"{stored[f.ledger]} entries; "), f.detail
    assert rep.errors == []
