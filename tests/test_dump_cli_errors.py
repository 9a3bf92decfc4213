"""Damaged or missing input makes `bkdisk dump` fail with one line on stderr, never a traceback.

Corrupted copies of golden files are written into tmp_path: truncated and garbled journals, entry
logs, index files, lastMark files, cookies and ledger metadata. Each must exit non-zero with
exactly one stderr line that names the file and the offset of the damage.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import GOLDEN

from bkdisk.dump.command import dump
from bkdisk.formats.metadata import parse_metadata, serialize_metadata

REPO = Path(__file__).resolve().parents[1]
V6 = GOLDEN / "interleaved-v6-hostport"
V4 = GOLDEN / "interleaved-v4-smallpage"


@pytest.fixture(autouse=True)
def _golden_present():
    if not GOLDEN.is_dir():
        pytest.fail(f"golden corpora missing: {GOLDEN}")


def _copy(src: Path, tmp_path: Path, mutate=None, name: str | None = None) -> Path:
    data = bytearray(src.read_bytes())
    if mutate is not None:
        data = mutate(data)
    dst = tmp_path / (name or src.name)
    dst.write_bytes(bytes(data))
    return dst


def _put(data: bytearray, offset: int, raw: bytes) -> bytearray:
    data[offset:offset + len(raw)] = raw
    return data


def _assert_one_line_error(argv: list[str], path: Path | str, *, with_offset: bool = True):
    res = CliRunner().invoke(dump, argv)
    assert res.exit_code not in (0, None), res.stdout
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert str(path) in lines[0], lines[0]
    if with_offset:
        assert "offset" in lines[0], lines[0]
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout
    return res


# --------------------------------------------------------------------------------------------
# journal


JOURNAL = V6 / "journal" / "current" / "1a200497c66.txn"       # V6: first record at 512, length 752
JOURNAL_V4 = V4 / "journal" / "current" / "1a2004995d6.txn"    # V4: 8-byte header


def test_truncated_journal_reports_the_torn_record(tmp_path):
    p = _copy(JOURNAL, tmp_path, lambda d: d[:512 + 4 + 300])
    res = _assert_one_line_error(["journal", str(p)], p)
    assert "offset 512" in res.stderr
    assert res.stdout.startswith("Scan journal 1795301145702 (1a200497c66.txn)\n")


@pytest.mark.parametrize("cut", [8, 300, 511])
def test_a_journal_cut_inside_its_header_is_said_after_the_scan_line(tmp_path, cut):
    """BookKeeper positions a V5+ journal's read at 512 and reads nothing from such a file, as the dump
    prints; the cut header is damage all the same."""
    p = _copy(JOURNAL, tmp_path, lambda d: d[:cut])
    res = _assert_one_line_error(["journal", str(p)], p)
    assert res.stdout == f"Scan journal {int(p.stem, 16)} ({p.name})\n"
    assert res.stderr == (f"bkdisk: {p}: offset {cut}: expected a V6 journal's 512-byte header (magic, version, "
                          f"zeros to its end), found {cut} bytes: the file ends inside it\n")


def test_truncated_journal_in_json_mode_still_fails(tmp_path):
    p = _copy(JOURNAL, tmp_path, lambda d: d[:1536 + 100])
    res = _assert_one_line_error(["journal", "--json", str(p)], p)
    assert len(res.stdout.splitlines()) == 1          # the one complete record before the cut
    assert "offset 1536" in res.stderr


def test_journal_with_a_negative_record_length(tmp_path):
    p = _copy(JOURNAL, tmp_path, lambda d: _put(d, 1536, b"\xff\xff\xff\xf0"))
    res = _assert_one_line_error(["journal", str(p)], p)
    assert "offset 1536" in res.stderr


def test_journal_with_an_unknown_version(tmp_path):
    p = _copy(JOURNAL, tmp_path, lambda d: _put(d, 4, (9).to_bytes(4, "big")))
    res = _assert_one_line_error(["journal", str(p)], p)
    assert "offset 4" in res.stderr


def test_v4_journal_with_a_padding_marker(tmp_path):
    # -0x100 is a padding record only from V5 on; in a V4 journal it is a bad length
    p = _copy(JOURNAL_V4, tmp_path, lambda d: _put(d, 8, b"\xff\xff\xff\x00"))
    res = _assert_one_line_error(["journal", str(p)], p)
    assert "offset 8" in res.stderr


# --------------------------------------------------------------------------------------------
# entry log


LOG = V6 / "ledgers1" / "current" / "0.log"        # rolled: has a ledgers map
LOG_OPEN = V6 / "ledgers0" / "current" / "2.log"   # current at shutdown: no map


@pytest.mark.parametrize("argv_extra", [[], ["--metadata"], ["--json"]])
def test_truncated_entry_log(tmp_path, argv_extra):
    p = _copy(LOG_OPEN, tmp_path, lambda d: d[:5000])
    _assert_one_line_error(["entrylog", *argv_extra, str(p)], p)


def test_entry_log_with_a_garbled_header(tmp_path):
    p = _copy(LOG, tmp_path, lambda d: _put(d, 0, b"XXXX"))
    res = _assert_one_line_error(["entrylog", str(p)], p)
    assert "offset 0" in res.stderr


def test_entry_log_with_a_garbled_entry_size(tmp_path):
    # the second entry's size prefix (offset 1060) overwritten with a huge value
    p = _copy(LOG, tmp_path, lambda d: _put(d, 1060, b"\x7f\x00\x00\x00"))
    res = _assert_one_line_error(["entrylog", str(p)], p)
    assert "offset 1060" in res.stderr


@pytest.mark.parametrize("byte, said", [(1, r"claims 717761\d{11} bytes more than the log holds before it"),
                                        (0, "gives a ledger fewer than zero bytes")])
@pytest.mark.parametrize("argv_extra", [["--metadata"], []])
def test_a_ledgers_map_true_of_no_entries_is_printed_then_said(tmp_path, byte, said, argv_extra):
    """A flipped byte of the first ledger's size in the map (after the batch's size, -1, -2|-3, the count and
    its id): the shell prints such a map as it is, and so does the dump; the damage follows, exit 8."""
    from bkdisk.entrylogs.scan import scan_entry_log
    at = scan_entry_log(str(LOG)).header.ledgers_map_offset
    p = _copy(LOG, tmp_path, lambda d: _put(d, at + 4 + 8 + 8 + 4 + 8 + byte, b"\xff"))
    res = _assert_one_line_error(["entrylog", *argv_extra, str(p)], p)
    assert re.fullmatch(f"bkdisk: {re.escape(str(p))}: offset {at}: expected a ledgers map true of the entries "
                        f"before it, found one that {said}\n", res.stderr), res.stderr
    assert res.stdout == CliRunner().invoke(dump, ["entrylog", *argv_extra, str(LOG)]).stdout or byte == 1


def test_entry_log_shorter_than_its_header(tmp_path):
    p = _copy(LOG, tmp_path, lambda d: d[:700])
    _assert_one_line_error(["entrylog", "--metadata", str(p)], p)


# --------------------------------------------------------------------------------------------
# index


IDX = V6 / "ledgers1" / "current" / "0" / "ff" / "ff.idx"


def test_index_shorter_than_its_header(tmp_path):
    p = _copy(IDX, tmp_path, lambda d: d[:600])
    _assert_one_line_error(["index", str(p)], p)


def test_index_with_a_bad_signature(tmp_path):
    p = _copy(IDX, tmp_path, lambda d: _put(d, 0, b"NOPE"))
    res = _assert_one_line_error(["index", str(p)], p)
    assert "offset 0" in res.stderr


def test_index_cut_inside_a_slot(tmp_path):
    p = _copy(IDX, tmp_path, lambda d: d[:1024 + 8 * 5 + 3])
    res = _assert_one_line_error(["index", str(p)], p)
    # BookKeeper's own text for such a size is printed before the error
    assert "size : 43(not aligned with 8, may be corrupted or under flushing now)" in res.stdout
    assert f"offset {1024 + 40}" in res.stderr


def test_index_of_a_ledger_that_is_not_there(tmp_path):
    _assert_one_line_error(["index", str(V6), "--ledger-id", "12345"], V6, with_offset=False)


# --------------------------------------------------------------------------------------------
# lastMark, cookie, metadata


def test_truncated_last_mark_file(tmp_path):
    p = _copy(V6 / "ledgers0" / "current" / "lastMark", tmp_path, lambda d: d[:10])
    _assert_one_line_error(["lastmark", str(p)], p)


def test_truncated_last_mark_in_a_bookie_root(tmp_path):
    root = tmp_path / "bookie"
    shutil.copytree(V6 / "journal", root / "journal")
    for d in ("ledgers0", "ledgers1"):
        (root / d / "current").mkdir(parents=True)
        for f in ("lastMark", "lastId", "VERSION"):
            shutil.copy(V6 / d / "current" / f, root / d / "current" / f)
    bad = root / "ledgers1" / "current" / "lastMark"
    os.chmod(bad, 0o644)
    bad.write_bytes(bad.read_bytes()[:12])
    _assert_one_line_error(["lastmark", str(root)], bad)


@pytest.mark.parametrize("mutate", [
    lambda d: d[:30],                                # cut inside the bookieHost string
    lambda d: _put(d, 0, b"9"),                      # unknown layout version
    lambda d: d.replace(b"bookieHost", b"bookieHust"),
], ids=["truncated", "bad-version", "unknown-field"])
def test_garbled_cookie(tmp_path, mutate):
    p = _copy(V6 / "journal" / "current" / "VERSION", tmp_path, mutate)
    _assert_one_line_error(["cookie", str(p)], p)


@pytest.mark.parametrize("name, cut", [("ff.bin", 40), ("ff.txt", 60), ("ff.v1.txt", 10)])
def test_truncated_ledger_metadata(tmp_path, name, cut):
    p = _copy(V6 / "metadata" / name, tmp_path, lambda d: d[:cut])
    _assert_one_line_error(["metadata", str(p)], p)


_CANNOT_LOAD = {
    "write>ensemble": (lambda md: {"write_quorum": md.ensemble_size + 1, "ack_quorum": md.ensemble_size + 1},
                       "larger than the ensemble size"),
    "ack>write": (lambda md: {"ack_quorum": md.write_quorum + 1}, "larger than the write quorum"),
    "segments out of order": (lambda md: {"ensembles": md.ensembles * 2}, "does not start after the one at entry"),
    "short ensemble": (lambda md: {"ensembles": ((0, md.ensembles[0][1][:-1]),)}, "bookies, the ensemble size is"),
    "no ensemble": (lambda md: {"ensembles": ()}, "holds no ensemble"),
}


@pytest.mark.parametrize("name, case", [(n, c) for n in ("ff.bin", "ff.txt", "ff.v1.txt") for c in _CANNOT_LOAD
                                        if not (n == "ff.v1.txt" and c == "ack>write")])   # format 1: no ack quorum
def test_metadata_bookkeeper_cannot_load_is_printed_then_refused(tmp_path, name, case):
    """A record that parses but that BookKeeper's client refuses to build is shown, then named in one line
    with exit 8: an operator reading it must not take it for metadata the cluster can use."""
    change, why = _CANNOT_LOAD[case]
    md = parse_metadata((V6 / "metadata" / name).read_bytes())
    changed = dataclasses.replace(md, **change(md))
    p = tmp_path / name
    p.write_bytes(serialize_metadata(changed))
    res = _assert_one_line_error(["metadata", str(p)], p)
    assert res.exit_code == 8 and why in res.stderr and "BookKeeper's client" in res.stderr
    assert "ensemble" in res.stdout.lower()       # printed first
    assert CliRunner().invoke(dump, ["metadata", str(V6 / "metadata" / name)]).exit_code == 0


# --------------------------------------------------------------------------------------------
# missing paths, and a real process


@pytest.mark.parametrize("cmd", ["journal", "entrylog", "index", "lastmark", "cookie", "metadata"])
def test_missing_path_is_one_line(tmp_path, cmd):
    p = tmp_path / "no-such-file"
    _assert_one_line_error([cmd, str(p)], p, with_offset=False)


def _bkdisk_argv() -> list[str]:
    """The installed `bkdisk` script when the whole CLI can load; else the dump group in a python process."""
    script = Path(sys.executable).with_name("bkdisk")
    whole_cli = all(importlib.util.find_spec(m) is not None for m in ("bkdisk.demo", "bkdisk.inventory_cli"))
    if script.exists() and whole_cli:
        return [str(script), "dump"]
    return [sys.executable, "-c", "import sys; from bkdisk.dump.command import dump; dump(prog_name='bkdisk dump')"]


def test_a_real_process_exits_8_with_one_line(tmp_path):
    p = _copy(JOURNAL, tmp_path, lambda d: d[:600])
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(_bkdisk_argv() + ["journal", str(p)], capture_output=True, cwd=REPO, env=env,
                          timeout=120)
    assert proc.returncode == 8, proc.stderr
    err = proc.stderr.decode().splitlines()
    assert len(err) == 1 and str(p) in err[0] and "offset 512" in err[0], err
    assert b"Traceback" not in proc.stderr
    assert proc.stdout.decode().startswith("Scan journal 1795301145702 (1a200497c66.txn)\n")
